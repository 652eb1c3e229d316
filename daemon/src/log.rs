//! The daemon's log: tracing's formatter writing to stderr through a sink that never fails.
//!
//! A log line that cannot be written (stderr on a full disk, a pipe whose reader exited, a
//! closed descriptor) is counted and dropped: losing a log line must never cost an event. Two
//! things made it fatal before: tracing-subscriber reports a failed write with `eprintln!`,
//! which panics when stderr itself is what failed (and `panic = "abort"` ends the process), and
//! a write to a pipe without reader raises SIGPIPE, whose default action kills. So the sink
//! swallows the error (counting it, shown by `nmemctl status`), the formatter's own error
//! reporting is off, and SIGPIPE is ignored (a broken pipe is then an `EPIPE` error, here and on
//! sockets alike).

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Log lines that could not be written since the daemon started.
static WRITE_FAILURES: AtomicU64 = AtomicU64::new(0);

pub fn write_failures() -> u64 {
    WRITE_FAILURES.load(Relaxed)
}

/// Install the subscriber (filter from `NMEM_LOG`, default `info`) and ignore SIGPIPE.
pub fn init() {
    // SAFETY: setting a signal disposition to SIG_IGN before any thread is started.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("NMEM_LOG")
                .unwrap_or_else(|_| "info".into()),
        )
        .with_writer(|| Sink)
        .with_ansi(false)
        .log_internal_errors(false)
        .init();
}

/// One line to stderr outside tracing (the final error of a failed start), with the same rule:
/// a failure is counted, never a panic as `eprintln!` would.
pub fn line(msg: &str) {
    let _ = Sink.write_all(format!("{msg}\n").as_bytes());
}

/// stderr, infallible. The formatter hands over each event as one buffer, so one failed call
/// is one lost line.
pub struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if io::stderr().lock().write_all(buf).is_err() {
            WRITE_FAILURES.fetch_add(1, Relaxed);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = io::stderr().flush();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_is_counted_and_reported_as_written() {
        // Point this test process's stderr at /dev/full for the duration of the write.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
        let Ok(full) = full else {
            eprintln!("skipped: no /dev/full");
            return;
        };
        use std::os::fd::AsRawFd;
        // SAFETY: dup/dup2 on descriptors this test owns; fd 2 is restored before returning.
        let saved = unsafe { libc::dup(2) };
        unsafe { libc::dup2(full.as_raw_fd(), 2) };
        let before = write_failures();
        let res = Sink.write(b"a line for a full disk\n");
        unsafe {
            libc::dup2(saved, 2);
            libc::close(saved);
        }
        assert_eq!(res.unwrap(), 23);
        assert!(write_failures() > before);
    }
}
