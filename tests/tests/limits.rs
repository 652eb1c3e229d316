//! Connections, bodies and queries under bounds (issue 13, items 7 to 10), against the real
//! daemon: idle connections cannot starve hooks, bodies that never end are dropped, many large
//! bodies at once do not add up in memory, shutdown always exits, and oversized requests get a
//! clear 400 without SQL or paths in it.

use nmem_e2e::{bash_event, wait_until, Home};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::time::{Duration, Instant};

/// Raise this process's soft descriptor limit to `want` (or the hard limit): the test opens more
/// connections than the default 1,024.
fn raise_own_fd_limit(want: u64) -> bool {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < want && lim.rlim_max >= want {
            lim.rlim_cur = want;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
    }
    lim.rlim_cur >= want
}

/// Start nmemd with both descriptor limits at `n` (a common default), so the test stays cheap.
fn start_with_fd_limit(home: &Home, n: u64) -> nmem_e2e::Daemon {
    home.start_with(move |cmd| unsafe {
        cmd.pre_exec(move || {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    })
}

fn write_config(home: &Home, toml: &str) {
    std::fs::write(&home.paths.config, toml).unwrap();
}

/// Read until the peer closes or `deadline` passes; what was read, and whether it closed.
fn read_until_closed(s: &mut UnixStream, deadline: Duration) -> (String, bool) {
    let end = Instant::now() + deadline;
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (String::from_utf8_lossy(&out).into(), false);
        }
        s.set_read_timeout(Some(left)).unwrap();
        match s.read(&mut buf) {
            Ok(0) => return (String::from_utf8_lossy(&out).into(), true),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return (String::from_utf8_lossy(&out).into(), true)
            }
            Err(_) => return (String::from_utf8_lossy(&out).into(), false),
        }
    }
}

#[test]
fn hooks_are_stored_directly_while_1100_idle_connections_are_open() {
    if !raise_own_fd_limit(4096) {
        nmem_e2e::skip_unless_required("cannot raise this process's descriptor limit to 4,096");
        return;
    }
    let home = Home::new("idle");
    // Long enough that no connection times out during the test: only the cap closes them.
    write_config(&home, "[limits]\nheader_timeout_secs = 600\n");
    let daemon = start_with_fd_limit(&home, 1024);
    let mut idle = Vec::new();
    for _ in 0..1100 {
        idle.push(UnixStream::connect(&home.paths.socket).expect("connect"));
    }
    // Hooks with a generous deadline: before the fix they waited it out and spooled.
    for n in 0..10 {
        let out = home.record_with("claude-code", &bash_event("idle", n), |c| {
            c.env("NMEM_TIMEOUT_MS", "10000");
        });
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(
        home.spooled_events(),
        0,
        "hooks spooled instead of being served"
    );
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE session_id = 'idle'"),
        10
    );
    assert!(daemon.healthy(), "/v1/health does not answer");
    // The oldest idle connections were the ones closed.
    let (_, closed) = read_until_closed(&mut idle[0], Duration::from_secs(10));
    assert!(closed, "the oldest idle connection was kept open");
    let mut newest = idle.pop().unwrap();
    newest.set_nonblocking(true).unwrap();
    let mut b = [0u8; 1];
    assert!(
        matches!(newest.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the newest idle connection was closed before older ones"
    );
}

#[test]
fn bodies_and_heads_that_never_end_are_dropped_after_the_timeout() {
    let home = Home::new("stall");
    write_config(
        &home,
        "[limits]\nheader_timeout_secs = 1\nbody_timeout_secs = 1\n",
    );
    let _daemon = home.start();
    let stalls: [&[u8]; 3] = [
        // content-length larger than what is sent
        b"POST /v1/events HTTP/1.1\r\nhost: nmemd\r\ncontent-length: 1000\r\n\r\n{\"session_id\"",
        // chunked without an end
        b"POST /v1/search HTTP/1.1\r\nhost: nmemd\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"que\r\n",
        // a head that never ends
        b"POST /v1/search HTTP/1.1\r\nhost: nmemd\r\n",
    ];
    for (i, req) in stalls.iter().enumerate() {
        let mut s = UnixStream::connect(&home.paths.socket).unwrap();
        s.write_all(req).unwrap();
        // The bound is 1 s; the deadline only detects a hang.
        let (reply, closed) = read_until_closed(&mut s, Duration::from_secs(10));
        assert!(closed, "stall {i}: the connection is still open: {reply:?}");
        if i < 2 {
            assert!(reply.starts_with("HTTP/1.1 408"), "stall {i}: {reply:?}");
            assert!(reply.contains("body_timeout_secs"), "stall {i}: {reply:?}");
        }
    }
    // An idle connection is closed too.
    let mut s = UnixStream::connect(&home.paths.socket).unwrap();
    assert!(read_until_closed(&mut s, Duration::from_secs(10)).1);
}

#[test]
fn sigterm_exits_even_with_a_stalled_request_and_releases_the_lock() {
    let home = Home::new("term");
    let mut daemon = home.start();
    let mut s = UnixStream::connect(&home.paths.socket).unwrap();
    s.write_all(b"POST /v1/events HTTP/1.1\r\nhost: nmemd\r\ncontent-length: 1000\r\n\r\n{")
        .unwrap();
    let mut idle = UnixStream::connect(&home.paths.socket).unwrap();
    idle.write_all(b"GET /v1/health HTTP/1.1\r\nhost: nmemd\r\n\r\n")
        .unwrap();
    let mut child = daemon.child.take().unwrap();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    // Connections get a 5 s grace; the deadline detects a hang (before: forever).
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "nmemd did not exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The lock is free: a new daemon starts on the same database.
    let again = home.start();
    assert!(again.healthy());
}

fn vm_kb(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

#[test]
fn many_large_bodies_at_once_do_not_add_up_in_memory() {
    if !std::path::Path::new("/proc/self/status").exists() {
        nmem_e2e::skip_unless_required("needs /proc to read the daemon's peak memory");
        return;
    }
    let home = Home::new("inflight");
    write_config(
        &home,
        "[limits]\nmax_body_mb = 16\nmax_bytes_in_flight_mb = 16\n",
    );
    let daemon = home.start();
    let pid = daemon.pid();
    let before = vm_kb(pid, "VmHWM:");
    // 8 clients × 15 MB: 120 MB if every body were held at once.
    let body = vec![b'x'; 15 * 1024 * 1024];
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let socket = home.paths.socket.clone();
            let body = body.clone();
            std::thread::spawn(move || {
                nmem_proto::client::call(
                    &socket,
                    "POST",
                    nmem_proto::wire::PATH_SEARCH,
                    &[],
                    &body,
                    Duration::from_secs(120),
                )
                .map(|r| r.status)
            })
        })
        .collect();
    for t in threads {
        let status = t.join().unwrap().expect("no reply");
        assert_eq!(status, 400, "a body that is not JSON is a 400");
    }
    let grew_mb = (vm_kb(pid, "VmHWM:") - before) / 1024;
    // 16 MB in flight, plus its copies while parsing; far under the 120 MB of all at once.
    assert!(grew_mb < 70, "peak memory grew by {grew_mb} MB");
    assert!(daemon.healthy());
}

fn post(home: &Home, path: &str, body: &serde_json::Value) -> (u16, String) {
    let r = nmem_proto::client::call(
        &home.paths.socket,
        "POST",
        path,
        &[],
        body.to_string().as_bytes(),
        Duration::from_secs(30),
    )
    .unwrap();
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

#[test]
fn oversized_requests_get_a_clear_400_without_internals() {
    use nmem_proto::wire::{PATH_MEMORIES, PATH_RECENT, PATH_SEARCH, PATH_TIMELINE};
    use serde_json::json;
    let home = Home::new("bounds");
    let _daemon = home.start();
    let out = home.record("claude-code", &bash_event("bounds", 1));
    assert!(out.status.success());
    let types: Vec<String> = (0..32_766).map(|i| format!("t{i}")).collect();
    let files: Vec<String> = (0..1_000).map(|i| format!("src/f{i}.rs")).collect();
    let huge = "word ".repeat(200_000);
    let long_cwd = format!("/home/dev/{}", "d/".repeat(300_000));
    let cases = [
        (
            PATH_SEARCH,
            json!({"query": "echo", "obs_type": types}),
            "obs_type",
        ),
        (
            PATH_SEARCH,
            json!({"query": "echo", "files": files}),
            "files",
        ),
        (PATH_SEARCH, json!({"query": huge}), "KB"),
        (
            PATH_SEARCH,
            json!({"query": "echo", "cwd": long_cwd}),
            "cwd",
        ),
        (PATH_TIMELINE, json!({"query": huge}), "query"),
        (
            PATH_TIMELINE,
            json!({"anchor": 1, "project": "p".repeat(10_000)}),
            "project",
        ),
        (PATH_RECENT, json!({"cwd": long_cwd}), "cwd"),
        (
            PATH_MEMORIES,
            json!({"text": "m".repeat(10 << 20), "project": "app"}),
            "text",
        ),
    ];
    for (path, body, names) in cases {
        let start = Instant::now();
        let (status, reply) = post(&home, path, &body);
        let shown: String = reply.chars().take(300).collect();
        assert_eq!(status, 400, "{path} {names}: {shown}");
        assert!(
            reply.contains(names),
            "{path}: the reply does not name `{names}`: {shown}"
        );
        for internal in ["SELECT", "sqlite", "Expression tree", "nmem.db", "/tmp/"] {
            assert!(!reply.contains(internal), "{path}: internals in {shown}");
        }
        // Refused before any SQL: far within the deadline that detects a hang.
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    // Nothing was saved by the refused memory.
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE obs_type = 'memory'"),
        0
    );
}

#[test]
fn a_hook_with_a_megabyte_cwd_is_refused_and_search_stays_fast() {
    let home = Home::new("cwd");
    let _daemon = home.start();
    let mut event: serde_json::Value = serde_json::from_slice(&bash_event("cwd", 1)).unwrap();
    // 900 KB: under the 1 MiB past which the hook elides long strings.
    event["cwd"] = format!("/home/dev/{}", "d/".repeat(450_000)).into();
    let out = home.record_with("claude-code", event.to_string().as_bytes(), |c| {
        c.env("NMEM_TIMEOUT_MS", "30000");
    });
    assert_eq!(out.status.code(), Some(1), "a 1 MB cwd is malformed");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cwd"), "{err}");
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 0);
    assert_eq!(home.spooled_events(), 0);
    wait_until("the daemon to answer", Duration::from_secs(10), || {
        post(
            &home,
            nmem_proto::wire::PATH_RECENT,
            &serde_json::json!({"project": null}),
        )
        .0 == 200
    });
}

/// Wait for `child` to exit, failing on a deadline far above what it should take.
fn wait_exit(
    child: &mut std::process::Child,
    deadline: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {deadline:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_40_mb_glob_result_is_stored_elided_not_dropped() {
    let home = Home::new("glob");
    let _daemon = home.start();
    let names: Vec<String> = (0..500_000)
        .map(|i| {
            format!(
                "/home/dev/shop/node_modules/@acme/package-{}/dist/esm/components/module-{i:06}.js",
                i % 911
            )
        })
        .collect();
    let payload = serde_json::json!({
        "session_id": "glob", "cwd": "/home/dev/shop", "hook_event_name": "PostToolUse",
        "tool_name": "Glob", "tool_use_id": "toolu_glob_big",
        "tool_input": {"pattern": "**/*.js"},
        "tool_response": {"filenames": names, "durationMs": 812, "numFiles": 500_000, "truncated": false},
    })
    .to_string();
    assert!(payload.len() > 39 * 1024 * 1024, "{} bytes", payload.len());
    let out = home.record_with("claude-code", payload.as_bytes(), |c| {
        c.env("NMEM_TIMEOUT_MS", "60000");
    });
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !home.paths.spool_dropped_log().exists(),
        "dropped: {}",
        std::fs::read_to_string(home.paths.spool_dropped_log()).unwrap_or_default()
    );
    assert_eq!(home.spooled_events(), 0);
    assert_eq!(
        home.count(
            "SELECT COUNT(*) FROM observations WHERE session_id = 'glob' AND tool_name = 'Glob'"
        ),
        1
    );
}

#[test]
fn dev_zero_on_stdin_is_refused_as_malformed_at_once() {
    let home = Home::new("zero");
    let mut child = home
        .cmd("nmem")
        .args(["record", "--harness", "claude-code"])
        .stdin(std::fs::File::open("/dev/zero").unwrap())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = wait_exit(
        &mut child,
        Duration::from_secs(60),
        "nmem record < /dev/zero",
    );
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("not JSON") && err.contains("0x00"), "{err}");
    assert!(
        !home.paths.spool_dropped_log().exists(),
        "logged as dropped, not refused"
    );
    assert_eq!(home.spooled_events(), 0);
}

#[test]
fn a_hook_whose_stdin_stays_open_returns_once_the_payload_is_complete() {
    let home = Home::new("open");
    let _daemon = home.start();
    for payload in [bash_event("open", 1), {
        // Over 1 MiB: the elision path stops at the end of the value too.
        let mut v: serde_json::Value = serde_json::from_slice(&bash_event("open", 2)).unwrap();
        v["tool_response"]["stdout"] = "line of output\n".repeat(100_000).into();
        v.to_string().into_bytes()
    }] {
        let mut child = home
            .cmd("nmem")
            .args(["record", "--harness", "claude-code"])
            .env("NMEM_TIMEOUT_MS", "10000")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&payload).unwrap();
        stdin.flush().unwrap();
        // stdin stays open: before, the hook waited for EOF (the harness's own timeout).
        let status = wait_exit(
            &mut child,
            Duration::from_secs(30),
            "nmem record with stdin open",
        );
        drop(stdin);
        assert!(status.success());
    }
    assert_eq!(
        home.count("SELECT COUNT(*) FROM observations WHERE session_id = 'open'"),
        2
    );
    assert_eq!(home.spooled_events(), 0);
}

/// `nmem serve` as a real child process speaking raw lines: every broken line gets its JSON-RPC
/// error, and the server keeps serving.
#[test]
fn nmem_serve_answers_broken_json_rpc() {
    use std::io::BufRead;
    let home = Home::new("serve");
    let mut child = home
        .cmd("nmem")
        .arg("serve")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The deadline detects a missing reply (before: none ever came).
    let next = || -> serde_json::Value {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("no reply from nmem serve");
        serde_json::from_str(&line).unwrap()
    };
    let mut long =
        b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\",\"params\":{\"pad\":\"".to_vec();
    long.extend(std::iter::repeat_n(b'a', 9 * 1024 * 1024));
    long.extend_from_slice(b"\"}}");
    let cases: Vec<(Vec<u8>, i64, serde_json::Value)> = vec![
        (b"{\"jsonrpc\":\"2.0\",\"id\":1,".to_vec(), -32700, serde_json::Value::Null),
        (b"\xff\xfe\xfd".to_vec(), -32700, serde_json::Value::Null),
        (b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"pi\x00ng\"}".to_vec(), -32700, serde_json::Value::Null),
        ("[".repeat(10_000).into_bytes(), -32700, serde_json::Value::Null),
        (br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"search","arguments":"oops"}}"#.to_vec(), -32602, 3.into()),
        (br#"{"jsonrpc":"2.0","id":4,"method":7}"#.to_vec(), -32600, 4.into()),
        (long, -32600, serde_json::Value::Null),
    ];
    for (line, code, id) in cases {
        stdin.write_all(&line).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
        let reply = next();
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["error"]["code"], code, "{reply}");
        assert_eq!(reply["id"], id, "{reply}");
    }
    // Still serving: a proper initialize is answered by the MCP server.
    stdin
        .write_all(br#"{"jsonrpc":"2.0","id":10,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#)
        .unwrap();
    stdin.write_all(b"\n").unwrap();
    stdin.flush().unwrap();
    let reply = next();
    assert_eq!(reply["id"], 10, "{reply}");
    assert!(reply["result"]["serverInfo"].is_object(), "{reply}");
    drop(stdin);
    wait_exit(
        &mut child,
        Duration::from_secs(30),
        "nmem serve after stdin closed",
    );
}
