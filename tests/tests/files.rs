//! Hostile files and paths (issue 13, items 1–6): what a careless user or another local user can
//! plant where nmem keeps its files. Each test plants the thing (a symlink, a FIFO, a regular
//! file where the socket goes, a folder others can write to, a socket bound by another uid, an
//! environment without `HOME` or a passwd entry), runs the real binaries, and checks that nmem
//! refuses it with a clear message, changes nothing it does not own, and never hangs: a hang is
//! detected with a deadline far above the bound (the test fails on the deadline, it does not
//! time anything).

use nmem_e2e::{bash_event, bin, skip_unless_required, wait_until, Home};
use std::ffi::CString;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Run `cmd` to completion, or kill it at `deadline` and fail: a daemon that should refuse to
/// start but runs instead must not hang the test.
fn run_within(cmd: &mut Command, deadline: Duration, what: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {what}: {e}"));
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still running after {deadline:?} (killed); stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn mkfifo(path: &Path) {
    let c = CString::new(path.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Opens the FIFOs for writing (and closes them) on drop, so a reader blocked on one (the bug
/// under test) is released and the test ends with a failure instead of hanging forever.
struct FifoRelease(Vec<PathBuf>);

impl Drop for FifoRelease {
    fn drop(&mut self) {
        // Opening for writing succeeds only while a reader waits (else ENXIO): keep releasing
        // readers until none has waited for a while, within a bound.
        let start = Instant::now();
        let mut idle_since = Instant::now();
        while start.elapsed() < Duration::from_secs(10)
            && idle_since.elapsed() < Duration::from_millis(500)
        {
            for p in &self.0 {
                let c = CString::new(p.to_str().unwrap()).unwrap();
                let fd = unsafe { libc::open(c.as_ptr(), libc::O_WRONLY | libc::O_NONBLOCK) };
                if fd >= 0 {
                    unsafe { libc::close(fd) };
                    idle_since = Instant::now();
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// SIGKILLs a daemon when the test fails: one stuck on what the test planted (the bug) would
/// never finish a SIGTERM, and the test must fail, not hang. Declare it after the [`Daemon`] so it
/// is dropped first.
struct KillOnFailure(i32);

impl Drop for KillOnFailure {
    fn drop(&mut self) {
        if std::thread::panicking() {
            unsafe { libc::kill(self.0, libc::SIGKILL) };
        }
    }
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn is_root() -> bool {
    unsafe { libc::geteuid() == 0 }
}

/// A uid with no entry in /etc/passwd (read directly: the tests must not use NSS either).
fn unused_uid() -> u32 {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let used: Vec<u32> = passwd
        .lines()
        .filter_map(|l| l.split(':').nth(2)?.parse().ok())
        .collect();
    (47_000 + std::process::id() % 1000..)
        .find(|u| !used.contains(u))
        .unwrap()
}

/// Give `dir` (and what is in it) to `uid`, so a process running as that uid can use it.
fn chown_tree(dir: &Path, uid: u32) {
    let st = Command::new("chown")
        .args(["-R", &format!("{uid}:{uid}")])
        .arg(dir)
        .status()
        .unwrap();
    assert!(st.success());
}

/// Whether `uid` can execute the binaries (every folder above them must let it through).
fn binaries_reachable_by_others() -> bool {
    let nmem = bin("nmem");
    nmem.ancestors()
        .skip(1)
        .all(|d| std::fs::metadata(d).is_ok_and(|m| m.mode() & 0o001 != 0))
        && std::fs::metadata(&nmem).is_ok_and(|m| m.mode() & 0o001 != 0)
}

fn setpriv(uid: u32) -> Option<Command> {
    if !is_root() {
        skip_unless_required("this part needs root (to run as a uid without a passwd entry)");
        return None;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        skip_unless_required("setpriv (util-linux) is not installed");
        return None;
    }
    if !binaries_reachable_by_others() {
        skip_unless_required("the binaries' folder is not reachable by other uids");
        return None;
    }
    let mut c = Command::new("setpriv");
    c.arg(format!("--reuid={uid}"))
        .arg(format!("--regid={uid}"))
        .arg("--clear-groups");
    Some(c)
}

// Item 1 ------------------------------------------------------------------------------------

#[test]
fn a_symlinked_lock_or_database_is_refused_and_its_target_left_untouched() {
    let home = Home::new("symlock");
    let victim = home.dir.join("victim.txt");
    std::fs::write(&victim, b"precious contents\n").unwrap();
    std::os::unix::fs::symlink(&victim, home.dir.join("nmem.db.lock")).unwrap();
    let out = run_within(&mut home.cmd("nmemd"), Duration::from_secs(20), "nmemd");
    assert!(!out.status.success(), "nmemd must refuse a symlinked lock");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nmem.db.lock") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious contents\n");

    // The database itself as a symlink.
    std::fs::remove_file(home.dir.join("nmem.db.lock")).unwrap();
    std::os::unix::fs::symlink(&victim, &home.paths.db).unwrap();
    let out = run_within(&mut home.cmd("nmemd"), Duration::from_secs(20), "nmemd");
    assert!(
        !out.status.success(),
        "nmemd must refuse a symlinked database"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nmem.db") && err.contains("symbolic link"),
        "{err}"
    );
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious contents\n");
}

#[test]
fn a_folder_owned_by_another_user_is_refused() {
    if !is_root() {
        skip_unless_required("needs root (to give a folder to another uid)");
        return;
    }
    let home = Home::new("notmine");
    let other = unused_uid();
    chown_tree(&home.dir, other);
    let out = run_within(&mut home.cmd("nmemd"), Duration::from_secs(20), "nmemd");
    assert!(
        !out.status.success(),
        "nmemd must refuse another user's folder"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("belongs to uid {other}")) && err.contains("NMEM_"),
        "{err}"
    );
    assert!(!home.paths.db.exists(), "nothing created there");
    chown_tree(&home.dir, 0);
}

// Item 2 ------------------------------------------------------------------------------------

#[test]
fn spool_entries_that_are_not_regular_files_are_quarantined_and_the_drain_goes_on() {
    let home = Home::new("spoolhostile");
    std::fs::create_dir_all(&home.paths.spool).unwrap();
    let t = nmem_proto::now_ms() - 60_000;
    let zero = nmem_proto::spool::file_name(t, "zero");
    let fifo = nmem_proto::spool::file_name(t + 1, "fifo");
    let folder = nmem_proto::spool::file_name(t + 2, "folder");
    std::os::unix::fs::symlink("/dev/zero", home.paths.spool.join(&zero)).unwrap();
    mkfifo(&home.paths.spool.join(&fifo));
    let _release = FifoRelease(vec![home.paths.spool.join(&fifo)]);
    std::fs::create_dir(home.paths.spool.join(&folder)).unwrap();
    let mut planted = vec![zero, fifo, folder];
    if is_root() {
        // A well-formed spool file that another user wrote: not read.
        let theirs = nmem_proto::spool::write(
            &home.paths.spool,
            &nmem_proto::spool::Header {
                v: 1,
                event_id: "theirs".into(),
                received_at: t + 3,
                harness: "claude-code".into(),
            },
            &bash_event("theirs", 1),
        )
        .unwrap();
        let c = CString::new(theirs.to_str().unwrap()).unwrap();
        let other = unused_uid();
        assert_eq!(unsafe { libc::lchown(c.as_ptr(), other, other) }, 0);
        planted.push(theirs.file_name().unwrap().to_str().unwrap().to_string());
    } else {
        skip_unless_required("the other-user spool file needs root");
    }
    // A real event spooled behind them (daemon down, no autostart).
    assert!(home
        .record("claude-code", &bash_event("behind", 1))
        .status
        .success());
    assert_eq!(home.spooled_events(), planted.len() + 1);

    let d = home.start();
    let _kill = KillOnFailure(d.pid());
    // The bound is one drain pass (milliseconds); 20 s is far above it.
    wait_until(
        "the spool to drain past the planted entries",
        Duration::from_secs(20),
        || home.spooled_events() == 0,
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    for name in &planted {
        assert!(
            home.paths
                .spool_corrupt()
                .join(name)
                .symlink_metadata()
                .is_ok(),
            "{name} is quarantined"
        );
    }
    let st = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert_eq!(s["spool_corrupt"], planted.len(), "{s}");
    assert!(d.healthy());
    // SIGTERM completes.
    d.signal(libc::SIGTERM);
    let mut child = {
        let mut d = d;
        d.child.take().unwrap()
    };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("nmemd did not exit within 20 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
}

// Item 3 ------------------------------------------------------------------------------------

fn with_transcript(session: &str, n: usize, transcript: &Path) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(&bash_event(session, n)).unwrap();
    v["transcript_path"] = serde_json::json!(transcript.to_str().unwrap());
    v.to_string().into_bytes()
}

#[test]
fn a_transcript_path_naming_a_fifo_device_or_folder_never_blocks_other_events() {
    let home = Home::new("tfifo");
    let fifo = home.dir.join("fifo.jsonl");
    mkfifo(&fifo);
    let zero = home.dir.join("zero.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let folder = home.dir.join("folder.jsonl");
    std::fs::create_dir(&folder).unwrap();
    let d = home.start();
    // Declared after the daemon, so dropped before it: a daemon blocked on the FIFO is released
    // and can stop.
    let release = FifoRelease(vec![fifo.clone()]);
    let kill = KillOnFailure(d.pid());
    // The hook's deadline is raised far above what storing takes: an event that is spooled here
    // means the daemon was blocked for 10 s.
    let hook = |session: &str, n: usize, t: &Path| {
        home.record_with("claude-code", &with_transcript(session, n, t), |c| {
            c.env("NMEM_TIMEOUT_MS", "10000");
        })
    };
    let mut n = 0;
    for t in [&fifo, &fifo, &zero, &folder, &fifo] {
        n += 1;
        let out = hook("hostile-t", n, t);
        assert!(out.status.success(), "{out:?}");
        assert!(d.healthy(), "/v1/health answers after event {n}");
    }
    // An ordinary event after them.
    n += 1;
    assert!(home
        .record("claude-code", &bash_event("after", 1))
        .status
        .success());
    assert_eq!(home.spooled_events(), 0, "every event was stored directly");
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), n as i64);

    // The spool drain: the same events spooled while the daemon is down are drained.
    drop(kill);
    d.stop();
    for i in 0..2 {
        assert!(hook("spooled-t", i, &fifo).status.success());
    }
    assert!(home
        .record("claude-code", &bash_event("spooled-after", 1))
        .status
        .success());
    assert_eq!(home.spooled_events(), 3);
    let d = home.start();
    let _release = release;
    let _kill = KillOnFailure(d.pid());
    wait_until(
        "the spool to drain past events naming a FIFO",
        Duration::from_secs(20),
        || home.spooled_events() == 0,
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations"),
        n as i64 + 3
    );
}

// Item 4 ------------------------------------------------------------------------------------

#[test]
fn nmem_socket_naming_a_regular_file_leaves_it_alone() {
    let home = Home::new("sockfile");
    let precious = home.dir.join("notes.txt");
    std::fs::write(&precious, b"my notes\n").unwrap();
    let out = run_within(
        home.cmd("nmemd").env("NMEM_SOCKET", &precious),
        Duration::from_secs(20),
        "nmemd",
    );
    assert!(!out.status.success(), "nmemd must refuse");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a socket") && err.contains("NMEM_SOCKET"),
        "{err}"
    );
    assert_eq!(std::fs::read(&precious).unwrap(), b"my notes\n");
    assert!(!home.paths.db.exists(), "a refused start creates nothing");
}

#[test]
fn a_folder_others_can_write_to_is_refused_and_never_chmodded() {
    let home = Home::new("shared");
    let shared = home.dir.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    for (var, file) in [("NMEM_DB", "nmem.db"), ("NMEM_SOCKET", "nmemd.sock")] {
        let out = run_within(
            home.cmd("nmemd").env(var, shared.join(file)),
            Duration::from_secs(20),
            "nmemd",
        );
        assert!(!out.status.success(), "{var} in a shared folder is refused");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("writable by others") && err.contains(var),
            "{var}: {err}"
        );
        assert_eq!(mode(&shared), 0o1777, "{var}: the folder's mode is kept");
        assert_eq!(
            std::fs::read_dir(&shared).unwrap().count(),
            0,
            "{var}: nothing created"
        );
    }
    // A folder nmem creates is owner-only.
    let fresh = home.dir.join("fresh/deeper");
    let d = home.start_with(|c| {
        c.env("NMEM_DB", fresh.join("nmem.db"));
    });
    assert_eq!(mode(&fresh), 0o700);
    assert_eq!(mode(fresh.parent().unwrap()), 0o700);
    drop(d);
}

// Item 5 ------------------------------------------------------------------------------------

#[test]
fn a_socket_bound_by_another_user_gets_nothing_and_the_hook_spools() {
    let other = unused_uid();
    let Some(mut squat) = setpriv(other) else {
        return;
    };
    // The squatter: a real nmemd run by another uid, in its own folder.
    let theirs = Home::new("squatter");
    chown_tree(&theirs.dir, other);
    let log = std::fs::File::create(
        std::env::temp_dir().join(format!("nmem-squatter-{}.log", std::process::id())),
    )
    .unwrap();
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
            let _ = self.0.wait();
        }
    }
    let squatter = Reap(
        squat
            .arg("--")
            .arg(bin("nmemd"))
            .env("NMEM_HOME", &theirs.dir)
            .env_remove("NMEM_DB")
            .env_remove("NMEM_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    wait_until("the squatter to listen", Duration::from_secs(20), || {
        theirs.paths.socket.exists()
    });

    let home = Home::new("victim");
    let with_squat = |c: &mut Command| {
        c.env("NMEM_SOCKET", &theirs.paths.socket);
    };
    let out = home.record_with("claude-code", &bash_event("squat", 1), with_squat);
    assert!(out.status.success(), "{out:?}");
    let resume = nmem_e2e::fixture("hooks/claude-code/session_start.resume.json");
    let out = home.record_with("claude-code", &resume, with_squat);
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stdout.is_empty(),
        "nothing the squatter says is printed: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        home.spooled_events(),
        2,
        "both events are spooled, not sent"
    );
    let c = rusqlite::Connection::open_with_flags(
        &theirs.paths.db,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let got: i64 = c
        .query_row(
            "SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM sessions)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(got, 0, "the squatter received nothing");
    // The CLI refuses it too, saying why.
    let st = home
        .cmd("nmem")
        .args(["search", "anything"])
        .env("NMEM_SOCKET", &theirs.paths.socket)
        .output()
        .unwrap();
    assert!(!st.status.success());
    let err = String::from_utf8_lossy(&st.stderr);
    assert!(err.contains("not as you"), "{err}");
    drop(squatter);
    chown_tree(&theirs.dir, 0);
}

// Item 6 ------------------------------------------------------------------------------------

#[test]
fn without_home_or_a_passwd_entry_every_binary_runs_and_the_hook_exits_0() {
    // As this user, without HOME (and without the runtime folder: /tmp/nmem-<uid> is used).
    let me = unsafe { libc::geteuid() };
    let fallback = PathBuf::from(format!("/tmp/nmem-{me}"));
    let existed = fallback.exists();
    let out = Command::new(bin("nmem"))
        .args(["record", "--harness", "claude-code"])
        .env_remove("HOME")
        .env_remove("XDG_RUNTIME_DIR")
        .env_remove("NMEM_HOME")
        .env_remove("NMEM_DB")
        .env_remove("NMEM_SOCKET")
        .env("NMEM_NO_AUTOSTART", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "empty stdin is malformed: {out:?}"
    );
    if !existed {
        let _ = std::fs::remove_dir_all(&fallback);
    }

    let uid = unused_uid();
    let Some(_) = setpriv(uid) else {
        return;
    };
    let fallback = PathBuf::from(format!("/tmp/nmem-{uid}"));
    let _ = std::fs::remove_dir_all(&fallback);
    let run = |args: &[&str], stdin: &[u8]| {
        let mut c = setpriv(uid).unwrap();
        c.arg("--")
            .arg(bin(args[0]))
            .args(&args[1..])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("NMEM_NO_AUTOSTART", "1")
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        use std::io::Write;
        let _ = child.stdin.take().unwrap().write_all(stdin);
        child.wait_with_output().unwrap()
    };
    let event = bash_event("nopasswd", 1);
    let out = run(&["nmem", "record"], &event);
    assert_eq!(out.status.code(), Some(0), "the hook exits 0: {out:?}");
    // Counted from the bytes: the log is that user's, which the spool's own reader refuses.
    let log = std::fs::read(fallback.join("spool").join(nmem_proto::spool::LOG_NAME)).unwrap();
    let spooled = nmem_proto::spool::scan(&log[..], log.len() as u64, true, u64::MAX).unwrap();
    assert!(
        matches!(spooled[..], [nmem_proto::spool::Frame::Record { .. }]),
        "spooled under {}: {spooled:?}",
        fallback.display()
    );
    let meta = std::fs::metadata(&fallback).unwrap();
    assert_eq!((meta.uid(), meta.mode() & 0o777), (uid, 0o700));
    // The other binaries run too (no daemon: their own exit codes, never a signal).
    for args in [
        &["nmemctl", "status"][..],
        &["nmem", "search", "x"],
        &["nmemd", "--check-config"],
    ] {
        let out = run(args, b"");
        assert!(out.status.code().is_some(), "{args:?} was killed: {out:?}");
    }
    std::fs::remove_dir_all(&fallback).unwrap();

    // A fallback folder planted by someone else is not used: exit 0, a message, nothing written.
    std::fs::create_dir(&fallback).unwrap();
    std::fs::set_permissions(&fallback, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = run(&["nmem", "record"], &event);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot spool") && err.contains("belongs to uid 0"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&fallback).unwrap().count(), 0);
    std::fs::remove_dir_all(&fallback).unwrap();
}

/// Every way in checks the event id the same way (`RawEvent::new`): a spool file whose header
/// names an id the socket would refuse is quarantined, not stored, and the drain goes on.
#[test]
fn a_spool_file_with_an_event_id_the_socket_would_refuse_is_quarantined() {
    let home = Home::new("spoolbadid");
    std::fs::create_dir_all(&home.paths.spool).unwrap();
    let t = nmem_proto::now_ms() - 60_000;
    let bad = nmem_proto::spool::write(
        &home.paths.spool,
        &nmem_proto::spool::Header {
            v: 1,
            event_id: "not_an_id_x".into(),
            received_at: t,
            harness: "claude-code".into(),
        },
        &bash_event("badid", 1),
    )
    .unwrap();
    assert!(home
        .record("claude-code", &bash_event("behind", 2))
        .status
        .success());
    assert_eq!(home.spooled_events(), 2);
    let _d = home.start();
    wait_until("the spool to drain", Duration::from_secs(20), || {
        home.spooled_events() == 0
    });
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE event_id = 'not_an_id_x'"),
        0
    );
    assert!(home
        .paths
        .spool_corrupt()
        .join(bad.file_name().unwrap())
        .is_file());
}
