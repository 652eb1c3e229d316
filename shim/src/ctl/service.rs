//! The daemon as a service: `nmemctl start|stop|restart`, `pause`/`resume`, `logs`, `config check`.

use super::*;

/// `nmemctl pause` / `resume`: hooks record nothing (and still exit 0) while paused.
pub fn pause(on: bool) -> ExitCode {
    let paths = Paths::from_env();
    let flag = paths.paused_flag();
    let res = if on {
        nmem_proto::paths::ensure_private_dir(&paths.state)
            .and_then(|_| std::fs::write(&flag, format!("{}\n", nmem_proto::now_ms())))
    } else {
        match std::fs::remove_file(&flag) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    };
    match res {
        Ok(()) => {
            println!(
                "{}",
                if on {
                    "recording paused for every project (`nmemctl resume` to go on)"
                } else {
                    "recording resumed"
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("cannot change {}: {e}", flag.display())),
    }
}

/// `nmemctl logs`: the end of the daemon's log.
pub fn logs(lines: usize) -> ExitCode {
    let paths = Paths::from_env();
    let log = paths.daemon_log();
    match std::fs::read_to_string(&log) {
        Ok(text) => {
            let all: Vec<&str> = text.lines().collect();
            for l in &all[all.len().saturating_sub(lines)..] {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(_) => {
            println!("no log at {} (a daemon run by systemd logs to the journal: journalctl --user -u nmemd)", log.display());
            ExitCode::SUCCESS
        }
    }
}

/// `nmemctl config check`: the daemon's own parser judges the file.
pub fn config_check() -> ExitCode {
    let daemon = std::env::current_exe()
        .map(|e| e.with_file_name("nmemd"))
        .unwrap_or_else(|_| "nmemd".into());
    match std::process::Command::new(daemon)
        .arg("--check-config")
        .status()
    {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(1),
        Err(e) => fail(format!("cannot run nmemd to check the config: {e}")),
    }
}

fn systemd_unit_active() -> bool {
    std::process::Command::new("systemctl")
        .args(["--user", "is-enabled", "--quiet", "nmemd.socket"])
        // Without nmem's units (or a user bus) systemctl complains; that only means "no".
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// How long a stopping daemon gets to finish its queue and checkpoint before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

/// What [`stop_daemon`] did.
pub enum Stopped {
    NotRunning,
    Gracefully(i32),
    /// It did not stop within [`STOP_GRACE`] and was killed.
    Killed(i32),
    /// Still there after SIGKILL (uninterruptible sleep).
    Survived(i32),
}

/// Stop the daemon that holds the database lock, answering or not: SIGTERM (with SIGCONT, so a
/// daemon stopped by SIGSTOP can act on it), wait up to [`STOP_GRACE`] for it to let go of the
/// lock, then SIGKILL, saying so. Killing loses nothing acknowledged: every acknowledged event
/// is committed, and SQLite recovers the WAL at the next start. Prints what it does.
pub fn stop_daemon(paths: &Paths) -> Stopped {
    let Some(pid) = crate::daemon_client::lock_owner(paths) else {
        return Stopped::NotRunning;
    };
    // SAFETY: signals to the pid that holds nmem's lock (written there by nmemd itself).
    unsafe {
        libc::kill(pid, libc::SIGTERM);
        libc::kill(pid, libc::SIGCONT);
    }
    let gone = |within: Duration| {
        let start = std::time::Instant::now();
        loop {
            if crate::daemon_client::lock_owner(paths) != Some(pid) {
                return true;
            }
            if start.elapsed() > within {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    if gone(STOP_GRACE) {
        println!("nmemd stopped (pid {pid})");
        return Stopped::Gracefully(pid);
    }
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    if gone(Duration::from_secs(5)) {
        println!(
            "nmemd (pid {pid}) did not stop within {} s of SIGTERM: killed it (SIGKILL); acknowledged events are committed, the next start recovers the WAL",
            STOP_GRACE.as_secs()
        );
        Stopped::Killed(pid)
    } else {
        Stopped::Survived(pid)
    }
}

/// `nmemctl start | stop | restart`: through systemd when nmem's units are enabled, else directly.
pub fn service(action: &str) -> ExitCode {
    let paths = Paths::from_env();
    if systemd_unit_active() {
        let args: &[&str] = match action {
            "start" => &["--user", "start", "nmemd.socket", "nmemd.service"],
            "stop" => &["--user", "stop", "nmemd.service"],
            _ => &["--user", "restart", "nmemd.service"],
        };
        return match std::process::Command::new("systemctl").args(args).status() {
            Ok(s) if s.success() => ExitCode::SUCCESS,
            _ => fail(format!(
                "systemctl --user {action} failed; see journalctl --user -u nmemd"
            )),
        };
    }
    if action != "start" {
        match stop_daemon(&paths) {
            Stopped::NotRunning if action == "stop" => {
                println!("nmemd is not running");
                return ExitCode::SUCCESS;
            }
            Stopped::NotRunning | Stopped::Gracefully(_) | Stopped::Killed(_) => {}
            Stopped::Survived(pid) => {
                return fail(format!(
                    "nmemd (pid {pid}) is still running after SIGKILL; it may be stuck in the kernel (a hung disk?): see `ps -o stat,wchan -p {pid}`"
                ))
            }
        }
        if action == "stop" {
            return ExitCode::SUCCESS;
        }
    }
    if !crate::autostart::start_daemon_now(&paths) {
        return fail("could not start nmemd (is another start under way?)");
    }
    if crate::daemon_client::wait_healthy(&paths, Duration::from_secs(10)) {
        println!("nmemd started");
        return ExitCode::SUCCESS;
    }
    fail(format!(
        "nmemd did not come up; see `nmemctl logs` ({})",
        paths.daemon_log().display()
    ))
}
