//! The hook's request, `POST /v1/events`, on its short path (answered without the router,
//! `conn::record_direct`) and through group commit (`store::writer::Coming`), against the real
//! daemon: the same replies, errors and headers as before; many concurrent hooks each
//! acknowledged once their own event is committed, and every one stored.

use nmem_e2e::{bash_event, Home};
use nmem_proto::client;
use nmem_proto::wire::{self, code, ErrorBody, RecordOutcome, RecordReply};
use std::time::Duration;

fn call(home: &Home, method: &str, path: &str, id: &str, body: &[u8]) -> client::Response {
    client::call(
        &home.paths.socket,
        method,
        path,
        &[(wire::H_EVENT_ID, id)],
        body,
        Duration::from_secs(30),
    )
    .unwrap()
}

fn versioned(r: &client::Response) {
    assert_eq!(r.header(wire::H_VERSION), Some(nmem_proto::VERSION));
    let protocol = nmem_proto::PROTOCOL.to_string();
    assert_eq!(r.header(wire::H_PROTOCOL), Some(protocol.as_str()));
}

fn error(r: &client::Response) -> ErrorBody {
    versioned(r);
    serde_json::from_slice(&r.body).unwrap_or_else(|e| {
        panic!(
            "not an error body ({e}): {}",
            String::from_utf8_lossy(&r.body)
        )
    })
}

/// A `POST /v1/events` that declares `length` bytes and sends none: the reply, read until its
/// declared length is in (the body is never sent, so the daemon may not close).
fn head_only(home: &Home, length: usize) -> String {
    use std::io::{Read, Write};
    let mut s = std::os::unix::net::UnixStream::connect(&home.paths.socket).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(
        s,
        "POST {} HTTP/1.1\r\nhost: nmemd\r\n{}: direct-5\r\ncontent-length: {length}\r\n\r\n",
        wire::PATH_EVENTS,
        wire::H_EVENT_ID
    )
    .unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&out).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let declared = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap())
            });
            if declared.is_some_and(|n| body.len() >= n) {
                return text;
            }
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return text,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
}

#[test]
fn the_hook_endpoint_keeps_its_replies_errors_and_headers() {
    let home = Home::new("direct");
    std::fs::write(&home.paths.config, "[limits]\nmax_body_mb = 1\n").unwrap();
    let _daemon = home.start();
    let post = |path: &str, id: &str, body: &[u8]| call(&home, "POST", path, id, body);

    let r = post(wire::PATH_EVENTS, "direct-1", &bash_event("direct", 1));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    versioned(&r);
    assert!(
        r.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        r.headers
    );
    let reply: RecordReply = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(reply.outcome, RecordOutcome::Stored);
    assert_eq!(reply.kind.as_deref(), Some("observation"));
    assert!(reply.id.is_some());

    // The same event again: a duplicate, stored once.
    let r = post(wire::PATH_EVENTS, "direct-1", &bash_event("direct", 1));
    let reply: RecordReply = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(reply.outcome, RecordOutcome::Duplicate);

    // A query string does not change the endpoint.
    let r = post("/v1/events?from=test", "direct-2", &bash_event("direct", 2));
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // A bad event id: 400 naming the header.
    let r = post(wire::PATH_EVENTS, "no/slashes", &bash_event("direct", 3));
    assert_eq!(r.status, 400);
    let e = error(&r);
    assert_eq!(e.code, code::BAD_REQUEST);
    assert!(e.message.contains(wire::H_EVENT_ID), "{}", e.message);

    // A body that is not JSON: 422, and the reason.
    let r = post(wire::PATH_EVENTS, "direct-4", b"{ not json");
    assert_eq!(r.status, 422);
    assert_eq!(error(&r).code, code::INVALID_PAYLOAD);

    // Over `[limits] max_body_mb`: 413 as soon as the length is declared, and what to change.
    let reply = head_only(&home, 2 * 1024 * 1024);
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    for part in [
        wire::H_VERSION,
        "content-length:",
        "max_body_mb",
        code::BAD_REQUEST,
    ] {
        assert!(
            reply
                .to_ascii_lowercase()
                .contains(&part.to_ascii_lowercase()),
            "{part}: {reply}"
        );
    }

    // Other methods and paths still go through the router, with its answers.
    let r = call(&home, "GET", wire::PATH_EVENTS, "direct-6", b"");
    assert_eq!(r.status, 405);
    let r = post("/v1/events/", "direct-7", &bash_event("direct", 7));
    assert_eq!(r.status, 404);
    assert_eq!(error(&r).code, code::NOT_FOUND);
    let r = post(
        wire::PATH_EVENTS_BATCH,
        "unused",
        &serde_json::to_vec(&wire::BatchEvent {
            event_id: "direct-8".into(),
            received_at: nmem_proto::now_ms(),
            harness: "claude-code".into(),
            payload: serde_json::from_slice::<serde_json::Value>(&bash_event("direct", 8)).unwrap(),
        })
        .unwrap(),
    );
    assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));

    // Only the three good events were stored.
    let ids: Vec<String> = home
        .db()
        .prepare("SELECT event_id FROM observations ORDER BY id")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(ids, ["direct-1", "direct-2", "direct-8"]);
}

/// Sixteen connections sending at once, as the load generator does: every event is answered
/// `stored` with its own row id (an answer comes only after its commit), every row is there,
/// and the commits are counted in status.
#[test]
fn concurrent_hooks_are_each_stored_and_acknowledged() {
    let home = Home::new("group");
    let _daemon = home.start();
    let (conns, per) = (16usize, 40usize);
    let ids: Vec<i64> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..conns)
            .map(|c| {
                let home = &home;
                s.spawn(move || {
                    let mut conn = client::Conn::open(&home.paths.socket).unwrap();
                    (0..per)
                        .map(|n| {
                            let id = format!("group-{c}-{n}");
                            let r = conn
                                .request(
                                    "POST",
                                    wire::PATH_EVENTS,
                                    &[(wire::H_EVENT_ID, &id)],
                                    &bash_event(&format!("group{c}"), n),
                                    Duration::from_secs(60),
                                )
                                .unwrap();
                            assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
                            let reply: RecordReply = serde_json::from_slice(&r.body).unwrap();
                            assert_eq!(reply.outcome, RecordOutcome::Stored, "{id}");
                            reply.id.unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), conns * per, "every event has its own row");
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE event_id LIKE 'group-%'"),
        (conns * per) as i64
    );
    let status: wire::Status = serde_json::from_slice(
        &client::call(
            &home.paths.socket,
            "GET",
            wire::PATH_STATUS,
            &[],
            b"",
            Duration::from_secs(30),
        )
        .unwrap()
        .body,
    )
    .unwrap();
    assert_eq!(status.events_written, (conns * per) as u64);
    assert!(status.commits >= 1 && status.commits <= status.events_written);
}

/// The ingest trace's line of each event (`NMEM_TRACE_INGEST=1`), from the daemon's logs.
fn traced_events(home: &Home) -> Vec<String> {
    std::fs::read_dir(&home.dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("nmemd-"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .collect::<String>()
        .lines()
        .filter(|l| l.contains("nmem::trace: event "))
        .map(str::to_string)
        .collect()
}

/// A lone hook's event is prepared, committed and answered on its request's own thread
/// (`Writer::lead`): with the ingest trace on, its line says `led`, and its row is stored by the
/// time the hook returns (still acknowledged after its commit). Hooks one after another are each
/// alone; at least the first, which follows no commit, is led.
#[test]
fn a_lone_hook_is_committed_on_its_requests_own_thread() {
    let home = Home::new("lead");
    let _daemon = home.start_with(|c| {
        c.env("NMEM_TRACE_INGEST", "1");
    });
    let hooks = 5;
    for n in 0..hooks {
        let out = home.record("claude-code", &bash_event("lead", n));
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            home.count(&format!(
                "SELECT COUNT(*) FROM observations WHERE tool_use_id = 'toolu_load_lead_{n}'"
            )),
            1,
            "hook {n} returned before its event was committed"
        );
    }
    assert_eq!(home.spooled_events(), 0, "a hook spooled its event");
    nmem_e2e::wait_until(
        "the trace line of every hook",
        Duration::from_secs(30),
        || traced_events(&home).len() >= hooks,
    );
    let lines = traced_events(&home);
    assert!(
        lines.iter().any(|l| l.contains(" led=")),
        "no hook was committed on its request's thread: {lines:#?}"
    );
}

/// A transcript that grows between hooks, as Claude Code's does (the assistant's message with
/// its thinking is written before the tool call's hook fires): each hook's event is stored with
/// the thinking written just before it, linked to it, whether the transcript was read on a
/// drainer or, through the descriptor a drainer opened moments before, on the request's worker
/// (`reasoning::Tailer::here`).
#[test]
fn a_growing_transcript_is_read_with_each_hook() {
    use std::io::Write;
    let home = Home::new("grow");
    let _daemon = home.start_with(|c| {
        c.env("NMEM_TRACE_INGEST", "1");
    });
    let session = "5b0c1e9a-2f47-4d3b-a8e6-91c4d7f02b35";
    let path = home.dir.join(format!("{session}.jsonl"));
    let mut transcript = std::fs::File::create(&path).unwrap();
    writeln!(
        transcript,
        "{}",
        serde_json::json!({"type": "user", "sessionId": session,
            "message": {"role": "user", "content": "make the invoice totals round half to even"}})
    )
    .unwrap();
    let steps = 8;
    for n in 0..steps {
        let thought = format!("step {n}: check how the totals of invoice batch {n} are rounded");
        writeln!(
            transcript,
            "{}",
            serde_json::json!({"type": "assistant", "sessionId": session, "uuid": format!("u-grow-{n}"),
                "timestamp": format!("2026-11-28T09:{:02}:00.000Z", 10 + n),
                "message": {"id": format!("msg_grow_{n}"), "role": "assistant",
                    "content": [{"type": "thinking", "thinking": thought}]}})
        )
        .unwrap();
        let payload = serde_json::json!({
            "session_id": session,
            "transcript_path": path.to_str().unwrap(),
            "cwd": "/home/dev/projects/invoices",
            "hook_event_name": "PostToolUse",
            "tool_name": "Bash",
            "tool_input": {"command": format!("cargo test -p totals batch_{n}")},
            "tool_response": {"stdout": "test result: ok. 3 passed", "stderr": "", "interrupted": false},
            "tool_use_id": format!("toolu_grow_{n}"),
        });
        let out = home.record("claude-code", payload.to_string().as_bytes());
        assert!(out.status.success(), "{out:?}");
        assert_eq!(
            home.count("SELECT COUNT(*) FROM prompts WHERE source = 'agent'"),
            n as i64 + 1,
            "hook {n} returned before the thinking written before it was stored"
        );
        let linked: String = home
            .db()
            .query_row(
                "SELECT p.content FROM observations o JOIN prompts p ON p.id = o.prompt_id
                 WHERE o.tool_use_id = ?1",
                [format!("toolu_grow_{n}")],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(
            linked, thought,
            "hook {n}'s call is linked to its own reasoning"
        );
    }
    assert_eq!(home.spooled_events(), 0, "a hook spooled its event");
    // Hooks that follow a read of the transcript within its watch are prepared where they
    // arrive (`prepared`, a mark only that route sets); the eight hooks take milliseconds.
    nmem_e2e::wait_until(
        "the trace line of every hook",
        Duration::from_secs(30),
        || traced_events(&home).len() >= steps,
    );
    let lines = traced_events(&home);
    assert!(
        lines.iter().any(|l| l.contains(" prepared=")),
        "no hook naming the transcript was prepared on its worker: {lines:#?}"
    );
}
