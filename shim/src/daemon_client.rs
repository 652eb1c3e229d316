//! Queries to the daemon for the CLI and the MCP server: JSON in, JSON out, with the daemon
//! started on demand and errors that say what to do.

use nmem_proto::paths::Paths;
use nmem_proto::{client, wire};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub enum CallError {
    /// The daemon is not there and could not be started.
    Unavailable(String),
    /// The daemon answered with an error (`code`, `message`).
    Api { code: String, message: String },
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Unavailable(m) => f.write_str(m),
            CallError::Api { message, .. } => f.write_str(message),
        }
    }
}

/// How long a live daemon may take to answer `/v1/health` (answered on the async workers, it
/// touches neither the database nor the writer) before it counts as hung.
pub const PROBE: Duration = Duration::from_secs(1);

/// The process holding the database lock (`nmem.db.lock`, `flock`ed by `nmemd` for its whole
/// life), whose pid `nmemd` wrote into it; `None` when no process holds it.
///
/// This is how a daemon that does not answer (stopped with SIGSTOP, hung) is still found. The
/// probe takes a shared lock for an instant: a daemon starting at that very instant would find
/// the lock taken and exit saying so, which only costs a retry of the start.
pub fn lock_owner(paths: &Paths) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(paths.db_lock()).ok()?;
    // SAFETY: flock on a descriptor we own; closing it releases the probe's lock.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } == 0 {
        unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_UN) };
        return None;
    }
    let pid: i32 = std::fs::read_to_string(paths.db_lock())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    // SAFETY: signal 0 only checks that the process exists (EPERM: it exists, not ours).
    let alive = pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
    alive.then_some(pid)
}

/// The message for a daemon that holds its lock but does not answer.
pub fn not_answering(pid: i32) -> String {
    format!(
        "nmemd is not answering (pid {pid}): it may be stopped (SIGSTOP) or hung; `nmemctl restart` replaces it"
    )
}

/// POST `body` to `path` and decode the reply.
pub fn post<B: Serialize, R: DeserializeOwned>(path: &str, body: &B) -> Result<R, CallError> {
    let paths = Paths::from_env();
    let bytes = serde_json::to_vec(body).expect("request serialises");
    // A hung daemon accepts connections (the kernel does) but never replies: a bounded probe
    // first, so the caller hears so in about a second instead of after the query's deadline.
    if let Err(e) = client::call(&paths.socket, "GET", wire::PATH_HEALTH, &[], b"", PROBE) {
        if !matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
        ) {
            return Err(CallError::Unavailable(match lock_owner(&paths) {
                Some(pid) => not_answering(pid),
                None => format!("nmemd does not answer ({e}); see `nmemctl status`"),
            }));
        }
    }
    let reply = match client::call(&paths.socket, "POST", path, &[], &bytes, DEADLINE) {
        Ok(r) => r,
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
            ) =>
        {
            start_and_wait(&paths)?;
            client::call(&paths.socket, "POST", path, &[], &bytes, DEADLINE)
                .map_err(|e| unavailable(&paths, &e.to_string()))?
        }
        // Someone else's process on the socket (see `client::peer_uid`): say so, start nothing.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(CallError::Unavailable(e.to_string()))
        }
        Err(e) => {
            return Err(match lock_owner(&paths) {
                Some(pid) => CallError::Unavailable(not_answering(pid)),
                None => unavailable(&paths, &e.to_string()),
            })
        }
    };
    if reply.status == 200 {
        return serde_json::from_slice(&reply.body)
            .map_err(|e| CallError::Unavailable(format!("nmemd sent a reply this client cannot read ({e}); is it the same version? See `nmemctl status`")));
    }
    match serde_json::from_slice::<wire::ErrorBody>(&reply.body) {
        Ok(e) => Err(CallError::Api {
            code: e.code,
            message: e.message,
        }),
        Err(_) => Err(CallError::Api {
            code: "internal".into(),
            message: format!("nmemd answered HTTP {}", reply.status),
        }),
    }
}

fn unavailable(paths: &Paths, why: &str) -> CallError {
    CallError::Unavailable(format!(
        "nmemd is not running ({why}). Start it with `nmemd` (or `nmemctl start` where a service is installed); socket: {}",
        paths.socket.display()
    ))
}

/// Does the daemon answer `/v1/health` right now?
pub fn healthy(paths: &Paths) -> bool {
    client::call(
        &paths.socket,
        "GET",
        wire::PATH_HEALTH,
        &[],
        b"",
        Duration::from_millis(500),
    )
    .is_ok_and(|r| r.status == 200)
}

/// Wait up to `timeout` for the daemon to answer (after starting it).
pub fn wait_healthy(paths: &Paths, timeout: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if healthy(paths) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// Start the daemon (unless NMEM_NO_AUTOSTART=1) and wait up to 5 s for it to answer.
fn start_and_wait(paths: &Paths) -> Result<(), CallError> {
    if std::env::var_os("NMEM_NO_AUTOSTART").is_some_and(|v| v == "1") {
        return Err(unavailable(
            paths,
            "and NMEM_NO_AUTOSTART=1 keeps it from being started",
        ));
    }
    crate::autostart::start_daemon_now(paths);
    if wait_healthy(paths, Duration::from_secs(5)) {
        return Ok(());
    }
    Err(unavailable(
        paths,
        "it did not come up within 5 s; see its log",
    ))
}
