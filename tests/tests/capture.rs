//! The capture pipeline end to end: real `nmem record` → real `nmemd` on a real socket → SQLite,
//! and the spool when the daemon is down or hung.

use nmem_e2e::*;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

/// What each Claude Code fixture must store (tests/fixtures/README.md): an obs_type,
/// "prompt" for a prompts row, [`COUNTED`] for an event that only changes its session (spooled
/// when the daemon is down, no row), or None for ignored.
const CLAUDE_CODE: &[(&str, Option<&str>)] = &[
    ("session_start.startup.json", Some("session_start")),
    ("user_prompt_submit.json", Some("prompt")),
    ("pre_tool_use.bash.json", None),
    ("permission_request.json", None),
    ("post_tool_use.bash.ok.json", Some("command")),
    ("post_tool_use.bash.error.json", Some("command_error")),
    ("post_tool_use.read.json", Some("file_read")),
    ("post_tool_use.edit.json", Some("file_edit")),
    ("post_tool_use.multiedit.json", Some("file_edit")),
    ("post_tool_use.write.json", Some("file_write")),
    ("post_tool_use.grep.json", Some("search")),
    ("post_tool_use.glob.json", Some("search")),
    ("post_tool_use.ls.json", Some("search")),
    ("post_tool_use.webfetch.json", Some("web_fetch")),
    ("post_tool_use.websearch.json", Some("web_search")),
    ("post_tool_use.task.json", Some("task_spawn")),
    ("post_tool_use.agent.json", Some("task_spawn")),
    ("post_tool_use.todowrite.json", Some("plan")),
    ("post_tool_use.notebookedit.json", Some("file_edit")),
    ("post_tool_use.mcp.json", Some("mcp_call")),
    ("post_tool_batch.json", None),
    ("notification.json", None),
    ("notification.idle_prompt.json", None),
    ("subagent_start.json", None),
    ("subagent_stop.json", Some("subagent_end")),
    ("stop.json", Some("turn_end")),
    ("stop_failure.json", Some("api_error")),
    ("pre_compact.json", Some("compaction")),
    ("pre_compact.manual.json", Some("compaction")),
    ("post_compact.json", Some("compact_summary")),
    ("session_start.resume.json", Some("session_resume")),
    // After the recorded PreCompact of the same compaction: no second row.
    ("session_start.compact.json", Some(COUNTED)),
    ("session_end.clear.json", Some("session_end")),
    ("session_start.clear.json", Some("session_clear")),
    ("session_start.fork.json", Some("session_fork")),
    ("session_end.json", Some("session_end")),
    ("user_prompt_submit.surrogate.json", Some("prompt")),
    (
        "post_tool_use_failure.bash.ansi.json",
        Some("command_error"),
    ),
    ("post_tool_use_failure.rejected.json", Some("tool_rejected")),
    ("post_tool_use_failure.test_run.json", Some("command_error")),
    ("post_tool_use.bash.warning_last.json", Some("command")),
    ("post_tool_use.skill.json", Some("skill")),
    ("post_tool_use.bash_output.json", Some("command")),
    ("post_tool_use.task_output.json", Some("command")),
    ("stop.empty.json", Some(COUNTED)),
    ("subagent_stop.empty.json", Some(COUNTED)),
];

/// An event that is kept (spooled while the daemon is down) but stores no row: it only counts on
/// its session.
const COUNTED: &str = "-";

#[test]
fn every_claude_code_fixture_is_listed() {
    let dir = fixtures().join("hooks/claude-code");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CLAUDE_CODE.iter().map(|(f, _)| f.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "a fixture was added or removed: update CLAUDE_CODE"
    );
}

fn stored(home: &Home) -> BTreeMap<String, i64> {
    let db = home.db();
    let mut out = BTreeMap::new();
    let mut stmt = db
        .prepare("SELECT obs_type, COUNT(*) FROM observations GROUP BY obs_type")
        .unwrap();
    for row in stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .unwrap()
    {
        let (k, n) = row.unwrap();
        out.insert(k, n);
    }
    let prompts: i64 = db
        .query_row("SELECT COUNT(*) FROM prompts", [], |r| r.get(0))
        .unwrap();
    if prompts > 0 {
        out.insert("prompt".into(), prompts);
    }
    out
}

fn expected() -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for (_, kind) in CLAUDE_CODE {
        if let Some(k) = kind.filter(|k| *k != COUNTED) {
            *out.entry(k.to_string()).or_insert(0) += 1;
        }
    }
    out
}

#[test]
fn claude_code_fixtures_with_the_daemon_up() {
    let home = Home::new("cc-up");
    let _d = home.start();
    for (file, kind) in CLAUDE_CODE {
        let before = stored(&home);
        let out = home.record(
            "claude-code",
            &fixture(&format!("hooks/claude-code/{file}")),
        );
        assert!(out.status.success(), "{file}: {out:?}");
        assert!(
            out.stderr.is_empty(),
            "{file}: stderr {:?}",
            String::from_utf8_lossy(&out.stderr)
        );
        let after = stored(&home);
        let mut delta = after.clone();
        for (k, n) in &before {
            *delta.get_mut(k).unwrap() -= n;
        }
        delta.retain(|_, n| *n != 0);
        match kind {
            None | Some(COUNTED) => {
                assert!(
                    delta.is_empty(),
                    "{file} stores no row but stored {delta:?}"
                )
            }
            Some(k) => assert_eq!(delta, BTreeMap::from([(k.to_string(), 1)]), "{file}"),
        }
        let stdout = String::from_utf8(out.stdout).unwrap();
        if file.starts_with("session_start") && *file != "session_start.startup.json" {
            let v: serde_json::Value = serde_json::from_str(stdout.trim())
                .unwrap_or_else(|e| panic!("{file}: {e}: {stdout}"));
            let ctx = v["hookSpecificOutput"]["additionalContext"]
                .as_str()
                .unwrap();
            assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
            assert!(ctx.len() < 9_000 && ctx.contains("acme-api"), "{ctx}");
        } else {
            // Nothing to tell yet on the very first start (an empty memory prints nothing).
            assert!(stdout.is_empty(), "{file} printed {stdout:?}");
        }
    }
    assert_eq!(stored(&home), expected());
    assert_eq!(home.spooled_events(), 0);
    // The same payloads again are new events (new event ids), but the same tool calls: each
    // tool_use_id is stored once even when two hook registrations deliver it.
    let before = home.count("SELECT COUNT(*) FROM observations WHERE tool_use_id IS NOT NULL");
    for (file, _) in CLAUDE_CODE
        .iter()
        .filter(|(f, _)| f.starts_with("post_tool_use"))
    {
        assert!(home
            .record(
                "claude-code",
                &fixture(&format!("hooks/claude-code/{file}"))
            )
            .status
            .success());
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE tool_use_id IS NOT NULL"),
        before
    );
}

#[test]
fn claude_code_fixtures_with_the_daemon_down_are_spooled_then_stored_once() {
    let home = Home::new("cc-down");
    let t0 = nmem_proto::now_ms();
    for (file, _) in CLAUDE_CODE {
        let out = home.record(
            "claude-code",
            &fixture(&format!("hooks/claude-code/{file}")),
        );
        assert!(out.status.success(), "{file}: {out:?}");
        assert!(
            out.stdout.is_empty(),
            "{file}: nothing is printed while the daemon is down"
        );
    }
    let wanted = CLAUDE_CODE.iter().filter(|(_, k)| k.is_some()).count();
    assert_eq!(
        home.spooled_events(),
        wanted,
        "one spooled event per stored event, none for ignored ones"
    );
    let t1 = nmem_proto::now_ms();
    let d = home.start();
    wait_until("the spool to drain", Duration::from_secs(20), || {
        home.spooled_events() == 0
    });
    assert_eq!(stored(&home), expected());
    // Observations keep the time the shim received them, not the time they were drained.
    let (min, max): (i64, i64) = home
        .db()
        .query_row(
            "SELECT MIN(timestamp), MAX(timestamp) FROM observations",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(
        min >= t0 && max <= t1,
        "timestamps {min}..{max} outside the recording window {t0}..{t1}"
    );
    // A restart drains nothing twice.
    assert_eq!(d.stop().code(), Some(0));
    let _d = home.start();
    assert_eq!(stored(&home), expected());
}

#[test]
fn malformed_payloads_are_rejected_with_one_line_and_store_nothing() {
    let home = Home::new("bad");
    let d = home.start();
    let dir = fixtures().join("hooks/bad");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let out = home.record("claude-code", &std::fs::read(&path).unwrap());
        let stderr = String::from_utf8_lossy(&out.stderr);
        if name == "unknown_hook_event_name.json" {
            assert_eq!(out.status.code(), Some(0), "{name}");
            assert!(stderr.is_empty() && out.stdout.is_empty(), "{name}");
        } else {
            assert_eq!(out.status.code(), Some(1), "{name}: {out:?}");
            assert_eq!(
                stderr.lines().count(),
                1,
                "{name}: one stderr line, got {stderr:?}"
            );
            assert!(stderr.starts_with("nmem record: "), "{stderr}");
        }
        seen += 1;
    }
    assert!(seen >= 19, "expected the bad/ fixtures, found {seen}");
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations")
            + home.count("SELECT COUNT(*) FROM prompts"),
        0
    );
    assert_eq!(home.spooled_events(), 0);
    assert!(d.healthy());
    // Also with the daemon down: rejected before anything is spooled.
    d.stop();
    let out = home.record(
        "claude-code",
        &fixture("hooks/bad/path_traversal_session_id.json"),
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(home.spooled_events(), 0);
}

#[test]
fn a_20_mb_write_is_stored_once_with_its_body_elided() {
    let home = Home::new("huge");
    let bytes = huge_write_payload();
    assert!(bytes.len() > 15_000_000);
    let _d = home.start();
    let out = home.record_with("claude-code", &bytes, |c| {
        c.env("NMEM_TIMEOUT_MS", "5000");
    });
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'file_write'"),
        1
    );
    let (content, meta): (String, String) = home
        .db()
        .query_row(
            "SELECT content, metadata FROM observations WHERE obs_type = 'file_write'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert!(content.ends_with("invoices.seed.ts"), "{content}");
    assert!(
        meta.contains("[nmem: elided ") && meta.contains("sha256"),
        "{meta}"
    );
    assert!(
        meta.len() < 2_000,
        "metadata must stay small, got {} bytes",
        meta.len()
    );
    assert!(std::fs::metadata(&home.paths.db).unwrap().len() < 2_000_000);
}

#[test]
fn hung_daemon_spools_promptly_and_stores_once_after_sigcont() {
    let home = Home::new("hung");
    let d = home.start();
    d.signal(libc::SIGSTOP);
    let out = home.record("claude-code", &bash_event("hung-session", 1));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(home.spooled_events(), 1, "the event waits in the spool");
    d.signal(libc::SIGCONT);
    wait_until(
        "the event to be stored and the spool drained",
        Duration::from_secs(20),
        || {
            home.spooled_events() == 0
                && home.count(
                    "SELECT COUNT(*) FROM observations WHERE content LIKE 'echo hung-session-event-1%'",
                ) >= 1
        },
    );
    // Both the original request (read after SIGCONT) and the spool replay may arrive: once.
    assert_eq!(
        home.count(
            "SELECT COUNT(*) FROM observations WHERE content LIKE 'echo hung-session-event-1%'"
        ),
        1
    );
}

#[test]
fn zero_loss_while_the_daemon_is_killed_and_restarted() {
    const WRITERS: usize = 4;
    const PER_WRITER: usize = 1_250;
    let home = Home::new("loss");
    let daemon = std::sync::Mutex::new(Some(home.start()));
    let done = std::sync::atomic::AtomicUsize::new(0);
    let failures = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (home, done, failures) = (&home, &done, &failures);
            s.spawn(move || {
                for i in 0..PER_WRITER {
                    let out = home.record("claude-code", &bash_event(&format!("writer{w}"), i));
                    if !out.status.success() {
                        failures.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                    done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            });
        }
        // Kill the daemon with SIGKILL at several points of the run, restarting it each time.
        let total = WRITERS * PER_WRITER;
        for k in 1..=5 {
            wait_until("writers to progress", Duration::from_secs(120), || {
                done.load(std::sync::atomic::Ordering::Relaxed) >= total * k / 6
            });
            daemon.lock().unwrap().take().unwrap().kill();
            *daemon.lock().unwrap() = Some(home.start());
        }
    });
    assert_eq!(failures.into_inner(), 0, "every nmem record must exit 0");
    wait_until("the spool to drain", Duration::from_secs(60), || {
        home.spooled_events() == 0
    });
    let (rows, distinct): (i64, i64) = home
        .db()
        .query_row(
            "SELECT COUNT(*), COUNT(DISTINCT content) FROM observations WHERE obs_type = 'command'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(
        distinct,
        (WRITERS * PER_WRITER) as i64,
        "every event is stored"
    );
    assert_eq!(rows, distinct, "no event is stored twice");
}

/// An acknowledgement means committed: 8 connections send events through the socket API as fast
/// as they can, the daemon is SIGKILLed mid-stream, and every event it had answered "stored" is
/// in the database when it comes back (events in flight at the kill may or may not be).
#[test]
fn every_event_acknowledged_through_the_api_survives_a_kill() {
    const CONNS: usize = 8;
    let home = Home::new("ackkill");
    let daemon = home.start();
    let acked = std::sync::Mutex::new(Vec::<String>::new());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for c in 0..CONNS {
            let (home, acked, stop) = (&home, &acked, &stop);
            s.spawn(move || {
                let Ok(mut conn) = nmem_proto::client::Conn::open(&home.paths.socket) else {
                    return;
                };
                for n in 0.. {
                    if stop.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    let id = format!("ack-{c}-{n}");
                    let r = conn.request(
                        "POST",
                        nmem_proto::wire::PATH_EVENTS,
                        &[(nmem_proto::wire::H_EVENT_ID, &id)],
                        &bash_event(&format!("ack{c}"), n),
                        Duration::from_secs(30),
                    );
                    match r {
                        Ok(r) if r.status == 200 => {
                            let reply: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                            assert_eq!(reply["outcome"], "stored", "{reply}");
                            acked.lock().unwrap().push(id);
                        }
                        // The kill: this request's fate is unknown, and nothing more is sent.
                        _ => return,
                    }
                }
            });
        }
        wait_until(
            "events to be acknowledged",
            Duration::from_secs(120),
            || acked.lock().unwrap().len() >= 2_000,
        );
        daemon.kill();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let acked = acked.into_inner().unwrap();
    // Back up (WAL recovery), then every acknowledged id must be there.
    let daemon = home.start();
    let db = home.db();
    let mut stmt = db
        .prepare("SELECT 1 FROM observations WHERE event_id = ?1")
        .unwrap();
    let lost: Vec<&String> = acked
        .iter()
        .filter(|id| !stmt.exists([id.as_str()]).unwrap())
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged events lost, e.g. {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
    drop(daemon);
}

#[test]
fn files_are_owner_only_a_second_daemon_refuses_and_a_stale_socket_is_replaced() {
    let home = Home::new("perm");
    // A stale socket: bound, then its owner went away without removing it.
    drop(std::os::unix::net::UnixListener::bind(&home.paths.socket).unwrap());
    assert!(home.paths.socket.exists());
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let home_mode = mode(&home.dir);
    let d = home.start();
    assert_eq!(mode(&home.paths.socket), 0o600);
    assert_eq!(mode(&home.paths.db), 0o600);
    // A folder nmem did not create keeps its mode (issue 13 item 4); what nmem creates is 0700.
    assert_eq!(mode(&home.dir), home_mode);
    assert!(home
        .record("claude-code", &bash_event("perm", 1))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    // Spool files too (daemon stopped, no autostart).
    let out = home.cmd("nmemd").output().unwrap();
    assert!(!out.status.success(), "a second nmemd must refuse to start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already owns"), "{err}");
    assert!(d.healthy(), "the first daemon is unaffected");
    let status = d.stop();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean exit");
    assert!(
        !home.paths.socket.exists(),
        "the daemon removes the socket it created"
    );
    let wal = home.dir.join("nmem.db-wal");
    assert!(
        !wal.exists() || std::fs::metadata(&wal).unwrap().len() == 0,
        "the WAL is checkpointed at shutdown"
    );
    assert!(home
        .record("claude-code", &bash_event("perm", 2))
        .status
        .success());
    assert_eq!(mode(&home.paths.spool), 0o700);
    assert_eq!(home.spooled_events(), 1);
    assert_eq!(
        mode(&home.paths.spool.join(nmem_proto::spool::LOG_NAME)),
        0o600
    );
}

#[test]
fn a_database_from_a_newer_nmem_is_refused_and_left_untouched() {
    let home = Home::new("newer");
    {
        let c = rusqlite::Connection::open(&home.paths.db).unwrap();
        c.execute_batch("CREATE TABLE future(x); PRAGMA user_version = 42;")
            .unwrap();
    }
    let before = std::fs::read(&home.paths.db).unwrap();
    let out = home.cmd("nmemd").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("newer nmem") && err.contains("42"), "{err}");
    assert_eq!(std::fs::read(&home.paths.db).unwrap(), before);
}

#[test]
fn corrupt_spool_files_are_moved_aside_and_do_not_block_the_rest() {
    let home = Home::new("corrupt");
    std::fs::create_dir_all(&home.paths.spool).unwrap();
    let name = nmem_proto::spool::file_name(nmem_proto::now_ms() - 1000, "garbage");
    std::fs::write(home.paths.spool.join(&name), b"not a spool file").unwrap();
    assert!(home
        .record("claude-code", &bash_event("corrupt", 1))
        .status
        .success());
    let _d = home.start();
    wait_until("the spool to drain", Duration::from_secs(20), || {
        home.spooled_events() == 0
    });
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    assert!(home.paths.spool_corrupt().join(&name).exists());
    let out = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["spool_corrupt"], 1);
    assert!(
        s["last_error"]
            .as_str()
            .unwrap()
            .contains("spool file moved"),
        "{s}"
    );
}

#[test]
fn status_up_and_down() {
    let home = Home::new("status");
    let down = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert_eq!(down.status.code(), Some(1), "not running");
    let s: serde_json::Value = serde_json::from_slice(&down.stdout).unwrap();
    assert_eq!(s["running"], false);
    assert!(home
        .record("claude-code", &bash_event("status", 1))
        .status
        .success());
    let down = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&down.stdout).unwrap();
    assert_eq!(s["spool_backlog"], 1);
    assert!(s["spool_oldest_age_s"].is_u64());

    let d = home.start();
    wait_until("the spool to drain", Duration::from_secs(20), || {
        home.spooled_events() == 0
    });
    let up = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        up.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&up.stdout)
    );
    let s: serde_json::Value = serde_json::from_slice(&up.stdout).unwrap();
    for key in [
        "running",
        "version",
        "protocol",
        "pid",
        "uptime_s",
        "socket",
        "db_path",
        "db_bytes",
        "queue_depth",
        "spool_backlog",
        "spool_oldest_age_s",
        "sessions",
        "prompts",
        "observations",
        "dedup_hits",
        "redactions",
        "last_error",
    ] {
        assert!(s.get(key).is_some(), "status lacks {key}: {s}");
    }
    assert_eq!(s["running"], true);
    assert_eq!(s["pid"], d.pid());
    assert_eq!(s["observations"], 1);
    assert!(s["ingest_per_s"].as_f64().unwrap() > 0.0, "{s}");
    assert_eq!(s["protocol"], nmem_proto::PROTOCOL);
    let human = home.cmd("nmemctl").arg("status").output().unwrap();
    let text = String::from_utf8(human.stdout).unwrap();
    assert!(
        text.contains("running") && text.contains("1 observations"),
        "{text}"
    );
}

#[test]
fn codex_notify_takes_its_payload_as_the_last_argument() {
    let home = Home::new("notify");
    let _d = home.start();
    let json = String::from_utf8(fixture("hooks/codex/notify.agent_turn_complete.json")).unwrap();
    let out = home
        .cmd("nmem")
        .args(["record", "--harness", "codex-notify", &json])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (t, session): (String, String) = home
        .db()
        .query_row("SELECT obs_type, session_id FROM observations", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(t, "turn_end");
    assert_eq!(session, "019a4c2e-7b3d-7f10-9c2e-5d8a1b6f3e90");
}

#[test]
fn api_errors_are_json_with_a_code_and_every_reply_carries_the_version() {
    let home = Home::new("api");
    let _d = home.start();
    let call = |method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]| {
        nmem_proto::client::call(
            &home.paths.socket,
            method,
            path,
            headers,
            body,
            Duration::from_secs(5),
        )
        .unwrap()
    };
    let r = call("GET", "/v1/nope", &[], b"");
    assert_eq!(r.status, 404);
    assert_eq!(r.header("x-nmem-version"), Some(nmem_proto::VERSION));
    assert_eq!(r.header("x-nmem-protocol"), Some("1"));
    let e: nmem_proto::wire::ErrorBody = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(e.code, "not_found");
    let r = call(
        "POST",
        "/v1/events",
        &[("x-nmem-event-id", "abc")],
        b"{\"session_id\":1}",
    );
    assert_eq!(r.status, 422);
    let e: nmem_proto::wire::ErrorBody = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(e.code, "invalid_payload");
    assert!(e.message.contains("session_id"), "{}", e.message);
    let r = call("POST", "/v1/events", &[], b"{}");
    assert_eq!(r.status, 400);
    let r = call("GET", "/v1/health", &[], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("x-nmem-version"), Some(nmem_proto::VERSION));
}

/// Post one hook payload to the daemon as `nmem record` does, with a chosen receive time (for
/// sequences whose events must lie seconds apart without the test waiting for them).
fn post_at(home: &Home, harness: &str, payload: &[u8], received_at: i64) {
    let id = nmem_proto::client::new_event_id();
    let at = received_at.to_string();
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        nmem_proto::wire::PATH_EVENTS,
        &[
            (nmem_proto::wire::H_EVENT_ID, &id),
            (nmem_proto::wire::H_RECEIVED_AT, &at),
            (nmem_proto::wire::H_HARNESS, harness),
        ],
        payload,
        Duration::from_secs(10),
    )
    .unwrap();
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
}

/// Replay a `hooks/sequences/*.jsonl` fixture: each line's event `after_ms` after the previous.
fn replay_sequence(home: &Home, name: &str) {
    let text = String::from_utf8(fixture(&format!("hooks/sequences/{name}"))).unwrap();
    let mut t = nmem_proto::now_ms() - 3_600_000;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        t += v["after_ms"].as_i64().unwrap();
        post_at(home, "claude-code", v["event"].to_string().as_bytes(), t);
    }
}

fn one_string(home: &Home, sql: &str) -> String {
    home.db().query_row(sql, [], |r| r.get(0)).unwrap()
}

#[test]
fn failures_are_stored_clean_and_declined_calls_are_not_errors() {
    let home = Home::new("fail");
    let _d = home.start();
    for f in [
        "session_start.startup.json",
        "user_prompt_submit.surrogate.json",
        "post_tool_use_failure.bash.ansi.json",
        "post_tool_use_failure.rejected.json",
        "post_tool_use_failure.test_run.json",
        "post_tool_use.bash.warning_last.json",
    ] {
        let out = home.record("claude-code", &fixture(&format!("hooks/claude-code/{f}")));
        assert_eq!(out.status.code(), Some(0), "{f}: {out:?}");
    }
    // The surrogate was replaced, not refused.
    let prompt = one_string(&home, "SELECT content FROM prompts");
    assert!(prompt.contains("garbage \u{FFFD} after"), "{prompt}");
    // No terminal control sequence anywhere in what was stored.
    assert_eq!(
        home.count(
            "SELECT COUNT(*) FROM observations WHERE instr(content, char(27)) > 0
               OR instr(COALESCE(metadata, ''), '\\u001b') > 0"
        ),
        0
    );
    let ansi = one_string(
        &home,
        "SELECT content FROM observations WHERE tool_use_id = 'toolu_01Ansi7cQm2LrX5vT8pNwE3h'",
    );
    assert!(ansi.contains("error[E0308]: mismatched types"), "{ansi}");
    let tests = one_string(
        &home,
        "SELECT content FROM observations WHERE tool_use_id = 'toolu_01TstRn3bV8cK2mQ9xLwP5dE'",
    );
    assert!(
        tests.contains("✗ src/routes/invoices.test.ts > GET /invoices > returns the next page"),
        "{tests}"
    );
    assert!(!tests.contains('✓'), "{tests}");
    assert_eq!(
        one_string(
            &home,
            "SELECT obs_type FROM observations WHERE tool_use_id = 'toolu_01Rej4xPz9kLm2QwT6vYbN8c'"
        ),
        "tool_rejected"
    );
    let warn = one_string(
        &home,
        "SELECT content FROM observations WHERE tool_use_id = 'toolu_01WrnLst6hJ3kP8qZ2mXcV4b'",
    );
    assert!(warn.contains("Reconciled 1,198 invoices"), "{warn}");
    assert!(!warn.contains("warnings.warn("), "{warn}");
    // The digest's "Recent errors" holds the real failures, not the declined call, and no escape
    // sequence reaches the agent.
    let out = home.record(
        "claude-code",
        &fixture("hooks/claude-code/session_start.resume.json"),
    );
    let digest = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(digest.trim()).unwrap();
    let ctx = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap();
    let errors = ctx
        .split("## Recent errors")
        .nth(1)
        .unwrap_or_else(|| panic!("no Recent errors in {ctx}"));
    assert!(errors.contains("cargo build --release"), "{ctx}");
    assert!(!errors.contains("force"), "{ctx}");
    assert!(!ctx.contains('\u{1b}'), "{ctx:?}");
}

#[test]
fn many_stops_and_one_compaction_store_what_matters_once() {
    let home = Home::new("stops");
    let _d = home.start();
    replay_sequence(&home, "many_stops_one_compaction.jsonl");
    let sid = "5b8e2c71-0f4a-4d93-b6e1-7a2c9d3f8e04";
    let rows = |t: &str| {
        home.count(&format!(
            "SELECT COUNT(*) FROM observations WHERE session_id = '{sid}' AND obs_type = '{t}'"
        ))
    };
    // The two Stops that said something, the first once although it was delivered twice.
    assert_eq!(rows("turn_end"), 2);
    assert_eq!(rows("subagent_end"), 0);
    assert_eq!(rows("compaction"), 1);
    assert_eq!(rows("session_compact"), 0);
    let (turns, subagents, compactions): (i64, i64, i64) = home
        .db()
        .query_row(
            "SELECT turns, subagents, compactions FROM sessions WHERE id = ?1",
            [sid],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // Six Stops of which one is an echo: five turns, counted without rows.
    assert_eq!((turns, subagents, compactions), (5, 1, 1));
    // "ok do it" typed again a minute later is a new prompt; the echo of a prompt is not.
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE content = 'ok do it'"),
        2
    );
    let p = fixture("hooks/claude-code/user_prompt_submit.json");
    let mut v: serde_json::Value = serde_json::from_slice(&p).unwrap();
    v.as_object_mut().unwrap().remove("prompt_id");
    v["prompt"] = "check the cursor again".into();
    let t = nmem_proto::now_ms();
    post_at(&home, "claude-code", v.to_string().as_bytes(), t);
    post_at(&home, "claude-code", v.to_string().as_bytes(), t + 600);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE content = 'check the cursor again'"),
        1,
        "an echo within 2 s is stored once"
    );
    post_at(&home, "claude-code", v.to_string().as_bytes(), t + 5_000);
    assert_eq!(
        home.count("SELECT COUNT(*) FROM prompts WHERE content = 'check the cursor again'"),
        2,
        "the same prompt later is stored again"
    );
    // The decision in the turn end is found by search like any hit.
    let out = home
        .cmd("nmem")
        .args([
            "search",
            "ordering by createdAt",
            "--json",
            "--project",
            "acme-api",
        ])
        .output()
        .unwrap();
    let hits: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let hits = hits.get("items").unwrap_or(&hits);
    assert_eq!(hits[0]["obs_type"], "turn_end", "{hits}");
}

#[test]
fn a_plan_updated_three_times_stores_what_changed() {
    let home = Home::new("plan");
    let _d = home.start();
    replay_sequence(&home, "plan_three_updates.jsonl");
    let db = home.db();
    let plans: Vec<String> = db
        .prepare("SELECT content FROM observations WHERE obs_type = 'plan' ORDER BY timestamp")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(plans.len(), 3, "{plans:?}");
    assert_eq!(
        plans[1],
        "plan update (1/5 done)\ncompleted: Write a failing test for the repeated cursor row\nstarted: Add skip: 1 to the invoices findMany\nadded: Open a PR for the fix"
    );
    assert_eq!(
        plans[2],
        "plan update (3/4 done)\ncompleted: Add skip: 1 to the invoices findMany\ncompleted: Run the invoice route tests\ndropped: Update the changelog"
    );
}

#[test]
fn recent_lists_actions_unless_asked() {
    let home = Home::new("recent");
    let _d = home.start();
    for f in [
        "session_start.startup.json",
        "post_tool_use.edit.json",
        "stop.json",
    ] {
        assert!(home
            .record("claude-code", &fixture(&format!("hooks/claude-code/{f}")))
            .status
            .success());
    }
    let recent = |extra: &[&str]| -> Vec<String> {
        let out = home
            .cmd("nmem")
            .args(["recent", "--json", "--project", "acme-api"])
            .args(extra)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|o| o["obs_type"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(recent(&[]), ["file_edit"]);
    assert_eq!(
        recent(&["--all"]),
        ["turn_end", "file_edit", "session_start"]
    );
}
