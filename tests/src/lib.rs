//! Helpers for the end-to-end tests: a temporary `NMEM_HOME`, the real `nmemd` on a real socket,
//! the real `nmem`/`nmemctl` binaries (built with `cargo build --release` first; see
//! [`bin_dir`] and `scripts/test`), the fixtures of `tests/fixtures`, and read-only access to the
//! database for assertions.
//!
//! Waiting is always on a condition with a deadline ([`wait_until`]), never a bare sleep.

pub mod sync;

use nmem_proto::paths::Paths;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The binaries the end-to-end tests run.
const BINARIES: [&str; 4] = ["nmemd", "nmem", "nmem-cli", "nmemctl"];

/// Where the release binaries are, found once:
/// 1. `NMEM_BIN_DIR` when it is set (`scripts/env.sh` sets it) and holds them (when it does not,
///    the search goes on, with a note);
/// 2. the folder of the build these tests belong to (`<target>/[<triple>/]release`, beside the
///    `deps/` folder that holds the test executable);
/// 3. `$CARGO_TARGET_DIR` (else this workspace's `target/`), in `$CARGO_BUILD_TARGET/release`,
///    any `<triple>/release`, then `release`.
///
/// The tests never build them (cargo holds the build folder's lock while the tests run): when
/// they are missing, the panic says what to run.
pub fn bin_dir() -> PathBuf {
    static DIR: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    match DIR.get_or_init(find_bin_dir) {
        Ok(d) => d.clone(),
        Err(msg) => panic!("{msg}"),
    }
}

fn has_binaries(d: &Path) -> bool {
    BINARIES.iter().all(|b| d.join(b).is_file())
}

const BUILD_HINT: &str = "build them first, from the repository's root: \
    `. scripts/env.sh && cargo build --release --workspace --bins --locked && scripts/build-hook` \
    (scripts/test does this, then runs every test)";

fn find_bin_dir() -> Result<PathBuf, String> {
    let mut tried = Vec::new();
    let from_env = std::env::var_os("NMEM_BIN_DIR").map(PathBuf::from);
    if let Some(d) = &from_env {
        if has_binaries(d) {
            return Ok(d.clone());
        }
        tried.push(d.clone());
    }
    // The test executable is <target>/[<triple>/]release/deps/<test>-<hash>.
    if let Some(d) = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.parent()?.to_path_buf()))
    {
        tried.push(d);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    if let Some(t) = std::env::var_os("CARGO_BUILD_TARGET") {
        tried.push(target.join(t).join("release"));
    }
    let mut triples: Vec<PathBuf> = std::fs::read_dir(&target)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains('-'))
        .map(|e| e.path().join("release"))
        .collect();
    triples.sort();
    tried.extend(triples);
    tried.push(target.join("release"));
    tried.dedup();
    let Some(found) = tried.iter().find(|d| has_binaries(d)).cloned() else {
        let looked: Vec<String> = tried.iter().map(|d| d.display().to_string()).collect();
        return Err(format!(
            "the release binaries ({}) were not found (looked in {}): {BUILD_HINT}; \
             or set NMEM_BIN_DIR to the folder that holds them",
            BINARIES.join(", "),
            looked.join(", ")
        ));
    };
    if let Some(d) = from_env {
        // scripts/env.sh derives NMEM_BIN_DIR from CARGO_TARGET_DIR when sourced: a target folder
        // chosen afterwards leaves it pointing at an empty one.
        use std::io::Write as _;
        let _ = writeln!(
            std::io::stderr(),
            "note: NMEM_BIN_DIR={} does not hold {}; using {}",
            d.display(),
            BINARIES.join(", "),
            found.display()
        );
    }
    Ok(found)
}

pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// This repository's test inputs, `tests/fixtures` (described in its README.md).
pub fn fixtures() -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    assert!(p.is_dir(), "fixtures not found at {}", p.display());
    p
}

pub fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(fixtures().join(rel)).unwrap_or_else(|e| panic!("fixture {rel}: {e}"))
}

/// A Claude Code PostToolUse(Write) of about 20 MB: a generated seed file of some 9.2 MB, carried
/// twice (in `tool_input` and in `tool_response`) as Claude Code does. Too big to keep in
/// `tests/fixtures`, so made here, the same bytes every time.
pub fn huge_write_payload() -> Vec<u8> {
    use std::fmt::Write as _;
    const SESSION: &str = "7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47";
    const CWD: &str = "/home/dev/projects/acme-api";
    const BODY_BYTES: usize = 9_200_000;
    let statuses = ["draft", "open", "paid", "void", "uncollectible"];
    let mut body = String::with_capacity(BODY_BYTES + 200);
    body.push_str("// Generated seed data for load tests. Do not edit by hand.\n");
    body.push_str("import type { Invoice } from \"@prisma/client\";\n\n");
    body.push_str("export const invoices: Omit<Invoice, \"createdAt\" | \"updatedAt\">[] = [\n");
    let mut i: u64 = 0;
    while body.len() < BODY_BYTES - 200 {
        i += 1;
        let _ = writeln!(
            body,
            "  {{ id: \"inv_{i:08}\", orgId: \"org_{:04}\", number: \"ACME-{i:08}\", \
             amountCents: {}, currency: \"USD\", status: \"{}\" }},",
            (i * 7919) % 5000,
            (i * 104_729) % 2_000_000,
            statuses[(i % 5) as usize]
        );
    }
    body.push_str("];\n");
    let file = format!("{CWD}/src/db/seed/invoices.seed.ts");
    let mut out = serde_json::to_vec(&serde_json::json!({
        "session_id": SESSION,
        "prompt_id": "e4b9c1d2-6a7f-4c3e-b815-0d2f9a6c4e71",
        "transcript_path": format!("/home/dev/.claude/projects/-home-dev-projects-acme-api/{SESSION}.jsonl"),
        "cwd": CWD,
        "permission_mode": "acceptEdits",
        "hook_event_name": "PostToolUse",
        "tool_name": "Write",
        "tool_input": { "file_path": file, "content": body },
        "tool_response": {
            "type": "create", "filePath": file, "content": body,
            "structuredPatch": [], "originalFile": null
        },
        "tool_use_id": "toolu_01Hg9eW8qA7sZ6xC5vB4nM3k",
        "duration_ms": 412,
    }))
    .unwrap();
    out.push(b'\n');
    out
}

/// Whether every test must run in full: `NMEM_REQUIRE_ALL=1`, which `scripts/test` (and so CI)
/// sets.
pub fn require_all() -> bool {
    std::env::var_os("NMEM_REQUIRE_ALL").is_some_and(|v| v == "1")
}

/// A test (or a part of one) needs something from outside the repository that this machine
/// lacks (`why` says what): with `NMEM_REQUIRE_ALL=1` that is a failure; otherwise print why it
/// is skipped, past cargo's output capture so that it shows, and let the caller go on without it.
pub fn skip_unless_required(why: &str) {
    if require_all() {
        panic!("{why}, and NMEM_REQUIRE_ALL=1 requires every test to run");
    }
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "skipped: {why} (NMEM_REQUIRE_ALL=1 makes this a failure)"
    );
}

/// Poll `cond` until it holds or `timeout` passes (then panic with `what`).
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A temporary NMEM_HOME, removed on drop (kept when the test panics, for inspection).
pub struct Home {
    pub dir: PathBuf,
    pub paths: Paths,
    tmp: Option<tempfile::TempDir>,
}

impl Home {
    pub fn new(tag: &str) -> Home {
        // Short: a Unix socket path must fit in 108 bytes (tempfile adds 6 random characters).
        let tmp = tempfile::Builder::new()
            .prefix(&format!("nmem-{tag}-"))
            .tempdir()
            .expect("a temporary NMEM_HOME");
        let dir = tmp.path().to_path_buf();
        let paths = Paths::under(&dir);
        Home {
            dir,
            paths,
            tmp: Some(tmp),
        }
    }

    /// A command for one of the binaries, with this home and without autostart.
    pub fn cmd(&self, name: &str) -> Command {
        let mut c = Command::new(bin(name));
        c.env("NMEM_HOME", &self.dir)
            .env_remove("NMEM_DB")
            .env_remove("NMEM_SOCKET")
            .env("NMEM_NO_AUTOSTART", "1");
        c
    }

    /// Run `nmem record` with `payload` on stdin.
    pub fn record(&self, harness: &str, payload: &[u8]) -> Output {
        self.record_with(harness, payload, |_| {})
    }

    pub fn record_with(
        &self,
        harness: &str,
        payload: &[u8],
        f: impl FnOnce(&mut Command),
    ) -> Output {
        let mut c = self.cmd("nmem");
        c.args(["record", "--harness", harness])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        f(&mut c);
        let mut child = c.spawn().expect("spawn nmem record");
        let mut stdin = child.stdin.take().unwrap();
        // A rejected payload may make the shim exit before reading it all.
        let _ = stdin.write_all(payload);
        drop(stdin);
        child.wait_with_output().unwrap()
    }

    /// Start nmemd and wait until it answers.
    pub fn start(&self) -> Daemon {
        self.start_with(|_| {})
    }

    /// Start nmemd with something more set on its command (`NMEM_DB` elsewhere, say), and wait
    /// until it answers.
    pub fn start_with(&self, f: impl FnOnce(&mut Command)) -> Daemon {
        let mut cmd = self.cmd("nmemd");
        f(&mut cmd);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(
                    self.dir
                        .join(format!("nmemd-{}.log", SEQ.fetch_add(1, Ordering::Relaxed))),
                )
                .unwrap(),
            ))
            .spawn()
            .expect("spawn nmemd");
        let d = Daemon {
            child: Some(child),
            socket: self.paths.socket.clone(),
        };
        wait_until(
            "nmemd to answer /v1/health",
            Duration::from_secs(20),
            || d.healthy(),
        );
        d
    }

    /// A read-only connection to the database.
    pub fn db(&self) -> rusqlite::Connection {
        rusqlite::Connection::open_with_flags(
            &self.paths.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .unwrap()
    }

    pub fn count(&self, sql: &str) -> i64 {
        self.db().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    /// Events waiting in the spool: records of its logs and files (`nmemctl status` counts the
    /// same way).
    pub fn spooled_events(&self) -> usize {
        nmem_proto::spool::backlog(&self.paths.spool).events as usize
    }

    /// The size of each spooled event as the spool's bounds count it, oldest first (files by
    /// name, then each log's records in order: the events of one test are spooled one way).
    pub fn spooled_sizes(&self) -> Vec<u64> {
        use nmem_proto::spool;
        let mut sizes: Vec<u64> = spool::list(&self.paths.spool)
            .unwrap()
            .iter()
            .map(|(_, n)| *n)
            .collect();
        for log in spool::logs(&self.paths.spool).unwrap() {
            let (file, meta) = spool::open_checked(&log).unwrap();
            for f in spool::scan(&file, meta.len(), true, u64::MAX).unwrap() {
                let (from, to) = f.span();
                sizes.push(to - from);
            }
        }
        sizes
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // Kept for inspection: the test's output names it.
            if let Some(t) = self.tmp.take() {
                let _ = t.keep();
            }
        }
    }
}

/// A running nmemd, stopped with SIGTERM on drop.
pub struct Daemon {
    pub child: Option<Child>,
    socket: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> i32 {
        self.child.as_ref().unwrap().id() as i32
    }

    /// A daemon the test spawned itself (its stderr elsewhere, say), once it answers.
    pub fn adopt(child: Child, home: &Home) -> Daemon {
        let d = Daemon {
            child: Some(child),
            socket: home.paths.socket.clone(),
        };
        wait_until(
            "nmemd to answer /v1/health",
            Duration::from_secs(20),
            || d.healthy(),
        );
        d
    }

    /// The process, no longer stopped on drop (the test waits for it itself).
    pub fn child_take(mut self) -> Child {
        self.child.take().unwrap()
    }

    pub fn healthy(&self) -> bool {
        nmem_proto::client::call(
            &self.socket,
            "GET",
            nmem_proto::wire::PATH_HEALTH,
            &[],
            b"",
            Duration::from_millis(500),
        )
        .map(|r| r.status == 200)
        .unwrap_or(false)
    }

    pub fn signal(&self, sig: i32) {
        unsafe { libc::kill(self.pid(), sig) };
    }

    /// SIGTERM and wait; returns the exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        self.signal(libc::SIGTERM);
        self.child.take().unwrap().wait().unwrap()
    }

    /// SIGKILL and reap.
    pub fn kill(mut self) {
        let mut c = self.child.take().unwrap();
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe { libc::kill(c.id() as i32, libc::SIGCONT) };
            unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            let _ = c.wait();
        }
    }
}

/// Store hook payloads on `home` through the batch route, as `nmem import` does: (event id,
/// received at, payload); every one must be stored.
pub fn send_batch(home: &Home, events: &[(String, i64, serde_json::Value)]) {
    let body: Vec<String> = events
        .iter()
        .map(|(id, received_at, payload)| {
            serde_json::json!({
                "event_id": id,
                "received_at": received_at,
                "harness": "claude-code",
                "payload": payload,
            })
            .to_string()
        })
        .collect();
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        "/v1/events/batch",
        &[],
        body.join("\n").as_bytes(),
        Duration::from_secs(60),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(reply["stored"], events.len(), "{reply}");
}

/// A Claude Code PostToolUse(Bash) payload with a unique command and tool_use_id.
pub fn bash_event(session: &str, n: usize) -> Vec<u8> {
    serde_json::json!({
        "session_id": session,
        "cwd": "/home/dev/projects/load",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": format!("echo {session}-event-{n}"), "description": "load" },
        "tool_response": { "stdout": format!("{session}-event-{n}\n"), "stderr": "", "interrupted": false },
        "tool_use_id": format!("toolu_load_{session}_{n}"),
    })
    .to_string()
    .into_bytes()
}

/// Hook events a Claude Code session would have sent, rebuilt from its transcript by the real
/// importer (`nmem_shim::import::replay`): one UserPromptSubmit per human prompt, one
/// PostToolUse (or PostToolUseFailure) per tool result, one PreCompact per compaction, each
/// with `transcript_path` = `path`, as Claude Code sends them.
pub fn hook_events_from_transcript(path: &Path) -> Vec<Vec<u8>> {
    let (harness, events): (Vec<_>, Vec<_>) = nmem_shim::import::replay(path)
        .unwrap_or_else(|| panic!("{} is not a session file", path.display()))
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
        .into_iter()
        .unzip();
    assert!(
        harness
            .iter()
            .all(|h| *h == nmem_proto::harness::Harness::ClaudeCode),
        "{} is not a Claude Code transcript",
        path.display()
    );
    events
}

/// A private PostgreSQL for the sync tests: `initdb` in a temporary folder, the server on a free
/// loopback port with its Unix socket in that folder, stopped (immediately) and removed on drop.
///
/// The server refuses to run as root, so when the tests run as root (CI does) every PostgreSQL
/// program runs as the `postgres` user (`runuser`), and the folder is handed to that user.
pub struct Postgres {
    pub port: u16,
    /// The folder of the data directory, the log and the Unix socket.
    pub dir: PathBuf,
    bin: PathBuf,
    running: bool,
    _tmp: tempfile::TempDir,
}

impl Postgres {
    /// Where PostgreSQL's programs are: `NMEM_PG_BIN`, else the newest
    /// `/usr/lib/postgresql/*/bin` (Debian's layout).
    pub fn bin_dir() -> Option<PathBuf> {
        if let Some(d) = std::env::var_os("NMEM_PG_BIN") {
            return Some(PathBuf::from(d));
        }
        let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .filter_map(|e| {
                let v = e.file_name().to_string_lossy().parse::<u32>().ok()?;
                let bin = e.path().join("bin");
                bin.join("initdb").is_file().then_some((v, bin))
            })
            .collect();
        found.sort();
        found.pop().map(|(_, b)| b)
    }

    /// Start a fresh server, or `None` (with the reason printed, or a failure under
    /// `NMEM_REQUIRE_ALL=1`) when PostgreSQL is not installed.
    pub fn start() -> Option<Postgres> {
        let Some(bin) = Self::bin_dir() else {
            skip_unless_required(
                "PostgreSQL is not installed (apt-get install postgresql, or set NMEM_PG_BIN)",
            );
            return None;
        };
        let tmp = tempfile::Builder::new()
            .prefix("nmem-pg-")
            .tempdir()
            .expect("a temporary folder for PostgreSQL");
        let dir = tmp.path().to_path_buf();
        if is_root() {
            let st = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(
                st.success(),
                "chown of {} to postgres failed",
                dir.display()
            );
        }
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().unwrap().port()
        };
        let mut pg = Postgres {
            port,
            dir,
            bin,
            running: false,
            _tmp: tmp,
        };
        let out = pg
            .program("initdb")
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(pg.dir.join("data"))
            .output()
            .expect("run initdb");
        assert!(
            out.status.success(),
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        pg.start_again();
        Some(pg)
    }

    /// A PostgreSQL program, run as the `postgres` user when the tests run as root.
    pub fn program(&self, name: &str) -> Command {
        let path = self.bin.join(name);
        if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    /// Start the server (again, after [`Postgres::stop`]) and wait until it accepts connections.
    pub fn start_again(&mut self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let out = self
            .program("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("server.log"))
            .args(["-w", "-t", "60", "-o", &opts, "start"])
            .stdin(Stdio::null())
            .output()
            .expect("run pg_ctl start");
        assert!(
            out.status.success(),
            "pg_ctl start failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
        );
        self.running = true;
    }

    /// Stop the server at once (`-m immediate`: as if it went away).
    pub fn stop(&mut self) {
        let _ = self
            .program("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-w", "-m", "immediate", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        self.running = false;
    }

    /// The URL nmem is given (loopback TCP: no TLS needed).
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Run one SQL statement with psql; its rows unaligned, `|`-separated, one per line.
    pub fn sql(&self, sql: &str) -> String {
        let out = self
            .program("psql")
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-U",
                "postgres",
                "-h",
            ])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "-d", "postgres", "-c", sql])
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql {sql:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }

    /// `pg_dump` of the whole database, as plain SQL.
    pub fn dump(&self) -> Vec<u8> {
        let out = self
            .program("pg_dump")
            .args(["-U", "postgres", "-h"])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "postgres"])
            .output()
            .expect("run pg_dump");
        assert!(
            out.status.success(),
            "pg_dump failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if self.running {
            self.stop();
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
