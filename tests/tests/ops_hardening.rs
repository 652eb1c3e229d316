//! Issue 13's operations items, through the real binaries: impossible dates refused (11), stop,
//! status and restart with a hung daemon (12, 19), deletion that leaves no bytes behind (14),
//! space given back (15), backups that are never half-written, and restore (16), and a log that
//! cannot kill the daemon (18).

use nmem_e2e::*;
use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn ctl(home: &Home, args: &[&str]) -> Output {
    home.cmd("nmemctl").args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Run `cmd` to completion, failing the test (not hanging it) past `deadline`.
fn run_within(mut cmd: Command, deadline: Duration) -> Output {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_output(child, deadline)
}

fn wait_output(mut child: Child, deadline: Duration) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("still running after {deadline:?}: {}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn status_json(home: &Home) -> serde_json::Value {
    serde_json::from_slice(&ctl(home, &["status", "--json"]).stdout).unwrap()
}

fn bash_with(session: &str, n: usize, command: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": session, "cwd": "/home/dev/projects/ledger", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": command, "description": "run"},
        "tool_response": {"stdout": "ok\n", "stderr": "", "interrupted": false},
        "tool_use_id": format!("toolu_{session}_{n}"),
    })
    .to_string()
    .into_bytes()
}

fn prompt(session: &str, cwd: &str, text: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": session, "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": text,
    })
    .to_string()
    .into_bytes()
}

// ---- 11: dates --------------------------------------------------------------------------------

#[test]
fn impossible_dates_and_times_are_refused_and_change_nothing() {
    let home = Home::new("dates");
    let _d = home.start();
    assert!(home
        .record("claude-code", &bash_event("dates", 1))
        .status
        .success());
    for bad in [
        "2026-13-45",
        "2026-02-30",
        "2026-08-20T25:61:61Z",
        "2026-08-2é",
    ] {
        let out = home
            .cmd("nmem")
            .args(["search", "echo", "--all-projects", "--since", bad])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{bad}: {}", text(&out));
        assert!(
            text(&out).contains("is not a date") && text(&out).contains("2026-08-20"),
            "{bad}: says what to write: {}",
            text(&out)
        );
        let purge = ctl(&home, &["purge", "--before", bad, "--yes"]);
        assert_eq!(purge.status.code(), Some(1), "{bad}: {}", text(&purge));
        assert!(text(&purge).contains("is not a date"), "{}", text(&purge));
        let import = home
            .cmd("nmem")
            .args(["import", "--since", bad, "--dry-run"])
            .arg(&home.dir)
            .output()
            .unwrap();
        assert!(!import.status.success(), "{bad}: {}", text(&import));
        assert!(text(&import).contains("is not a date"), "{}", text(&import));
    }
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);

    // A receive time no calendar holds is refused, on every way in.
    let call = |headers: &[(&str, &str)], path: &str, body: &[u8]| {
        nmem_proto::client::call(
            &home.paths.socket,
            "POST",
            path,
            headers,
            body,
            Duration::from_secs(10),
        )
        .unwrap()
    };
    let min = i64::MIN.to_string();
    for at in [min.as_str(), "-1", "253402300800000"] {
        let r = call(
            &[("x-nmem-event-id", "badtime1"), ("x-nmem-received-at", at)],
            "/v1/events",
            &bash_event("dates", 2),
        );
        assert_eq!(r.status, 400, "{at}: {}", String::from_utf8_lossy(&r.body));
        assert!(String::from_utf8_lossy(&r.body).contains("received-at"));
    }
    let line = serde_json::json!({"event_id": "badtime2", "received_at": i64::MIN, "harness": "claude-code",
        "payload": serde_json::from_slice::<serde_json::Value>(&bash_event("dates", 3)).unwrap()});
    let r = call(&[], "/v1/events/batch", format!("{line}\n").as_bytes());
    assert_eq!(r.status, 200);
    let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(reply["stored"], 0, "{reply}");
    assert!(reply["rejected"][0]["message"]
        .as_str()
        .unwrap()
        .contains("not a time nmem stores"));
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE timestamp < 0"),
        0
    );
}

// ---- 12, 19: a hung daemon --------------------------------------------------------------------

#[test]
fn a_stopped_daemon_is_not_answering_and_stop_ends_it() {
    let home = Home::new("hung");
    let d = home.start();
    let pid = d.pid();
    d.signal(libc::SIGSTOP);

    let status = run_within(
        home.cmd("nmemctl").arg("status").clone_cmd(),
        Duration::from_secs(10),
    );
    assert_eq!(status.status.code(), Some(2), "{}", text(&status));
    assert!(
        text(&status).contains(&format!("not answering (pid {pid})")),
        "{}",
        text(&status)
    );
    let json = run_within(
        home.cmd("nmemctl").args(["status", "--json"]).clone_cmd(),
        Duration::from_secs(10),
    );
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["running"], true);
    assert_eq!(v["pid"], pid);

    let search = run_within(
        home.cmd("nmem")
            .args(["search", "anything", "--all-projects"])
            .clone_cmd(),
        Duration::from_secs(10),
    );
    assert!(!search.status.success());
    assert!(
        text(&search).contains(&format!("not answering (pid {pid})")),
        "{}",
        text(&search)
    );

    let stop = run_within(
        home.cmd("nmemctl").arg("stop").clone_cmd(),
        Duration::from_secs(60),
    );
    assert!(stop.status.success(), "{}", text(&stop));
    assert!(!text(&stop).contains("not running"), "{}", text(&stop));
    let mut child = d.child_take();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nmemd still alive"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(ctl(&home, &["status"]).status.code(), Some(1));
}

#[test]
fn restart_replaces_a_stopped_daemon() {
    let home = Home::new("hungrestart");
    let d = home.start();
    let old = d.pid();
    d.signal(libc::SIGSTOP);
    let restart = run_within(
        home.cmd("nmemctl").arg("restart").clone_cmd(),
        Duration::from_secs(60),
    );
    assert!(restart.status.success(), "{}", text(&restart));
    let v = status_json(&home);
    assert_eq!(v["running"], true, "{v}");
    assert!(v["version"].is_string(), "answering: {v}");
    assert_ne!(v["pid"], old);
    assert!(home
        .record("claude-code", &bash_event("hungrestart", 1))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    assert!(ctl(&home, &["stop"]).status.success());
    drop(d);
}

#[test]
fn stop_kills_a_daemon_that_ignores_sigterm_and_says_so() {
    if Command::new("flock").arg("--version").output().is_err() {
        skip_unless_required("flock(1) is not installed");
        return;
    }
    let home = Home::new("stubborn");
    let lock = home.paths.db_lock();
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    // A stand-in for a hung nmemd: holds the database lock with its pid in it, ignores SIGTERM.
    let mut fake = Command::new("sh")
        .arg("-c")
        .arg(r#"trap '' TERM; exec 9>>"$1"; flock -x 9; echo $$ > "$1"; echo locked; while :; do sleep 0.1 9>&-; done"#)
        .arg("sh")
        .arg(&lock)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 7];
    fake.stdout.as_mut().unwrap().read_exact(&mut buf).unwrap();
    let stop = run_within(
        home.cmd("nmemctl").arg("stop").clone_cmd(),
        Duration::from_secs(60),
    );
    assert!(stop.status.success(), "{}", text(&stop));
    assert!(
        text(&stop).contains("killed it (SIGKILL)") && text(&stop).contains(&fake.id().to_string()),
        "{}",
        text(&stop)
    );
    let st = fake.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGKILL));
}

// ---- 14, 15: deletion that deletes, space given back --------------------------------------------

fn contains(path: &std::path::Path, needle: &str) -> bool {
    let b = std::fs::read(path).unwrap_or_default();
    b.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[test]
fn purged_and_redacted_text_is_in_neither_the_file_the_wal_nor_a_backup() {
    let home = Home::new("scrub");
    let d = home.start();
    // Project `ledger`: purged. Text the redactor does not know at ingest, so it is stored.
    let purged = [
        "zephyrquartz771",
        "marmaladeprism552",
        "the nightly wombat ledger prompt",
    ];
    for i in 0..40 {
        let cmd = format!("deploy --target zephyrquartz771 --run {i} marmaladeprism552");
        assert!(home
            .record("claude-code", &bash_with("purgeme", i, &cmd))
            .status
            .success());
    }
    assert!(home
        .record(
            "claude-code",
            &prompt(
                "purgeme",
                "/home/dev/projects/ledger",
                "please fix the nightly wombat ledger prompt"
            )
        )
        .status
        .success());
    // Another project keeps its rows; one of them holds a code the redactor's new rule removes.
    for i in 0..40 {
        let cmd = format!("unlock VAULTCODE9931{i:02} then keepsake{i}");
        let ev = String::from_utf8(bash_with("keep", i, &cmd))
            .unwrap()
            .replace("/projects/ledger", "/projects/atlas");
        assert!(home.record("claude-code", ev.as_bytes()).status.success());
    }
    let db = home.paths.db.clone();
    let wal = db.with_extension("db-wal");
    wait_until("the index caught up", Duration::from_secs(20), || {
        home.count("SELECT observations_upto FROM fts_state") >= 80
    });
    assert!(
        purged[..2]
            .iter()
            .all(|s| contains(&db, s) || contains(&wal, s)),
        "the test's own check: the text is in the files before"
    );

    let out = ctl(&home, &["purge", "--project", "ledger", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE project = 'ledger'"),
        0
    );
    // A redaction rule added after these rows were stored: they hold the codes until applied.
    d.stop();
    std::fs::write(
        &home.paths.config,
        "[redact]\npatterns = [{ name = \"vault_code\", regex = \"VAULTCODE[0-9]+\" }]\n",
    )
    .unwrap();
    let d = home.start();
    assert!(home.count("SELECT COUNT(*) FROM observations WHERE content LIKE '%VAULTCODE%'") > 0);
    let out = ctl(&home, &["redact", "--apply"]);
    assert!(out.status.success(), "{}", text(&out));

    let backup = home.dir.join("after.db");
    assert!(ctl(&home, &["backup", backup.to_str().unwrap()])
        .status
        .success());
    for s in purged.iter().copied().chain(["VAULTCODE9931"]) {
        for f in [&db, &wal, &backup] {
            assert!(!contains(f, s), "{s} is still in {}", f.display());
        }
    }
    // What was kept is intact and still found.
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE project = 'atlas'"),
        40
    );
    let found = home
        .cmd("nmem")
        .args(["search", "keepsake7", "--all-projects", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert_eq!(v["items"].as_array().map(Vec::len), Some(1), "{v}");
    drop(d);
}

#[test]
fn maintain_gives_back_every_free_page_and_says_how_many() {
    let home = Home::new("reclaim");
    let _d = home.start();
    let big = "x".repeat(3000);
    for i in 0..300 {
        assert!(home
            .record(
                "claude-code",
                &bash_with("big", i, &format!("echo {i} {big}"))
            )
            .status
            .success());
    }
    let pages = || home.count("SELECT page_count FROM pragma_page_count");
    let before = pages();
    let out = ctl(&home, &["purge", "--session", "big", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        home.count("SELECT freelist_count FROM pragma_freelist_count"),
        0
    );
    assert!(pages() < before / 2, "{} of {before} pages left", pages());
    let m = ctl(&home, &["maintain"]);
    assert!(m.status.success(), "{}", text(&m));
    assert!(text(&m).contains("free pages reclaimed: "), "{}", text(&m));
    assert_eq!(
        home.count("SELECT freelist_count FROM pragma_freelist_count"),
        0
    );
}

// ---- 16: backup and restore -------------------------------------------------------------------

#[test]
fn a_killed_backup_leaves_no_file_at_its_name_and_a_rerun_works() {
    let home = Home::new("killedbackup");
    let _d = home.start();
    for i in 0..200 {
        assert!(home
            .record("claude-code", &bash_event("kb", i))
            .status
            .success());
    }
    let dest = home.dir.join("nightly.db");
    // A file size limit below the database's size: the copy is killed (SIGXFSZ) half-way.
    let mut cmd = home.cmd("nmemctl");
    cmd.args(["backup", dest.to_str().unwrap()]);
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 32 * 1024,
                rlim_max: 32 * 1024,
            };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let killed = run_within(cmd, Duration::from_secs(60));
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        killed.status.signal(),
        Some(libc::SIGXFSZ),
        "the test's own check: the backup was killed: {}",
        text(&killed)
    );
    assert!(
        !dest.exists(),
        "a killed backup left a file at the requested name"
    );
    let again = ctl(&home, &["backup", dest.to_str().unwrap()]);
    assert!(again.status.success(), "{}", text(&again));
    let c = rusqlite::Connection::open(&dest).unwrap();
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM observations", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 200);
    let leftovers: Vec<_> = std::fs::read_dir(&home.dir)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("nmem-backup"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "temporaries are cleaned up: {leftovers:?}"
    );
}

type Dump = Vec<(String, Vec<String>)>;

/// Two dumps are equal; a failure names the tables that differ, not the whole content.
fn assert_same(got: &Dump, want: &Dump) {
    let names = |d: &Dump| {
        d.iter()
            .map(|(t, r)| format!("{t}:{}", r.len()))
            .collect::<Vec<_>>()
    };
    let differ: Vec<&String> = got
        .iter()
        .zip(want)
        .filter(|(a, b)| a != b)
        .map(|(a, _)| &a.0)
        .collect();
    assert!(
        got == want,
        "tables differ: {differ:?}; got {:?}, want {:?}",
        names(got),
        names(want)
    );
}

/// Every table, row by row, as text (blobs as hex), for comparing two databases.
fn dump(path: &std::path::Path) -> Dump {
    let c = rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let tables: Vec<String> = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '%_fts%' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    tables
        .into_iter()
        .map(|t| {
            let mut stmt = c.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
            let n = stmt.column_count();
            let mut rows: Vec<String> = stmt
                .query_map([], |r| {
                    Ok((0..n)
                        .map(|i| match r.get_ref(i).unwrap() {
                            rusqlite::types::ValueRef::Blob(b) => {
                                b.iter().map(|x| format!("{x:02x}")).collect()
                            }
                            v => format!("{v:?}"),
                        })
                        .collect::<Vec<_>>()
                        .join("|"))
                })
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            rows.sort();
            (t, rows)
        })
        .collect()
}

#[test]
fn backup_then_restore_round_trips_everything_nmem_stores() {
    let home = Home::new("restore");
    let d = home.start();
    for i in 0..30 {
        assert!(home
            .record("claude-code", &bash_event("rt", i))
            .status
            .success());
    }
    assert!(home
        .record(
            "claude-code",
            &prompt("rt", "/home/dev/projects/load", "make the load test pass")
        )
        .status
        .success());
    assert!(ctl(&home, &["pin", "3"]).status.success());
    assert!(ctl(&home, &["purge", "--search", "rt-event-29", "--yes"])
        .status
        .success());
    d.stop();
    // Vectors and a model row, as the embedder would leave them (no model runs in this test).
    {
        let c = rusqlite::Connection::open(&home.paths.db).unwrap();
        c.execute_batch(
            "INSERT INTO embed_models (name, dim, active, obs_hi, prompts_hi) VALUES ('test-model', 4, 1, 30, 1);
             INSERT INTO obs_vectors (id, model, scale, vec) SELECT id, 1, 0.5, x'01020304' FROM observations;
             INSERT INTO prompt_vectors (id, model, scale, vec) SELECT id, 1, 0.25, x'7f00ff80' FROM prompts;
             INSERT INTO embed_redo (kind, id) VALUES (0, 2);",
        )
        .unwrap();
    }
    let d = home.start();
    let original = dump(&home.paths.db);
    for (t, rows) in &original {
        if [
            "sessions",
            "prompts",
            "observations",
            "audit",
            "embed_models",
            "obs_vectors",
            "prompt_vectors",
            "embed_redo",
        ]
        .contains(&t.as_str())
        {
            assert!(!rows.is_empty(), "the test's own check: {t} has rows");
        }
    }
    let backup = home.dir.join("keep.db");
    let b = ctl(&home, &["backup", backup.to_str().unwrap()]);
    assert!(b.status.success(), "{}", text(&b));
    assert_same(&dump(&backup), &original);

    // Life goes on after the backup ...
    for i in 100..110 {
        assert!(home
            .record("claude-code", &bash_event("later", i))
            .status
            .success());
    }
    let before_restore = dump(&home.paths.db);
    // ... and the backup is put back while the daemon runs.
    let r = run_within(
        home.cmd("nmemctl")
            .args(["restore", backup.to_str().unwrap()])
            .clone_cmd(),
        Duration::from_secs(60),
    );
    assert!(r.status.success(), "{}", text(&r));
    assert!(
        text(&r).contains("replaced database is kept as"),
        "{}",
        text(&r)
    );
    let v = status_json(&home);
    assert!(v["version"].is_string(), "nmemd runs again: {v}");
    assert_same(&dump(&home.paths.db), &original);
    let av = home.count("SELECT auto_vacuum FROM pragma_auto_vacuum");
    assert_eq!(av, 2, "still INCREMENTAL");
    // The replaced database is kept aside, whole.
    let aside: Vec<_> = std::fs::read_dir(home.paths.db.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("nmem.db.replaced-") && !n.ends_with("-wal") && !n.ends_with("-shm")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    // (The index watermark moved on when the stopping daemon indexed the last rows.)
    let unindexed = |d: Dump| -> Dump { d.into_iter().filter(|(t, _)| t != "fts_state").collect() };
    assert_same(&unindexed(dump(&aside[0])), &unindexed(before_restore));
    // Search works on the restored data, and new events are stored in it.
    let found = home
        .cmd("nmem")
        .args(["search", "rt-event-7", "--all-projects", "--json"])
        .output()
        .unwrap();
    let f: serde_json::Value = serde_json::from_slice(&found.stdout).unwrap();
    assert!(!f["items"].as_array().unwrap().is_empty(), "{f}");
    assert!(home
        .record("claude-code", &bash_event("after", 1))
        .status
        .success());
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE session_id = 'after'"),
        1
    );
    assert!(ctl(&home, &["stop"]).status.success());
    drop(d);
}

#[test]
fn restore_refuses_what_is_not_a_usable_nmem_database_and_changes_nothing() {
    let home = Home::new("badrestore");
    let d = home.start();
    assert!(home
        .record("claude-code", &bash_event("br", 1))
        .status
        .success());
    let junk = home.dir.join("junk.db");
    std::fs::write(&junk, b"not a database at all").unwrap();
    let other = home.dir.join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
        .unwrap();
    let newer = home.dir.join("newer.db");
    assert!(ctl(&home, &["backup", newer.to_str().unwrap()])
        .status
        .success());
    rusqlite::Connection::open(&newer)
        .unwrap()
        .execute_batch("PRAGMA user_version = 999;")
        .unwrap();
    for (f, why) in [
        (&junk, "not an SQLite database"),
        (&other, "not an nmem database"),
        (&newer, "newer nmem"),
        (&home.dir.join("missing.db"), "cannot read it"),
    ] {
        let out = ctl(&home, &["restore", f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains(why), "{why}: {}", text(&out));
        assert!(text(&out).contains("nothing was changed"), "{}", text(&out));
    }
    assert!(d.healthy(), "the daemon was left alone");
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
}

// ---- 18: logging ------------------------------------------------------------------------------

/// Make nmemd log one line on demand: a purge that empties a session logs that it removed it.
fn provoke_a_log_line(home: &Home, n: usize) {
    let session = format!("logline{n}");
    assert!(home
        .record("claude-code", &bash_event(&session, n))
        .status
        .success());
    let out = ctl(home, &["purge", "--session", &session, "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
}

#[test]
fn a_log_on_a_full_disk_is_counted_not_fatal() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        skip_unless_required("no /dev/full");
        return;
    };
    let home = Home::new("logfull");
    let mut cmd = home.cmd("nmemd");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(full))
        .spawn()
        .unwrap();
    let d = Daemon::adopt(child, &home);
    provoke_a_log_line(&home, 1);
    provoke_a_log_line(&home, 2);
    assert!(d.healthy());
    let v = status_json(&home);
    assert!(v["log_write_failures"].as_u64().unwrap() >= 3, "{v}");
    assert!(text(&ctl(&home, &["status"])).contains("could not be written"));
    let st = d.stop();
    assert!(
        st.success(),
        "{st:?}: it stops cleanly, its log still failing"
    );
    assert!(!home.paths.socket.exists());
}

#[test]
fn a_log_piped_to_a_reader_that_exits_is_counted_not_fatal() {
    let home = Home::new("logpipe");
    let mut cmd = home.cmd("nmemd");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // `nmemd 2>&1 | head -c 50`: read 50 bytes, then the reader is gone.
    let mut pipe = child.stderr.take().unwrap();
    let mut first = [0u8; 50];
    pipe.read_exact(&mut first).unwrap();
    drop(pipe);
    let d = Daemon::adopt(child, &home);
    provoke_a_log_line(&home, 1);
    provoke_a_log_line(&home, 2);
    assert!(d.healthy());
    assert!(status_json(&home)["log_write_failures"].as_u64().unwrap() >= 1);
    let st = d.stop();
    assert!(st.success(), "{st:?}");
    assert!(!home.paths.socket.exists(), "no stale socket");
    assert!(!home.paths.db_lock().exists() || ctl(&home, &["status"]).status.code() == Some(1));
}

/// `Command` is not `Clone`; the helpers above take one by value.
trait CloneCmd {
    fn clone_cmd(&mut self) -> Command;
}

impl CloneCmd for Command {
    fn clone_cmd(&mut self) -> Command {
        let mut c = Command::new(self.get_program());
        c.args(self.get_args());
        for (k, v) in self.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }
}
