//! `nmem-bench`'s command line: help is help, and a wrong argument is refused at once instead of
//! starting an hour-long run. Each run is bounded by a deadline, so a benchmark started by
//! mistake fails the test instead of hanging it.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn run(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_nmem-bench"))
        .args(args)
        // Nowhere to find binaries: a benchmark that started anyway fails fast.
        .env("NMEM_BIN_DIR", "/nonexistent")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("nmem-bench {args:?} did not exit within 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn help_prints_usage_and_exits_0() {
    for flag in ["--help", "-h"] {
        let out = run(&[flag]);
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("nmem-bench: "), "{text}");
        for opt in [
            "--runs",
            "--scales",
            "--import-records",
            "--fill",
            "--eval",
            "--hook",
        ] {
            assert!(text.contains(opt), "{opt} missing from the help: {text}");
        }
    }
    // Anywhere on the line, even after options that would start a run.
    assert!(run(&["--runs", "5", "--help"]).status.success());
}

#[test]
fn unknown_or_incomplete_arguments_are_refused() {
    for args in [
        &["--hepl"][..],
        &["--scales"],
        &["10000"],
        &["--runs", "5", "--bogus"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("see nmem-bench --help"), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} started something: {out:?}");
    }
}
