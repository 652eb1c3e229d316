//! The real `nmem-embed` binary driven through `EmbedChild`, as nmemd drives it.

use crate::common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{assert_close, golden, tiny_model, TempDir};
use nmem_embed::protocol::{self, EmbedChild};
use nmem_embed::{EmbedError, Embedder};

const BIN: &str = env!("CARGO_BIN_EXE_nmem-embed");
const READY: Duration = Duration::from_secs(30);
const CALL: Duration = Duration::from_secs(30);

fn spawn_tiny() -> EmbedChild {
    EmbedChild::spawn(Path::new(BIN), &tiny_model(), READY).unwrap()
}

fn process_exists(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

#[test]
fn vectors_through_the_child_match_golden() {
    let mut child = spawn_tiny();
    let g = golden();
    assert_eq!(child.dim(), g.dim);
    assert_eq!(child.max_tokens(), g.max_tokens);
    assert!(child.model_id().starts_with("custom-"));
    let texts: Vec<&str> = g.cases.iter().map(|c| c.text.as_str()).collect();
    let vectors = child.embed(&texts, CALL).unwrap();
    for (v, case) in vectors.iter().zip(&g.cases) {
        assert_close(v, &case.vector, 1e-4, &case.text);
    }
    // More than 64 texts go as several requests; the trait uses the default timeout.
    let many: Vec<&str> = texts.iter().cycle().take(150).copied().collect();
    let out = Embedder::embed(&mut child, &many).unwrap();
    assert_eq!(out.len(), 150);
    for (v, text) in out.iter().zip(&many) {
        let case = g.cases.iter().find(|c| c.text == *text).unwrap();
        assert_close(v, &case.vector, 1e-4, text);
    }
    assert!(child.embed(&[], CALL).unwrap().is_empty());
    // Closing its input ends it cleanly.
    let pid = child.pid();
    assert!(child.shutdown(Duration::from_secs(10)).unwrap().success());
    assert!(!process_exists(pid));
}

#[test]
fn a_killed_child_is_an_error_not_a_hang() {
    let mut child = spawn_tiny();
    let pid = child.pid();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        // SAFETY: a plain signal to the child this test started.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    let texts = vec!["the daemon read the config file, then wrote the search index"; 64];
    let started = Instant::now();
    let err = loop {
        match child.embed(&texts, CALL) {
            Ok(_) => assert!(started.elapsed() < CALL, "the kill never landed"),
            Err(e) => break e,
        }
    };
    killer.join().unwrap();
    assert!(matches!(err, EmbedError::Protocol(_)), "{err}");
    assert!(err.child_is_gone() && !child.is_alive());
    assert!(!process_exists(pid), "reaped");
}

#[test]
fn a_stopped_child_times_out_and_is_killed() {
    let mut child = spawn_tiny();
    let pid = child.pid();
    // SAFETY: a plain signal to the child this test started.
    unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
    let started = Instant::now();
    let err = child
        .embed(&["the nightly export crashed"], Duration::from_millis(300))
        .unwrap_err();
    assert!(matches!(err, EmbedError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(!process_exists(pid), "killed and reaped although stopped");
}

#[test]
fn a_bad_model_dir_is_an_error_line_and_exit_1() {
    let empty = TempDir::new("bad-model-dir");
    // Through the client: a clear error.
    let err = EmbedChild::spawn(Path::new(BIN), empty.path(), READY).unwrap_err();
    let msg = match &err {
        EmbedError::Child(msg) => msg.clone(),
        other => panic!("{other:?}"),
    };
    assert!(
        msg.contains("not a model folder") && msg.contains("exit status: 1"),
        "{msg}"
    );
    // On the wire: exactly one {"error"} line on stdout.
    let out = Command::new(BIN)
        .arg("--model-dir")
        .arg(empty.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(stdout.matches('\n').count(), 1, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("not a model folder"));
}

#[test]
fn the_wire_format_is_as_documented() {
    let mut proc = Command::new(BIN)
        .arg("--model-dir")
        .arg(tiny_model())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = proc.stdin.take().unwrap();
    stdin
        .write_all(protocol::request_line(&["the nightly export crashed"]).as_bytes())
        .unwrap();
    stdin.write_all(b"not json\n").unwrap();
    stdin
        .write_all(protocol::request_line(&vec!["x"; 65]).as_bytes())
        .unwrap();
    stdin.write_all(b"{\"texts\":[]}\n").unwrap();
    drop(stdin);
    let out = proc.wait_with_output().unwrap();
    assert!(out.status.success(), "EOF on stdin: exit 0");
    let g = golden();
    let mut rest = out.stdout.as_slice();
    let mut line = || {
        let nl = rest.iter().position(|&b| b == b'\n').unwrap();
        let l = String::from_utf8(rest[..nl].to_vec()).unwrap();
        rest = &rest[nl + 1..];
        l
    };
    let ready = line();
    assert!(
        ready.starts_with("{\"ready\":true,\"model\":\"custom-"),
        "{ready}"
    );
    assert!(
        ready.ends_with(&format!(
            ",\"dim\":{},\"max_tokens\":{}}}",
            g.dim, g.max_tokens
        )),
        "{ready}"
    );
    assert_eq!(line(), format!("{{\"n\":1,\"dim\":{}}}", g.dim));
    let payload_len = g.dim * 4;
    let (payload, after) = out.stdout[out.stdout.len() - rest.len()..].split_at(payload_len);
    assert_close(
        &protocol::decode_vectors(payload, 1, g.dim)[0],
        &g.cases[0].vector,
        1e-4,
        "raw",
    );
    rest = after;
    let mut line = || {
        let nl = rest.iter().position(|&b| b == b'\n').unwrap();
        let l = String::from_utf8(rest[..nl].to_vec()).unwrap();
        rest = &rest[nl + 1..];
        l
    };
    assert!(line().starts_with("{\"error\":\"request is not JSON"));
    assert!(line().contains("at most 64"));
    assert_eq!(line(), format!("{{\"n\":0,\"dim\":{}}}", g.dim));
}

#[test]
fn help_and_embed_flags() {
    let help = Command::new(BIN).arg("--help").output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8(help.stdout).unwrap();
    for flag in ["--model-dir", "--embed", "--bench", "--threads"] {
        assert!(text.contains(flag), "{flag} in --help");
    }
    let out = Command::new(BIN)
        .arg("--model-dir")
        .arg(tiny_model())
        .arg("--embed")
        .arg("")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let vector: Vec<f32> = v["vector"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    let g = golden();
    let empty = g.cases.iter().find(|c| c.text.is_empty()).unwrap();
    assert_close(&vector, &empty.vector, 1e-4, "--embed");
    let bad = Command::new(BIN).arg("--frobnicate").output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
