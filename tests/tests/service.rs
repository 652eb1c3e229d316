//! How nmemd comes and goes: autostart by the shim, systemd socket activation, spool bounds.

use nmem_e2e::*;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::time::Duration;

/// The pid an autostarted daemon wrote into the database lock file.
fn daemon_pid(home: &Home) -> Option<i32> {
    std::fs::read_to_string(home.paths.db_lock())
        .ok()?
        .trim()
        .parse()
        .ok()
}

fn healthy(home: &Home) -> bool {
    nmem_proto::client::call(
        &home.paths.socket,
        "GET",
        "/v1/health",
        &[],
        b"",
        Duration::from_millis(300),
    )
    .map(|r| r.status == 200)
    .unwrap_or(false)
}

#[test]
fn the_shim_starts_the_daemon_once_and_it_drains_the_spool() {
    let home = Home::new("auto");
    let out = home.record_with("claude-code", &bash_event("auto", 1), |c| {
        c.env_remove("NMEM_NO_AUTOSTART");
    });
    assert!(out.status.success(), "{out:?}");
    wait_until(
        "the autostarted daemon to answer",
        Duration::from_secs(20),
        || healthy(&home),
    );
    wait_until(
        "the spooled event to be stored",
        Duration::from_secs(20),
        || home.spooled_events() == 0 && home.count("SELECT COUNT(*) FROM observations") == 1,
    );
    // It is detached: its own session, not a child of the shim.
    let pid = daemon_pid(&home).expect("the daemon wrote its pid");
    let sid = unsafe { libc::getsid(pid) };
    assert_eq!(sid, pid, "the autostarted daemon leads its own session");
    // With it up, a second event goes straight in.
    assert!(home
        .record("claude-code", &bash_event("auto", 2))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 2);
    unsafe { libc::kill(pid, libc::SIGTERM) };
    wait_until("the daemon to stop", Duration::from_secs(20), || {
        !home.paths.socket.exists()
    });
}

#[test]
fn a_socket_handed_over_by_systemd_is_used_and_left_in_place() {
    let home = Home::new("sockact");
    let listener = std::os::unix::net::UnixListener::bind(&home.paths.socket).unwrap();
    let fd = listener.as_raw_fd();
    let mut cmd = std::process::Command::new("/bin/sh");
    // LISTEN_PID must be the daemon's own pid: sh exports its pid, then becomes nmemd.
    cmd.args(["-c", "LISTEN_PID=$$ LISTEN_FDS=1 exec \"$0\""])
        .arg(bin("nmemd"))
        .env("NMEM_HOME", &home.dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(home.dir.join("nmemd.log")).unwrap());
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps close-on-exec: clear it explicitly.
            if fd != 3 && libc::dup2(fd, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if libc::fcntl(3, libc::F_SETFD, 0) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(listener);
    wait_until(
        "nmemd to answer on the inherited socket",
        Duration::from_secs(20),
        || healthy(&home),
    );
    assert!(home
        .record("claude-code", &bash_event("sockact", 1))
        .status
        .success());
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 1);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    assert!(
        home.paths.socket.exists(),
        "a socket from the service manager is not the daemon's to remove"
    );
}

#[test]
fn the_spool_is_bounded_oldest_first_and_drops_are_counted() {
    let home = Home::new("bounds");
    let events: Vec<Vec<u8>> = (0..6).map(|i| bash_event("bounds", i)).collect();
    for e in &events {
        assert!(home.record("claude-code", e).status.success());
    }
    let sizes = home.spooled_sizes();
    assert_eq!(sizes.len(), 6);
    // Room for the newest four only.
    let bound: u64 = sizes.iter().rev().take(4).sum();
    std::fs::write(
        home.paths.config.clone(),
        format!("[spool]\nmax_bytes = {bound}\n"),
    )
    .unwrap();
    let _d = home.start();
    wait_until("the spool to drain", Duration::from_secs(20), || {
        home.spooled_events() == 0
    });
    assert_eq!(home.count("SELECT COUNT(*) FROM observations"), 4);
    assert_eq!(home.count("SELECT COUNT(*) FROM observations WHERE content LIKE '%-event-0' OR content LIKE '%-event-1'"), 0, "the oldest go first");
    let out = home
        .cmd("nmemctl")
        .args(["status", "--json"])
        .output()
        .unwrap();
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["spool_dropped"], 2);
}

#[test]
fn a_bad_config_is_refused_with_the_key_named() {
    let home = Home::new("badcfg");
    std::fs::write(&home.paths.config, "[dedup]\nwindow_sec = 5\n").unwrap();
    let out = home.cmd("nmemd").output().unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("config.toml") && err.contains("window_sec"),
        "{err}"
    );
}
