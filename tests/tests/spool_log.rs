//! The spool's log (`spool/events.log`): hooks append to it while the daemon is away, the daemon
//! seals and drains it while more hooks append. Real `nmem record` processes, a real `nmemd`.

use nmem_e2e::*;
use nmem_proto::spool;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

fn observations(home: &Home, tag: &str) -> (i64, i64) {
    home.db()
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT content) FROM observations WHERE content LIKE ?1",
            [format!("%{tag}-event-%")],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

/// `nmem record` of `payload`, its exit status once it ends; a hook still running after
/// `within` is killed and the test fails (a hostile spool must never hang it).
fn record_within(home: &Home, payload: &[u8], within: Duration) -> std::process::ExitStatus {
    let mut child = home
        .cmd("nmem")
        .args(["record"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _ = child.stdin.take().unwrap().write_all(payload);
    wait_for(&mut child, within, "nmem record")
}

fn wait_for(child: &mut Child, within: Duration, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > within {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {within:?}: it hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn status_json(home: &Home) -> serde_json::Value {
    let mut child = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for(&mut child, Duration::from_secs(20), "nmemctl status");
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut child.stdout.take().unwrap(), &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn hooks_spooling_while_the_daemon_starts_and_drains_lose_nothing_and_store_nothing_twice() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const THREADS: usize = 6;
    /// Each thread's hooks once the daemon has stored some: spooled while it drains.
    const AFTER: usize = 150;
    /// A bound on each thread's hooks, whatever happens.
    const MAX: usize = 2000;
    let home = Home::new("spoolrace");
    // Drain passes back to back, so the log is renamed aside and sealed while hooks append.
    std::fs::write(&home.paths.config, "[spool]\ndrain_interval_ms = 10\n").unwrap();
    // The hooks talk to a socket nobody listens on: every one spools, also once nmemd is up.
    let nowhere = home.dir.join("nobody.sock");
    let draining = Arc::new(AtomicBool::new(false));
    let hooks: Vec<_> = (0..THREADS)
        .map(|t| {
            let home_dir = home.dir.clone();
            let nowhere = nowhere.clone();
            let draining = draining.clone();
            std::thread::spawn(move || {
                let mut after = 0;
                let mut n = 0;
                while after < AFTER && n < MAX {
                    if draining.load(Ordering::Relaxed) {
                        after += 1;
                    }
                    let mut child = std::process::Command::new(bin("nmem"))
                        .arg("record")
                        .env("NMEM_HOME", &home_dir)
                        .env("NMEM_SOCKET", &nowhere)
                        .env("NMEM_NO_AUTOSTART", "1")
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .stderr(Stdio::piped())
                        .spawn()
                        .unwrap();
                    let _ = child
                        .stdin
                        .take()
                        .unwrap()
                        .write_all(&bash_event("spoolrace", t * MAX + n));
                    let out = child.wait_with_output().unwrap();
                    assert!(
                        out.status.success() && out.stderr.is_empty(),
                        "hook {t}/{n}: {out:?}"
                    );
                    n += 1;
                }
                n
            })
        })
        .collect();
    // The daemon starts while the hooks spool, and drains while they go on.
    wait_until("a first spooled event", Duration::from_secs(20), || {
        home.spooled_events() > 0
    });
    let _d = home.start();
    wait_until("a first drained event", Duration::from_secs(30), || {
        observations(&home, "spoolrace").0 > 0
    });
    draining.store(true, Ordering::Relaxed);
    let all: usize = hooks.into_iter().map(|h| h.join().unwrap()).sum();
    let all = all as i64;
    // An event leaves the spool (a file, or the sealed log holding it) only once committed.
    wait_until("the spool to drain", Duration::from_secs(60), || {
        home.spooled_events() == 0
    });
    assert_eq!(
        observations(&home, "spoolrace"),
        (all, all),
        "each event stored exactly once"
    );
    let s = status_json(&home);
    assert_eq!(s["spool_corrupt"], 0, "{s}");
    assert_eq!(s["spool_backlog"], 0, "{s}");
}

#[test]
fn a_torn_or_garbled_record_loses_only_itself() {
    let home = Home::new("spooltorn");
    for i in 0..2 {
        assert!(home
            .record("claude-code", &bash_event("spooltorn", i))
            .status
            .success());
    }
    let log = home.paths.spool.join(spool::LOG_NAME);
    {
        // What a hook killed in the middle of its write leaves, after some garbage.
        let whole = spool::frame(
            &spool::Header {
                v: 1,
                event_id: "torn".into(),
                received_at: nmem_proto::now_ms(),
                harness: "claude-code".into(),
            },
            &bash_event("lost", 0),
        )
        .unwrap();
        let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(b"not a record\n").unwrap();
        f.write_all(&whole[..whole.len() / 2]).unwrap();
    }
    for i in 2..4 {
        assert!(home
            .record("claude-code", &bash_event("spooltorn", i))
            .status
            .success());
    }
    assert!(
        spool::list(&home.paths.spool).unwrap().is_empty(),
        "the hooks appended to the log past the torn record, no file"
    );
    let _d = home.start();
    wait_until("the spool to drain", Duration::from_secs(20), || {
        home.spooled_events() == 0 && observations(&home, "spooltorn").0 == 4
    });
    assert_eq!(observations(&home, "spooltorn"), (4, 4));
    assert_eq!(observations(&home, "lost").0, 0);
    let s = status_json(&home);
    assert_eq!(
        s["spool_corrupt"], 1,
        "the bad stretch, quarantined once: {s}"
    );
    let corrupt: Vec<String> = std::fs::read_dir(home.paths.spool_corrupt())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        corrupt.len() == 1 && corrupt[0].ends_with(".garbled"),
        "{corrupt:?}"
    );
    let kept = std::fs::read(home.paths.spool_corrupt().join(&corrupt[0])).unwrap();
    assert!(
        kept.starts_with(b"not a record\n"),
        "the bytes are kept for a person to look at"
    );
    assert!(
        spool::logs(&home.paths.spool).unwrap().is_empty(),
        "the drained log is deleted"
    );
}

#[test]
fn a_hostile_log_hangs_neither_hook_nor_daemon_and_events_still_get_through() {
    let home = Home::new("spoolhostile");
    std::fs::create_dir_all(&home.paths.spool).unwrap();
    let log = home.paths.spool.join(spool::LOG_NAME);
    let within = Duration::from_secs(10);

    // A symlink to /dev/zero: never followed; the event goes to a file of its own.
    std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
    assert!(record_within(&home, &bash_event("spoolhostile", 0), within).success());
    assert_eq!(spool::list(&home.paths.spool).unwrap().len(), 1);
    assert_eq!(status_json(&home)["spool_backlog"], 1);
    let _d = home.start();
    wait_until(
        "the first event to be stored",
        Duration::from_secs(20),
        || observations(&home, "spoolhostile").0 == 1 && home.spooled_events() == 0,
    );
    drop(_d);

    // A FIFO with a reader (so opening it for writing succeeds): not written to either.
    let c = std::ffi::CString::new(log.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&log)
        .unwrap();
    for i in 1..3 {
        assert!(record_within(&home, &bash_event("spoolhostile", i), within).success());
    }
    assert_eq!(spool::list(&home.paths.spool).unwrap().len(), 2);
    assert_eq!(
        status_json(&home)["spool_backlog"],
        2,
        "status reads no FIFO"
    );
    let _d = home.start();
    wait_until(
        "all three events to be stored",
        Duration::from_secs(20),
        || observations(&home, "spoolhostile").0 == 3 && home.spooled_events() == 0,
    );
    assert_eq!(observations(&home, "spoolhostile"), (3, 3));
    // Both hostile logs were moved aside unread, and counted.
    let s = status_json(&home);
    assert_eq!(s["spool_corrupt"], 2, "{s}");
    drop(_d);

    // A log of another user's, holding a well-formed record: neither written nor read.
    if unsafe { libc::geteuid() } == 0 {
        let theirs = spool::frame(
            &spool::Header {
                v: 1,
                event_id: "theirs".into(),
                received_at: nmem_proto::now_ms(),
                harness: "claude-code".into(),
            },
            &bash_event("theirs", 0),
        )
        .unwrap();
        assert!(
            std::fs::symlink_metadata(&log).is_err(),
            "the daemon moved the FIFO aside"
        );
        std::fs::write(&log, &theirs).unwrap();
        std::os::unix::fs::chown(&log, Some(65534), Some(65534)).unwrap();
        assert!(record_within(&home, &bash_event("spoolhostile", 3), within).success());
        assert_eq!(
            std::fs::read(&log).unwrap(),
            theirs,
            "their log is not written to"
        );
        assert_eq!(status_json(&home)["spool_backlog"], 1, "nor counted");
        let _d = home.start();
        wait_until(
            "the fourth event to be stored",
            Duration::from_secs(20),
            || observations(&home, "spoolhostile").0 == 4 && home.spooled_events() == 0,
        );
        assert_eq!(observations(&home, "theirs").0, 0, "nor read");
        assert_eq!(status_json(&home)["spool_corrupt"], 3);
    } else {
        skip_unless_required("a log of another user's needs root");
    }

    // The next hook, with the daemon down again, has a log of its own.
    assert!(record_within(&home, &bash_event("spoolhostile", 4), within).success());
    assert!(std::fs::symlink_metadata(&log).unwrap().is_file());
    assert_eq!(spool::list(&home.paths.spool).unwrap().len(), 0);
    assert_eq!(home.spooled_events(), 1);
}
