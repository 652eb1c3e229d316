//! `nmem-bench --hook`: the hook's cost next to `/bin/true`, for this build's `nmem` and for other
//! builds of it (`--against NAME=PATH`, e.g. the binaries of main), in the same run.
//!
//! The runs are interleaved: each round runs `/bin/true` and then every variant once (starting
//! with the next one each round), so a
//! machine that slows down or speeds up during the run (the 2-core VM is shared) moves every
//! figure alike, and each ratio is a median over the same stretch of time as `/bin/true`'s.
//! Phases: the process alone (`record --help`), the payload read and parsed (recording paused),
//! the daemon up (3 KB PostToolUse, ack after commit), SessionStart with its digest (only with
//! `--home DIR`, a database `nmem-bench --fill DIR` built), and the daemon down (spool); the
//! differences between them say where the hook's time goes. After the daemon up, this build's
//! hook against the floor servers (`crate::floor`): what any daemon, and any daemon that
//! acknowledges after a commit, costs the hook on this machine. The daemon is this build's `nmemd` for every variant: only the hook binary differs.
//! Each binary runs from a fresh copy, as an install places it (`crate::installed_copy`).

use crate::{bash_payload, ms, pct, start_daemon};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// One `nmem` binary to measure.
pub struct Variant {
    pub name: String,
    pub nmem: PathBuf,
}

/// Parse `NAME=PATH` (PATH: an `nmem` binary, or a folder holding one).
pub fn parse_variant(spec: &str) -> anyhow::Result<Variant> {
    let (name, path) = spec
        .split_once('=')
        .ok_or_else(|| anyhow::anyhow!("--against takes NAME=PATH (got `{spec}`)"))?;
    let path = PathBuf::from(path);
    let nmem = if path.is_dir() {
        path.join("nmem")
    } else {
        path
    };
    anyhow::ensure!(
        nmem.is_file(),
        "--against {name}: no nmem binary at {}",
        nmem.display()
    );
    Ok(Variant {
        name: name.to_string(),
        nmem,
    })
}

/// One run: wall time from spawn to exit, the child's CPU time (user + system, from `wait4`'s
/// rusage: much less disturbed by other load on the machine than the wall time) and its minor
/// page faults.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    cpu: Duration,
    faults: u64,
}

/// Run `cmd` once, feed it `body` on stdin, and time it from spawn to exit.
fn time_one(mut cmd: Command, body: Option<&[u8]>) -> Sample {
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    cmd.stdin(if body.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    if let Some(b) = body {
        let mut stdin = child.stdin.take().expect("piped stdin");
        let _ = stdin.write_all(b);
    }
    // SAFETY: wait4 on our own child, with a status and an rusage we own; the `Child` is not
    // waited on again.
    let mut status = 0;
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut ru) };
    let wall = start.elapsed();
    // Already reaped by wait4: this returns ECHILD at once, and tells std the child is done.
    let _ = child.try_wait();
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    Sample {
        wall,
        cpu: tv(ru.ru_utime) + tv(ru.ru_stime),
        faults: ru.ru_minflt as u64,
    }
}

fn record(nmem: &Path, home: &Path) -> Command {
    let mut c = Command::new(nmem);
    c.arg("record")
        .env("NMEM_HOME", home)
        .env("NMEM_NO_AUTOSTART", "1");
    c
}

/// `runs` rounds of `/bin/true` then each variant: `/bin/true`'s samples and each variant's.
fn interleaved(
    runs: usize,
    variants: &[Variant],
    mut make: impl FnMut(&Variant, usize) -> (Command, Vec<u8>),
) -> (Vec<Sample>, Vec<Vec<Sample>>) {
    crate::settle_disk();
    let mut t_true = Vec::with_capacity(runs);
    let mut t = vec![Vec::with_capacity(runs); variants.len()];
    for n in 0..runs {
        t_true.push(time_one(Command::new("/bin/true"), None));
        // Each round starts with the next variant: the daemon's work after one run (indexing
        // the rows just committed, 20 ms after the queue empties) must not always land on the
        // same variant.
        for k in 0..variants.len() {
            let i = (n + k) % variants.len();
            let (cmd, body) = make(&variants[i], n);
            t[i].push(time_one(cmd, Some(&body)));
        }
    }
    (t_true, t)
}

/// Medians of wall time, CPU time and faults.
fn medians(s: &[Sample]) -> (Duration, Duration, Duration, u64) {
    let mut wall: Vec<Duration> = s.iter().map(|x| x.wall).collect();
    let mut cpu: Vec<Duration> = s.iter().map(|x| x.cpu).collect();
    let mut faults: Vec<u64> = s.iter().map(|x| x.faults).collect();
    wall.sort();
    cpu.sort();
    faults.sort();
    (
        pct(&wall, 0.5),
        pct(&wall, 0.95),
        pct(&cpu, 0.5),
        faults[faults.len() / 2],
    )
}

fn print(what: &str, variants: &[Variant], t_true: &[Sample], t: &[Vec<Sample>]) {
    let (base, p95, base_cpu, faults) = medians(t_true);
    println!(
        "{:<48} median {:>7.3} ms  p95 {:>7.3} ms  cpu {:>6.3} ms  {faults} faults",
        "spawn /bin/true",
        ms(base),
        ms(p95),
        ms(base_cpu)
    );
    for (v, t) in variants.iter().zip(t) {
        let (med, p95, cpu, faults) = medians(t);
        println!(
            "{:<48} median {:>7.3} ms  p95 {:>7.3} ms  cpu {:>6.3} ms  {faults} faults  {:.2}× /bin/true (cpu {:.2}×)",
            format!("[{}] {what}", v.name),
            ms(med),
            ms(p95),
            ms(cpu),
            med.as_secs_f64() / base.as_secs_f64(),
            cpu.as_secs_f64() / base_cpu.as_secs_f64().max(1e-9),
        );
    }
}

/// A SessionStart of a new session in the corpus's busiest project (`corpus.rs`).
fn session_start(n: usize, tag: &str) -> Vec<u8> {
    serde_json::json!({
        "session_id": format!("bench-hook-{tag}-{n}"),
        "cwd": "/home/dev/projects/acme-api",
        "hook_event_name": "SessionStart",
        "source": "startup"
    })
    .to_string()
    .into_bytes()
}

pub fn run(
    bins: &Path,
    runs: usize,
    mut variants: Vec<Variant>,
    filled: Option<&Path>,
) -> anyhow::Result<()> {
    variants.insert(
        0,
        Variant {
            name: "this build".into(),
            nmem: bins.join("nmem"),
        },
    );
    // Every variant runs from a copy, as installed (`crate::installed_copy` says why).
    for (i, v) in variants.iter_mut().enumerate() {
        let copy = if i == 0 {
            crate::hook_bin(bins)
        } else {
            crate::installed_copy(&v.nmem, &format!("variant-{i}"))?
        };
        println!(
            "{:<12} {} (run from a copy: {})",
            v.name,
            v.nmem.display(),
            copy.display()
        );
        v.nmem = copy;
    }
    let home = std::env::temp_dir().join(format!("nmem-bench-hook-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&home);
    std::fs::create_dir_all(&home)?;
    let payload_len = bash_payload(0).len();
    println!("{runs} interleaved rounds; payload {payload_len} bytes (PostToolUse Bash)\n");

    // Where the time goes, by difference: the process alone (`record --help`: start, print to
    // /dev/null, exit), then with the payload read and parsed (`nmemctl pause`: the hook stops
    // after one stat), then the whole exchange with the daemon, then spooling.
    let (t_true, t) = interleaved(runs, &variants, |v, _| {
        let mut c = record(&v.nmem, &home);
        c.arg("--help");
        (c, Vec::new())
    });
    print("nmem record --help (process start)", &variants, &t_true, &t);
    let paused = home.join("paused-home");
    std::fs::create_dir_all(&paused)?;
    std::fs::write(nmem_proto::paths::Paths::under(&paused).paused_flag(), b"")?;
    let (t_true, t) = interleaved(runs, &variants, |v, n| {
        (record(&v.nmem, &paused), bash_payload(3_000_000 + n))
    });
    print(
        "nmem record, paused (start, read, parse)",
        &variants,
        &t_true,
        &t,
    );

    let mut daemon = start_daemon(bins, &home)?;
    let (t_true, t) = interleaved(runs, &variants, |v, n| {
        (record(&v.nmem, &home), bash_payload(1_000_000 + n))
    });
    print(
        "nmem record, daemon up (ack after commit)",
        &variants,
        &t_true,
        &t,
    );
    daemon.stop()?;
    // The floor under that figure (`crate::floor`): this build's hook against servers that
    // answer at once, commit first (in the nmem.db nmemd just made), or commit on a writer thread.
    let socket = nmem_proto::paths::Paths::under(&home).socket;
    for (what, kind) in &crate::floor::KINDS {
        let floor = crate::floor::start(&socket, *kind, &home.join("nmem.db"))?;
        let (t_true, t) = interleaved(runs, &variants[..1], |v, n| {
            (record(&v.nmem, &home), bash_payload(4_000_000 + n))
        });
        crate::floor::answered(floor.stop()?, runs, what)?;
        print(what, &variants[..1], &t_true, &t);
    }

    if let Some(dir) = filled {
        let mut daemon = start_daemon(bins, dir)?;
        let (t_true, t) = interleaved(runs, &variants, |v, n| {
            (record(&v.nmem, dir), session_start(n, &v.name))
        });
        print("SessionStart with digest", &variants, &t_true, &t);
        // The same, each right after a user prompt in the project (through the API, untimed):
        // the cached digest is invalid, so it is computed fresh, as every SessionStart was
        // before the cache.
        let socket = nmem_proto::paths::Paths::under(dir).socket;
        let (t_true, t) = interleaved(runs, &variants[..1], |v, n| {
            let body = serde_json::json!({
                "session_id": format!("bench-hook-miss-{n}"),
                "cwd": "/home/dev/projects/acme-api",
                "hook_event_name": "UserPromptSubmit",
                "prompt": format!("Look at the invoice export again ({n})")
            })
            .to_string();
            let id = format!("hookmiss{n:024}");
            let _ = nmem_proto::client::call(
                &socket,
                "POST",
                nmem_proto::wire::PATH_EVENTS,
                &[(nmem_proto::wire::H_EVENT_ID, &id)],
                body.as_bytes(),
                Duration::from_secs(10),
            );
            (record(&v.nmem, dir), session_start(n, "miss"))
        });
        print(
            "SessionStart with digest, after a write (fresh)",
            &variants[..1],
            &t_true,
            &t,
        );
        daemon.stop()?;
    }

    let (t_true, t) = interleaved(runs, &variants, |v, n| {
        let down = home.join(format!("down-{}", v.name.replace(['/', ' '], "_")));
        (record(&v.nmem, &down), bash_payload(2_000_000 + n))
    });
    print("nmem record, daemon down (spool)", &variants, &t_true, &t);
    let _ = std::fs::remove_dir_all(&home);
    Ok(())
}
