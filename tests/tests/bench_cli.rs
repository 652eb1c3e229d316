//! `nmem-bench`'s command line: `--help` prints the usage (every option, and runs nothing), and a
//! bad option or value is refused at once with a pointer to `--help`, before any benchmark
//! starts (a typo must not start an hour-long run, nor build a database).

use nmem_e2e::*;
use std::process::{Command, Output, Stdio};

fn bench(args: &[&str], tmp: &std::path::Path) -> Output {
    Command::new(bin("nmem-bench"))
        .args(args)
        // A folder without nmem's binaries: any run that got past the checks would fail on it.
        .env("NMEM_BIN_DIR", tmp.join("no-binaries-here"))
        // The benchmark's scratch homes go under TMPDIR: an empty one shows nothing ran.
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .output()
        .expect("run nmem-bench")
}

/// A real run of `nmem-bench` with nmem's binaries, its scratch homes under `tmp`; it must
/// succeed.
fn measure(args: &[&str], tmp: &std::path::Path) -> Output {
    std::fs::create_dir_all(tmp).unwrap();
    let out = Command::new(bin("nmem-bench"))
        .args(args)
        .env("TMPDIR", tmp)
        .env("NMEM_BIN_DIR", bin_dir())
        .stdin(Stdio::null())
        .output()
        .expect("run nmem-bench");
    assert!(out.status.success(), "{out:?}");
    out
}

/// The run removed everything it made under `tmp`.
fn left_nothing(tmp: &std::path::Path) {
    assert!(
        empty(tmp),
        "left behind: {:?}",
        std::fs::read_dir(tmp).unwrap().collect::<Vec<_>>()
    );
}

fn empty(dir: &std::path::Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

#[test]
fn help_lists_every_option_and_runs_nothing() {
    let home = Home::new("benchhelp");
    let tmp = home.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    for flag in ["--help", "-h"] {
        // Also after other options: --help wins over a run.
        for args in [vec![flag], vec!["--events", "10", flag]] {
            let out = bench(&args, &tmp);
            assert!(out.status.success(), "{args:?}: {out:?}");
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.starts_with("nmem-bench:"), "{text}");
            for option in [
                "--runs",
                "--events",
                "--scales",
                "--scale",
                "--import-records",
                "--model",
                "--json",
                "--corpus",
                "--ingest-only",
                "--rounds",
                "--search-only",
                "--home",
                "--fill",
                "--eval",
                "--config",
                "--ablate",
                "--keep",
                "--hook",
                "--against",
                "--help",
            ] {
                // The option itself, not a longer one it begins (`--scale` in `--scales`).
                let named = text.match_indices(option).any(|(i, _)| {
                    !text[i + option.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '-')
                });
                assert!(named, "{option} missing from the help:\n{text}");
            }
            assert!(
                out.stderr.is_empty(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(empty(&tmp), "--help started a benchmark");
        }
    }
}

#[test]
fn a_bad_option_or_value_is_refused_before_anything_runs() {
    let home = Home::new("benchbad");
    let tmp = home.dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    for (args, says) in [
        (vec!["--runz", "10"], "unknown argument `--runz`"),
        (vec!["--ingest-only", "--events"], "--events needs a value"),
        (vec!["--runs", "ten"], "--runs takes a whole number"),
        (vec!["--ingest-only", "--events", "0"], "at least 1"),
        (vec!["--scales", "10000,lots"], "comma-separated list"),
        (vec!["--rounds", "-1"], "--rounds takes a whole number"),
        (vec!["--scale", "10,20"], "--scale takes a whole number"),
        // No binaries where NMEM_BIN_DIR points: said before any daemon is started.
        (
            vec!["--ingest-only", "--events", "10"],
            "point NMEM_BIN_DIR at",
        ),
    ] {
        let out = bench(&args, &tmp);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        // An argument error points at the usage; a missing binary says where to build it.
        let points = err.contains("nmem-bench --help") || err.contains("scripts/bench");
        assert!(err.contains(says) && points, "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?} printed a run's output");
        assert!(empty(&tmp), "{args:?} started a benchmark");
    }
}

/// `--hook` measures copies of the hook binaries, as an install places them (run from the file
/// the linker wrote, the same bytes start measurably slower), prints each phase as a ratio to
/// `/bin/true`, and leaves neither copies nor homes behind.
#[test]
fn the_hook_is_measured_from_a_copy_and_nothing_is_left_behind() {
    let home = Home::new("benchhook");
    let tmp = home.dir.join("tmp");
    let out = measure(&["--hook", "--runs", "3"], &tmp);
    let text = String::from_utf8_lossy(&out.stdout);
    let copy = format!(
        "(run from a copy: {}",
        tmp.join("nmem-bench-bin-").display()
    );
    assert!(text.contains(&copy), "{copy} not in:\n{text}");
    for phase in [
        "nmem record --help (process start)",
        "nmem record, daemon up (ack after commit)",
        "floor: server answering at once",
        "floor: server committing the event first",
        "floor: the same, commit on a writer thread",
        "nmem record, daemon down (spool)",
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains(phase) && l.contains("× /bin/true")),
            "{phase}:\n{text}"
        );
    }
    left_nothing(&tmp);
}

/// `--ingest-only` measures nmemd and then the two ingest floors with the same load, each floor
/// answering every event (a floor that dropped some would stop the bench with an error), and
/// leaves nothing behind.
#[test]
fn ingest_only_measures_the_daemon_then_the_floors() {
    let home = Home::new("benchingest");
    let tmp = home.dir.join("tmp");
    let out = measure(&["--ingest-only", "--events", "300", "--runs", "5"], &tmp);
    let text = String::from_utf8_lossy(&out.stdout);
    for line in [
        "ingest through the socket API",
        "floor: ingest, threads and a writer thread",
        "floor: ingest, one thread (poll, group commit)",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with(line) && l.contains("events/s  (8 connections, 300 events")),
            "{line}:\n{text}"
        );
    }
    left_nothing(&tmp);
}
