//! `nmem` is two binaries: the small hook handler, which runs `nmem record` itself, and
//! `nmem-cli`, which it `exec`s for every other subcommand. These tests run the real binaries
//! (and the real daemon) and check that the split is invisible: the same output, exit status and
//! stdin/stdout as one binary, a clear message when the companion is missing, and the
//! SessionStart digest, now served from a cache, still showing the latest write, and precomputed
//! after writes settle so a SessionStart only reads it.

use nmem_e2e::*;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn run(cmd: &mut Command) -> std::process::Output {
    cmd.stdin(Stdio::null()).output().expect("run")
}

#[test]
fn other_subcommands_behave_as_one_binary() {
    let home = Home::new("split");
    // --version and --help: what nmem-cli prints, under the name nmem.
    let v = run(home.cmd("nmem").arg("--version"));
    assert!(v.status.success(), "{v:?}");
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("nmem {}", env!("CARGO_PKG_VERSION"))
    );
    let h = run(home.cmd("nmem").arg("--help"));
    assert!(h.status.success(), "{h:?}");
    let help = String::from_utf8_lossy(&h.stdout);
    assert!(help.contains("Usage: nmem <COMMAND>"), "{help}");
    for sub in ["record", "serve", "search", "import", "install"] {
        assert!(help.contains(sub), "{sub} missing from: {help}");
    }
    // A usage error keeps clap's status (2) and names nmem, not nmem-cli.
    let bad = run(home.cmd("nmem").arg("no-such-subcommand"));
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("Usage: nmem") && !err.contains("nmem-cli"),
        "{err}"
    );
    // `nmem record --help` is the hook's own text, from the small binary.
    let rh = run(home.cmd("nmem").args(["record", "--help"]));
    assert!(rh.status.success());
    assert!(String::from_utf8_lossy(&rh.stdout).starts_with("nmem record: the hook handler"));
}

/// `nmem record` and `nmem-cli record` read their command line the same way (one function):
/// the same usage text, and an argument that is not UTF-8 refused in one line with exit 1, never
/// a panic.
#[test]
fn both_binaries_read_a_record_command_line_alike() {
    use std::os::unix::ffi::OsStrExt;
    let home = Home::new("argv");
    let bad = std::ffi::OsStr::from_bytes(b"--harness=\xff");
    let mut seen = Vec::new();
    for bin in ["nmem", "nmem-cli"] {
        let help = run(home.cmd(bin).args(["record", "--help"]));
        assert!(help.status.success(), "{bin}: {help:?}");
        let out = run(home.cmd(bin).arg("record").arg(bad));
        assert_eq!(out.status.code(), Some(1), "{bin}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("nmem record: an argument is not UTF-8") && err.lines().count() == 1,
            "{bin}: {err}"
        );
        seen.push((help.stdout, err.into_owned()));
    }
    assert_eq!(seen[0], seen[1]);
}

#[test]
fn serve_keeps_stdin_and_stdout_through_the_exec() {
    let home = Home::new("splitserve");
    let _d = home.start();
    let mut child = home
        .cmd("nmem")
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(
            br#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}"#,
        )
        .unwrap();
    stdin.write_all(b"\n").unwrap();
    drop(stdin);
    // The server exits once stdin is closed; a hang fails on the deadline.
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "nmem serve did not exit after EOF"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let reply: serde_json::Value = serde_json::from_str(text.lines().next().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}: {text}"));
    assert_eq!(reply["id"], 7, "{text}");
    assert_eq!(reply["result"]["serverInfo"]["name"], "nmem", "{text}");
}

#[test]
fn without_nmem_cli_next_to_it_nmem_says_what_to_do_and_still_records() {
    let home = Home::new("alone");
    let dir = home.dir.join("bin");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(bin("nmem"), dir.join("nmem")).unwrap();
    let out = run(Command::new(dir.join("nmem"))
        .arg("--version")
        .env("NMEM_HOME", &home.dir)
        .env("PATH", "/nonexistent"));
    assert_eq!(out.status.code(), Some(127), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("nmem-cli") && err.contains("scripts/install"),
        "{err}"
    );
    // The hook does not need it: the event is spooled (no daemon), exit 0.
    let mut rec = Command::new(dir.join("nmem"));
    rec.arg("record")
        .env("NMEM_HOME", &home.dir)
        .env("NMEM_NO_AUTOSTART", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = rec.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&bash_event("alone", 1))
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(home.spooled_events(), 1);
}

fn session_start(session: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": session,
        "cwd": "/home/dev/projects/ledger",
        "hook_event_name": "SessionStart",
        "source": "startup"
    })
    .to_string()
    .into_bytes()
}

fn prompt(session: &str, text: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": session,
        "cwd": "/home/dev/projects/ledger",
        "hook_event_name": "UserPromptSubmit",
        "prompt": text
    })
    .to_string()
    .into_bytes()
}

fn digest(home: &Home, session: &str) -> String {
    let out = home.record("claude-code", &session_start(session));
    assert!(out.status.success(), "{out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_digest_shows_the_latest_write_though_it_is_cached() {
    let home = Home::new("digestcache");
    let _d = home.start();
    assert_eq!(digest(&home, "s1"), "", "an empty memory prints nothing");
    assert!(home
        .record(
            "claude-code",
            &prompt("s1", "Make the ledger export stream rows")
        )
        .status
        .success());
    let second = digest(&home, "s2");
    assert!(
        second.contains("Make the ledger export stream rows"),
        "{second}"
    );
    // Read again with nothing written: the same intents (served from the cache).
    let again = digest(&home, "s2b");
    assert!(
        again.contains("Make the ledger export stream rows"),
        "{again}"
    );
    assert!(home
        .record(
            "claude-code",
            &prompt("s2", "Reconcile the ledger against the bank feed")
        )
        .status
        .success());
    // The write just committed shows at once: the cached digest was invalidated by it.
    let third = digest(&home, "s3");
    assert!(
        third.contains("Reconcile the ledger against the bank feed"),
        "{third}"
    );
}

fn status(home: &Home) -> serde_json::Value {
    let out = run(home.cmd("nmemctl").args(["status", "--json"]));
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn counter(home: &Home, name: &str) -> u64 {
    status(home)[name]
        .as_u64()
        .unwrap_or_else(|| panic!("{name}"))
}

#[test]
fn a_session_start_after_writes_settle_reads_a_precomputed_digest() {
    let home = Home::new("digestwarm");
    let _d = home.start();
    for (round, text) in [
        (1, "Split the invoice importer into parse and post"),
        (2, "Retry the bank feed download with a backoff"),
    ] {
        let before = counter(&home, "digests_precomputed");
        let out = home.record("claude-code", &prompt(&format!("w{round}"), text));
        assert!(out.status.success(), "{out:?}");
        // The warmer runs once writes have settled (about half a second): the digest of the
        // project just written is computed there, not by the next SessionStart.
        wait_until(
            "the warmer to precompute the written project's digest",
            Duration::from_secs(30),
            || counter(&home, "digests_precomputed") > before,
        );
        let on_demand = counter(&home, "digests_on_demand");
        let d = digest(&home, &format!("s{round}"));
        assert!(d.contains(text), "round {round}: {d}");
        assert_eq!(
            counter(&home, "digests_on_demand"),
            on_demand,
            "round {round}: the SessionStart computed its digest instead of reading the stored one"
        );
    }
}
