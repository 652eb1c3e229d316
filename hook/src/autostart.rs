//! Start `nmemd` in the background when a shim finds it down.
//!
//! Single flight: a shim takes an exclusive, non-blocking lock on `autostart.lock`, and skips
//! the start when another shim holds it or started the daemon in the last few seconds. The child
//! is fully detached (`setsid`, stdin from /dev/null, output to the daemon log, no other inherited
//! descriptors), so the harness never waits for it. `NMEM_NO_AUTOSTART=1` turns this off.

use nmem_proto::paths::{ensure_private_dir, Paths};
use std::fs::OpenOptions;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// A start attempt within this long of the previous one is skipped.
const BACKOFF: Duration = Duration::from_secs(3);

/// Try to start the daemon. Returns true if a child was spawned.
pub fn start_daemon(paths: &Paths) -> bool {
    if std::env::var_os("NMEM_NO_AUTOSTART").is_some_and(|v| v == "1") {
        return false;
    }
    if ensure_private_dir(&paths.state).is_err() {
        return false;
    }
    let lock_path = paths.autostart_lock();
    let Ok(lock) = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&lock_path)
    else {
        return false;
    };
    // SAFETY: flock on a descriptor we own; released when `lock` is closed at exit.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    let recent = lock
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| SystemTime::now().duration_since(t).ok())
        .is_some_and(|age| age < BACKOFF && lock.metadata().map(|m| m.len() > 0).unwrap_or(false));
    if recent {
        return false;
    }
    let _ = lock.set_len(0);
    let _ = std::fs::write(&lock_path, format!("{}\n", std::process::id()));
    spawn(paths).is_ok()
}

/// Start the daemon for a person waiting on a query: no backoff, still single-flight.
pub fn start_daemon_now(paths: &Paths) -> bool {
    if ensure_private_dir(&paths.state).is_err() {
        return false;
    }
    let Ok(lock) = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(paths.autostart_lock())
    else {
        return false;
    };
    // SAFETY: flock on a descriptor we own.
    if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return false;
    }
    spawn(paths).is_ok()
}

fn daemon_binary() -> PathBuf {
    if let Some(p) = std::env::var_os("NMEM_DAEMON_BIN") {
        return PathBuf::from(p);
    }
    // Installed side by side: prefer the nmemd next to this binary.
    if let Ok(exe) = std::env::current_exe() {
        let sibling = exe.with_file_name("nmemd");
        if sibling.is_file() {
            return sibling;
        }
    }
    PathBuf::from("nmemd")
}

fn spawn(paths: &Paths) -> std::io::Result<()> {
    // Never through a symlink: a planted link would make the daemon append its log elsewhere.
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(paths.daemon_log())?;
    let log2 = log.try_clone()?;
    let mut cmd = Command::new(daemon_binary());
    cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
    let open_max = open_max();
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            // Descriptors the harness leaked into us must not keep its pipes open.
            cloexec_from_3(open_max);
            Ok(())
        });
    }
    cmd.spawn().map(drop)
}

/// The descriptor bound [`cloexec_from_3`] loops to where there is no `close_range`; read
/// before the fork (not needed on Linux).
fn open_max() -> libc::c_int {
    // SAFETY: sysconf(3) with a constant name.
    let n = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) };
    // An unlimited or huge limit would make the loop long: leaked descriptors are low ones.
    if n <= 0 {
        4096
    } else {
        n.min(65_536) as libc::c_int
    }
}

/// Mark every descriptor from 3 up close-on-exec, between fork and exec. Close-on-exec rather
/// than closing: std reports exec failures on a pipe of its own among them.
#[cfg(target_os = "linux")]
unsafe fn cloexec_from_3(_open_max: libc::c_int) {
    // One syscall: close_range(3, ~0, CLOSE_RANGE_CLOEXEC = 4) (Linux 5.11).
    libc::syscall(libc::SYS_close_range, 3u32, u32::MAX, 4u32);
}

/// macOS has no `close_range`: `fcntl(F_SETFD)` on each descriptor up to the limit (EBADF on
/// the ones not open), async-signal-safe like the syscall it replaces.
#[cfg(not(target_os = "linux"))]
unsafe fn cloexec_from_3(open_max: libc::c_int) {
    for fd in 3..open_max {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
    }
}
