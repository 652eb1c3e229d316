//! `nmemctl` operations: backup while writing, pause and resume, pin, maintain, export,
//! config check, start and stop.

use nmem_e2e::*;
use std::time::Duration;

fn ctl(home: &Home, args: &[&str]) -> std::process::Output {
    home.cmd("nmemctl").args(args).output().unwrap()
}

#[test]
fn a_backup_taken_while_events_stream_in_is_consistent() {
    let home = Home::new("backup");
    let _d = home.start();
    let dest = home.dir.join("backup.db");
    std::thread::scope(|s| {
        let writer = s.spawn(|| {
            for i in 0..300 {
                assert!(home
                    .record("claude-code", &bash_event("backup", i))
                    .status
                    .success());
            }
        });
        wait_until("some events stored", Duration::from_secs(20), || {
            home.count("SELECT COUNT(*) FROM observations") > 20
        });
        let out = ctl(&home, &["backup", dest.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        assert!(String::from_utf8_lossy(&out.stdout).contains("integrity ok"));
        writer.join().unwrap();
    });
    let c = rusqlite::Connection::open(&dest).unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let n: i64 = c
        .query_row("SELECT COUNT(*) FROM observations", [], |r| r.get(0))
        .unwrap();
    assert!(n > 0 && n <= 300, "{n}");
    let again = ctl(&home, &["backup", dest.to_str().unwrap()]);
    assert_eq!(
        again.status.code(),
        Some(1),
        "an existing file is never overwritten"
    );
}

#[test]
fn pause_stops_recording_and_resume_starts_it_again() {
    let home = Home::new("pause");
    let _d = home.start();
    assert!(ctl(&home, &["pause"]).status.success());
    let out = home.record("claude-code", &bash_event("pause", 1));
    assert!(out.status.success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 0);
    assert_eq!(home.spooled_events(), 0);
    let s: serde_json::Value =
        serde_json::from_slice(&ctl(&home, &["status", "--json"]).stdout).unwrap();
    assert_eq!(s["paused"], true);
    assert!(ctl(&home, &["resume"]).status.success());
    assert!(home
        .record("claude-code", &bash_event("pause", 2))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
}

#[test]
fn pin_maintain_export_and_config_check() {
    let home = Home::new("ops");
    let _d = home.start();
    for i in 0..5 {
        assert!(home
            .record("claude-code", &bash_event("ops", i))
            .status
            .success());
    }
    assert!(home
        .record(
            "claude-code",
            &fixture("hooks/claude-code/user_prompt_submit.json")
        )
        .status
        .success());
    assert!(ctl(&home, &["pin", "2"]).status.success());
    assert_eq!(
        home.count("SELECT is_pinned FROM observations WHERE id = 2"),
        1
    );
    assert!(ctl(&home, &["unpin", "2"]).status.success());
    assert_eq!(
        home.count("SELECT is_pinned FROM observations WHERE id = 2"),
        0
    );
    let missing = ctl(&home, &["pin", "999"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no observation has id 999"));

    let m = ctl(&home, &["maintain"]);
    assert!(m.status.success(), "{m:?}");
    let text = String::from_utf8_lossy(&m.stdout);
    assert!(
        text.contains("observations_fts ok") && text.contains("WAL checkpoint: complete"),
        "{text}"
    );
    let s: serde_json::Value =
        serde_json::from_slice(&ctl(&home, &["status", "--json"]).stdout).unwrap();
    assert!(s["last_maintenance_ms"].as_u64().is_some());

    let out = ctl(&home, &["export"]);
    assert!(out.status.success());
    let lines: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let count = |t: &str| lines.iter().filter(|l| l["type"] == t).count();
    assert_eq!(
        (count("session"), count("prompt"), count("observation")),
        (2, 1, 5)
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "observation" && l["metadata"].is_object()),
        "JSON columns stay JSON"
    );

    assert!(ctl(&home, &["config", "check"]).status.success());
    std::fs::write(
        &home.paths.config,
        "[redact]\npatterns = [{ name = \"bad\", regex = \"(\" }]\n",
    )
    .unwrap();
    let bad = ctl(&home, &["config", "check"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("`bad`"),
        "{bad:?}"
    );
}

#[test]
fn start_and_stop_without_a_service_manager() {
    let home = Home::new("startstop");
    let up = home
        .cmd("nmemctl")
        .arg("start")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(up.status.success(), "{up:?}");
    assert!(home
        .record("claude-code", &bash_event("ss", 1))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    let down = home
        .cmd("nmemctl")
        .arg("stop")
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(down.status.success(), "{down:?}");
    assert!(!home.paths.socket.exists());
    assert_eq!(ctl(&home, &["status"]).status.code(), Some(1));
}

/// Store `payload` as received `days_ago` days ago, straight through the socket API.
fn record_at(home: &Home, n: usize, days_ago: i64, payload: &[u8]) {
    let at = (nmem_proto::now_ms() - days_ago * 86_400_000).to_string();
    let id = format!("old{n:020}");
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        "/v1/events",
        &[("x-nmem-event-id", &id), ("x-nmem-received-at", &at)],
        payload,
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

fn read_event(n: usize) -> Vec<u8> {
    serde_json::json!({
        "session_id": "ret", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "PostToolUse",
        "tool_name": "Read", "tool_input": {"file_path": format!("/home/dev/projects/acme-api/src/module_{n}/with/a/rather/long/path/file_{n}.ts")},
        "tool_use_id": format!("toolu_ret_{n}")
    })
    .to_string()
    .into_bytes()
}

#[test]
fn retention_dry_run_apply_pinned_and_the_file_shrinks() {
    let home = Home::new("retention");
    // Sweeping by hand only: `maintain` must not sweep what this test looks at.
    std::fs::write(&home.paths.config, "[retention]\nsweep = false\n").unwrap();
    let _d = home.start();
    for n in 0..3000 {
        record_at(&home, n, 100, &read_event(n)); // file_read: 90 days by default
    }
    for n in 0..20 {
        record_at(&home, 10_000 + n, 100, &bash_event("ret", n)); // command: 180 days
    }
    record_at(&home, 20_000, 1, &read_event(99_999)); // recent
    assert!(ctl(&home, &["pin", "7"]).status.success());
    assert!(ctl(&home, &["maintain"]).status.success());
    let size_before = std::fs::metadata(&home.paths.db).unwrap().len();

    let dry = ctl(&home, &["retention", "--json"]);
    assert!(dry.status.success(), "{dry:?}");
    let r: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(r["mode"], "dry-run");
    assert_eq!(
        r["total_candidates"], 2999,
        "old reads but the pinned one: {r}"
    );
    assert_eq!(r["by_reason"]["age"], 2999);
    assert!(r["candidate_ids"].as_array().unwrap().len() <= 1000);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations"),
        3021,
        "a dry run deletes nothing"
    );

    let human = ctl(&home, &["retention"]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("--apply"));

    let applied: serde_json::Value =
        serde_json::from_slice(&ctl(&home, &["retention", "--apply", "--json"]).stdout).unwrap();
    assert_eq!(applied["deleted_observations"], 2999);
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 22);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE id = 7 AND is_pinned = 1"),
        1,
        "pinned rows survive"
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'command'"),
        20
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM audit WHERE action = 'retention' AND observations = 2999"),
        1
    );
    assert!(ctl(&home, &["maintain"]).status.success());
    let size_after = std::fs::metadata(&home.paths.db).unwrap().len();
    assert!(
        size_after < size_before,
        "the file shrinks: {size_before} → {size_after}"
    );
    // The index stays consistent with the table.
    let m = String::from_utf8(ctl(&home, &["maintain"]).stdout).unwrap();
    assert!(m.contains("observations_fts ok"), "{m}");
}

#[test]
fn maintenance_sweeps_by_retention_keeps_pinned_and_drops_emptied_sessions() {
    let home = Home::new("sweep");
    let _d = home.start();
    // An old session of reads only (90 days by default), one of its reads pinned; an old
    // session of commands (180 days: kept); a recent read.
    for n in 0..50 {
        let mut e: serde_json::Value = serde_json::from_slice(&read_event(n)).unwrap();
        e["session_id"] = serde_json::json!(if n < 25 { "old-reads" } else { "old-reads-2" });
        record_at(&home, n, 120, e.to_string().as_bytes());
    }
    for n in 0..5 {
        record_at(&home, 100 + n, 120, &bash_event("old-cmds", n));
    }
    record_at(&home, 200, 1, &read_event(999));
    let pinned = home.count("SELECT MIN(id) FROM observations WHERE session_id = 'old-reads'");
    assert!(ctl(&home, &["pin", &pinned.to_string()]).status.success());
    let out = ctl(&home, &["maintain"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("retention sweep: 49 observations and 0 prompts"),
        "{text}"
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 7);
    assert_eq!(
        home.count(&format!(
            "SELECT is_pinned FROM observations WHERE id = {pinned}"
        )),
        1
    );
    // The session that kept its pinned read stays; the one left empty is gone.
    assert_eq!(
        home.count("SELECT COUNT(*) FROM sessions WHERE id IN ('old-reads', 'old-cmds')"),
        2
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM sessions WHERE id = 'old-reads-2'"),
        0
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM audit WHERE action = 'retention' AND observations = 49"),
        1
    );
    // A second run finds nothing more.
    let again = String::from_utf8(ctl(&home, &["maintain"]).stdout).unwrap();
    assert!(again.contains("retention sweep: 0 observations"), "{again}");
}

#[test]
fn purge_by_search_includes_prompts_and_is_a_dry_run_unless_yes() {
    let home = Home::new("purge");
    let _d = home.start();
    assert!(home
        .record(
            "claude-code",
            &fixture("hooks/claude-code/user_prompt_submit.json")
        )
        .status
        .success());
    assert!(home
        .record(
            "claude-code",
            &fixture("hooks/claude-code/post_tool_use.edit.json")
        )
        .status
        .success());
    assert!(home
        .record("claude-code", &bash_event("purge", 1))
        .status
        .success());
    let dry: serde_json::Value =
        serde_json::from_slice(&ctl(&home, &["purge", "--search", "invoices", "--json"]).stdout)
            .unwrap();
    assert_eq!(dry["mode"], "dry-run");
    assert_eq!(dry["by_reason"]["prompts"], 1);
    assert_eq!(dry["by_reason"]["observations"], 1);
    assert_eq!(home.count("SELECT COUNT(*) FROM prompts"), 1);
    let done: serde_json::Value = serde_json::from_slice(
        &ctl(&home, &["purge", "--search", "invoices", "--yes", "--json"]).stdout,
    )
    .unwrap();
    assert_eq!(
        (
            done["deleted_prompts"].as_u64(),
            done["deleted_observations"].as_u64()
        ),
        (Some(1), Some(1))
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM prompts"), 0);
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    let nothing = ctl(&home, &["purge"]);
    assert_eq!(nothing.status.code(), Some(1), "purge needs a filter");
    let by_project: serde_json::Value = serde_json::from_slice(
        &ctl(&home, &["purge", "--project", "load", "--yes", "--json"]).stdout,
    )
    .unwrap();
    assert_eq!(by_project["deleted_observations"], 1);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM sessions WHERE project = 'load'"),
        0,
        "a purged project leaves no empty sessions behind"
    );
}

#[test]
fn redaction_is_reapplied_to_what_is_stored_after_adding_a_pattern() {
    let home = Home::new("reredact");
    let d = home.start();
    let ev = serde_json::json!({
        "session_id": "rr", "cwd": "/home/dev/projects/acme-api", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": "deploy --ticket ACMEPRIV-424242 --env prod"}, "tool_response": {"stdout": ""}
    });
    assert!(home
        .record("claude-code", ev.to_string().as_bytes())
        .status
        .success());
    assert!(home
        .record(
            "claude-code",
            &fixture("hooks/claude-code/user_prompt_submit.json")
        )
        .status
        .success());
    // A knowledge item archived for a reason that names the ticket: its audit trail holds it.
    let add = home
        .cmd("nmem")
        .args([
            "knowledge",
            "add",
            "--kind",
            "decision",
            "--title",
            "Deploy api before web",
        ])
        .args(["--reason", "measured", "--project", "acme-api", "--json"])
        .output()
        .unwrap();
    let item: serde_json::Value = serde_json::from_slice(&add.stdout).unwrap();
    let id = item["item"]["id"].as_i64().expect("an item id").to_string();
    let archive = home
        .cmd("nmem")
        .args([
            "knowledge",
            "archive",
            &id,
            "--reason",
            "done under ACMEPRIV-424242",
        ])
        .output()
        .unwrap();
    assert!(archive.status.success(), "{archive:?}");
    d.stop();
    std::fs::write(
        &home.paths.config,
        "[redact]\npatterns = [{ name = \"acme_ticket\", regex = \"ACMEPRIV-[0-9]+\" }]\n",
    )
    .unwrap();
    let _d = home.start();
    let dry: serde_json::Value =
        serde_json::from_slice(&ctl(&home, &["redact", "--json"]).stdout).unwrap();
    assert_eq!(
        (
            dry["mode"].as_str(),
            dry["observations"].as_u64(),
            dry["prompts"].as_u64()
        ),
        (Some("dry-run"), Some(1), Some(0))
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE content LIKE '%ACMEPRIV-424242%'"),
        1,
        "a dry run changes nothing"
    );
    let done: serde_json::Value =
        serde_json::from_slice(&ctl(&home, &["redact", "--apply", "--json"]).stdout).unwrap();
    assert_eq!(done["observations"], 1);
    assert_eq!(done["knowledge"], 1, "the archived item's reason: {done}");
    assert_eq!(
        home.count(
            "SELECT COUNT(*) FROM knowledge_audit WHERE reason LIKE '%[REDACTED:acme_ticket]%'"
        ),
        1
    );
    assert_eq!(home.count("SELECT COUNT(*) FROM observations WHERE content LIKE '%[REDACTED:acme_ticket]%' AND redacted = 1"), 1);
    let search = home
        .cmd("nmem")
        .args(["search", "424242", "--all-projects", "--json"])
        .output()
        .unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&search.stdout).unwrap();
    assert_eq!(
        reply["items"],
        serde_json::json!([]),
        "the index forgot it too"
    );
    assert!(ctl(&home, &["maintain"]).status.success());
    let bytes = std::fs::read(&home.paths.db).unwrap();
    assert!(!String::from_utf8_lossy(&bytes).contains("ACMEPRIV-424242"));
}

#[test]
fn status_names_a_database_the_daemon_cannot_open_and_hooks_keep_exiting_0() {
    let home = Home::new("degraded");
    // The database's folder is a file: nmemd cannot create the database there.
    let blocker = home.dir.join("dbdir");
    std::fs::write(&blocker, b"not a folder").unwrap();
    let db = blocker.join("nmem.db");
    let out = home.cmd("nmemd").env("NMEM_DB", &db).output().unwrap();
    assert!(!out.status.success());
    std::fs::write(home.paths.daemon_log(), &out.stderr).unwrap();
    let rec = home.record_with("claude-code", &bash_event("deg", 1), |c| {
        c.env("NMEM_DB", &db);
    });
    assert!(rec.status.success(), "the hook still exits 0: {rec:?}");
    assert_eq!(home.spooled_events(), 1, "and the event waits in the spool");
    let st = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .env("NMEM_DB", &db)
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(1));
    let s: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    let problems = s["degraded"].to_string();
    assert!(
        problems.contains("cannot create")
            || problems.contains("not a folder")
            || problems.contains("nmemd could not start"),
        "{s}"
    );
}

/// A small file system for the database, unmounted on drop.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    /// `None` where this machine does not let the tests mount one (not root, no CAP_SYS_ADMIN, no
    /// `mount`).
    fn mount(dir: &std::path::Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(dir).unwrap();
        let ok = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=0700"),
                "tmpfs",
            ])
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_is_named_loses_nothing_and_recovers() {
    let home = Home::new("diskfull");
    let Some(fs) = Tmpfs::mount(&home.dir.join("small"), "8m") else {
        return skip_unless_required(
            "this machine cannot mount a tmpfs (`mount` as root, or with CAP_SYS_ADMIN)",
        );
    };
    // The database on the small file system; the spool stays on the big one.
    let db = fs.0.join("nmem.db");
    std::fs::write(&home.paths.config, "[spool]\ndrain_interval_ms = 50\n").unwrap();
    let with_db = |c: &mut std::process::Command| {
        c.env("NMEM_DB", &db);
    };
    let _d = home.start_with(with_db);
    assert!(home
        .record_with("claude-code", &bash_event("full", 0), with_db)
        .status
        .success());
    // Fill the file system.
    let filler = fs.0.join("filler");
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }
    for n in 1..=20 {
        let rec = home.record_with("claude-code", &bash_event("full", n), with_db);
        assert!(rec.status.success(), "hooks exit 0 on a full disk: {rec:?}");
    }
    let st = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .env("NMEM_DB", &db)
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(2), "{st:?}");
    let s: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert!(s["degraded"].to_string().contains("is full"), "{s}");
    // Space comes back: everything that waited is stored, once.
    std::fs::remove_file(&filler).unwrap();
    let count = || {
        let c =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .unwrap();
        c.query_row(
            "SELECT COUNT(*) FROM observations WHERE session_id = 'full'",
            [],
            |r| r.get::<_, i64>(0),
        )
        .unwrap()
    };
    wait_until(
        "the spool drains",
        std::time::Duration::from_secs(30),
        || count() == 21,
    );
    let c = rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .unwrap();
    let ok: String = c
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}

#[test]
fn a_read_only_database_folder_is_named_and_hooks_keep_exiting_0() {
    let home = Home::new("readonly");
    let Some(fs) = Tmpfs::mount(&home.dir.join("ro"), "8m") else {
        return skip_unless_required(
            "this machine cannot mount a tmpfs (`mount` as root, or with CAP_SYS_ADMIN)",
        );
    };
    let db = fs.0.join("nmem.db");
    // A database made while writable, then the file system turned read-only under it.
    {
        let _d = home.start_with(|c| {
            c.env("NMEM_DB", &db);
        });
        assert!(home
            .record_with("claude-code", &bash_event("ro", 0), |c| {
                c.env("NMEM_DB", &db);
            })
            .status
            .success());
    }
    let remount = std::process::Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.0)
        .status()
        .unwrap();
    assert!(remount.success());
    let out = home.cmd("nmemd").env("NMEM_DB", &db).output().unwrap();
    assert!(
        !out.status.success(),
        "nmemd cannot run on a read-only database"
    );
    std::fs::write(home.paths.daemon_log(), &out.stderr).unwrap();
    let rec = home.record_with("claude-code", &bash_event("ro", 1), |c| {
        c.env("NMEM_DB", &db);
    });
    assert!(rec.status.success(), "the hook still exits 0: {rec:?}");
    assert_eq!(home.spooled_events(), 1, "and the event waits in the spool");
    let st = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .env("NMEM_DB", &db)
        .output()
        .unwrap();
    assert_eq!(st.status.code(), Some(1));
    let s: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    assert!(s["degraded"].to_string().contains("read-only"), "{s}");
    // What was stored before is still readable.
    assert_eq!(s["observations"], 1, "{s}");
}

/// The operator routes are typed on both sides (`nmem_proto::admin`): a filter `nmemctl` sends
/// is the filter the daemon applies. Were the type's field renamed on one side only, the daemon
/// would see no filter and sweep every type; a request with a field it does not know is refused
/// and changes nothing.
#[test]
fn retention_and_purge_by_type_touch_only_that_type() {
    let home = Home::new("rettype");
    std::fs::write(&home.paths.config, "[retention]\nsweep = false\n").unwrap();
    let _d = home.start();
    for n in 0..5 {
        record_at(&home, n, 30, &read_event(n)); // file_read
        record_at(&home, 100 + n, 30, &bash_event("rettype", n)); // command
    }
    let types = |home: &Home| {
        (
            home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_read'"),
            home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'command'"),
        )
    };
    assert_eq!(types(&home), (5, 5));

    // A misspelt filter over the raw API: a 400 naming the field, nothing deleted.
    let raw = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        nmem_proto::wire::PATH_RETENTION,
        &[],
        br#"{"max_age_days": 0, "obs_typ": "command", "apply": true}"#,
        Duration::from_secs(30),
    )
    .unwrap();
    assert_eq!(raw.status, 400, "{}", String::from_utf8_lossy(&raw.body));
    assert!(String::from_utf8_lossy(&raw.body).contains("obs_typ"));
    assert_eq!(types(&home), (5, 5), "a refused request deletes nothing");

    let out = ctl(
        &home,
        &[
            "retention",
            "--max-age-days",
            "0",
            "--type",
            "command",
            "--apply",
            "--json",
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let r: nmem_proto::admin::DeletionReport = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r.mode, nmem_proto::admin::Mode::Apply);
    assert_eq!((r.deleted_observations, r.deleted_prompts), (5, 0), "{r:?}");
    assert_eq!(types(&home), (5, 0), "only commands are swept");

    let dry = ctl(&home, &["purge", "--type", "file_read", "--json"]);
    let r: nmem_proto::admin::DeletionReport = serde_json::from_slice(&dry.stdout).unwrap();
    assert_eq!(
        (r.mode, r.total_candidates),
        (nmem_proto::admin::Mode::DryRun, 5)
    );
    assert_eq!(types(&home), (5, 0), "a dry run deletes nothing");
}

/// The writer's errors are typed, and each kind has its status: a request the writer refuses
/// (a negative age, a purge with no filter) is the caller's to fix, a 400 whose message says
/// what to change, never an internal failure that sends the user to the log; pinning an id that
/// does not exist is a 404. None of them changes anything.
#[test]
fn writer_refusals_are_the_callers_to_fix_and_change_nothing() {
    let home = Home::new("wrerr");
    std::fs::write(&home.paths.config, "[retention]\nsweep = false\n").unwrap();
    let _d = home.start();
    for n in 0..3 {
        record_at(&home, n, 30, &bash_event("wrerr", n));
    }
    let post = |path: &str, body: &[u8]| {
        let r = nmem_proto::client::call(
            &home.paths.socket,
            "POST",
            path,
            &[],
            body,
            Duration::from_secs(30),
        )
        .unwrap();
        let e: nmem_proto::wire::ErrorBody = serde_json::from_slice(&r.body)
            .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&r.body)));
        (r.status, e)
    };
    let (status, e) = post(
        nmem_proto::wire::PATH_RETENTION,
        br#"{"max_age_days": -1, "apply": true}"#,
    );
    assert_eq!((status, e.code.as_str()), (400, "bad_request"), "{e:?}");
    assert!(e.message.contains("0 days or more"), "{e:?}");
    let (status, e) = post(nmem_proto::wire::PATH_PURGE, br#"{"apply": true}"#);
    assert_eq!((status, e.code.as_str()), (400, "bad_request"), "{e:?}");
    assert!(e.message.contains("say what to purge"), "{e:?}");
    let (status, e) = post(
        nmem_proto::wire::PATH_PIN,
        br#"{"id": 424242, "pinned": true}"#,
    );
    assert_eq!((status, e.code.as_str()), (404, "not_found"), "{e:?}");
    assert!(e.message.contains("424242"), "{e:?}");
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 3);
    assert_eq!(home.count("SELECT COUNT(*) FROM audit"), 0);

    // And through nmemctl: the reason, exit 1.
    let out = ctl(&home, &["retention", "--max-age-days=-1", "--apply"]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("0 days or more"), "{err}");
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 3);
}
