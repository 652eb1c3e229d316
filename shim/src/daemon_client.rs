//! The one way the CLI, the MCP server and `nmemctl` call the daemon: typed requests and
//! replies ([`nmem_proto::query`], [`nmem_proto::admin`], [`nmem_proto::wire`]), the daemon
//! started on demand where the caller wants that, and errors that say whether the daemon is
//! down, slow or refused, and what to do. (`nmem record` keeps its own std-only call in
//! `record.rs`: it is the hook's hot path and spools on any failure; `nmem import` holds one
//! kept-alive [`client::Conn`] for its batches.)

use nmem_proto::paths::Paths;
use nmem_proto::{client, wire};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::time::{Duration, Instant};

/// The CLI's and the MCP server's deadline for one query.
const DEADLINE: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub enum CallError {
    /// No daemon answers on the socket (nothing listens, or it refused the connection), and
    /// none could be started where that was asked.
    Down(String),
    /// A daemon is there (it holds its lock, or accepted the connection) but did not answer in
    /// time: stopped, hung, or busy past the deadline.
    Slow(String),
    /// The socket belongs to another user's process: nothing was sent.
    Refused(String),
    /// The daemon answered with an error (`code`, `message`; the HTTP status).
    Api {
        status: u16,
        code: String,
        message: String,
    },
    /// The daemon's reply could not be read (another version?).
    BadReply(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Down(m)
            | CallError::Slow(m)
            | CallError::Refused(m)
            | CallError::BadReply(m) => f.write_str(m),
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

/// How a call behaves around the exchange itself.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// The whole exchange's deadline.
    pub deadline: Duration,
    /// Start the daemon when nothing listens (unless `NMEM_NO_AUTOSTART=1`).
    pub autostart: bool,
    /// Ask `/v1/health` first, within [`PROBE`]: a hung daemon accepts connections (the kernel
    /// does) but never replies, and the caller should hear so in about a second rather than
    /// after a long deadline.
    pub probe: bool,
}

impl Options {
    /// The CLI's and the MCP server's queries: probed, started on demand, 30 s.
    pub const QUERY: Options = Options {
        deadline: DEADLINE,
        autostart: true,
        probe: true,
    };

    /// `nmemctl`: a person is waiting; nothing is started behind their back.
    pub fn ctl(deadline: Duration) -> Options {
        Options {
            deadline,
            autostart: false,
            probe: true,
        }
    }
}

/// POST `body` to `path` and decode the reply, with [`Options::QUERY`].
pub fn post<B: Serialize, R: DeserializeOwned>(path: &str, body: &B) -> Result<R, CallError> {
    call("POST", path, Some(body), Options::QUERY)
}

/// One typed exchange with the daemon: `body` (none for a GET) serialised as JSON, the reply
/// decoded as `R`, an error reply as [`CallError::Api`].
pub fn call<B: Serialize, R: DeserializeOwned>(
    method: &str,
    path: &str,
    body: Option<&B>,
    opts: Options,
) -> Result<R, CallError> {
    call_at(&Paths::from_env(), method, path, body, opts)
}

/// [`call`] with the daemon's files at `paths`.
pub fn call_at<B: Serialize, R: DeserializeOwned>(
    paths: &Paths,
    method: &str,
    path: &str,
    body: Option<&B>,
    opts: Options,
) -> Result<R, CallError> {
    let bytes = match body {
        Some(b) => serde_json::to_vec(b).expect("request serialises"),
        None => Vec::new(),
    };
    if opts.probe && path != wire::PATH_HEALTH {
        if let Err(e) = client::call(&paths.socket, "GET", wire::PATH_HEALTH, &[], b"", PROBE) {
            if !is_down(&e) {
                return Err(classify(paths, &e));
            }
        }
    }
    let exchange = || client::call(&paths.socket, method, path, &[], &bytes, opts.deadline);
    let reply = match exchange() {
        Ok(r) => r,
        Err(e) if is_down(&e) && opts.autostart => {
            start_and_wait(paths)?;
            exchange().map_err(|e| classify(paths, &e))?
        }
        Err(e) => return Err(classify(paths, &e)),
    };
    if reply.status == 200 {
        return serde_json::from_slice(&reply.body).map_err(|e| {
            CallError::BadReply(format!(
                "nmemd sent a reply this client cannot read ({e}); is it the same version? See `nmemctl status`"
            ))
        });
    }
    Err(
        match serde_json::from_slice::<wire::ErrorBody>(&reply.body) {
            Ok(e) => CallError::Api {
                status: reply.status,
                code: e.code,
                message: e.message,
            },
            Err(_) => CallError::Api {
                status: reply.status,
                code: wire::code::INTERNAL.into(),
                message: format!("nmemd answered HTTP {}", reply.status),
            },
        },
    )
}

/// Nothing listens: no socket file, or nobody accepts on it.
fn is_down(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
    )
}

/// What a failed exchange means for the caller.
fn classify(paths: &Paths, e: &std::io::Error) -> CallError {
    use std::io::ErrorKind;
    match e.kind() {
        // Someone else's process on the socket (see `client::peer_uid`): say so, start nothing.
        ErrorKind::PermissionDenied => CallError::Refused(e.to_string()),
        _ if is_down(e) => unavailable(paths, &e.to_string()),
        // A full accept backlog (the non-blocking connect's EAGAIN) or a deadline: it is there.
        ErrorKind::TimedOut | ErrorKind::WouldBlock => CallError::Slow(match lock_owner(paths) {
            Some(pid) => not_answering(pid),
            None => format!("nmemd does not answer in time ({e}); see `nmemctl status`"),
        }),
        _ => match lock_owner(paths) {
            Some(pid) => CallError::Slow(not_answering(pid)),
            None => unavailable(paths, &e.to_string()),
        },
    }
}

fn unavailable(paths: &Paths, why: &str) -> CallError {
    CallError::Down(format!(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> Options {
        Options {
            deadline: Duration::from_secs(2),
            autostart: false,
            probe: true,
        }
    }

    #[test]
    fn nothing_listening_is_down_and_says_how_to_start_it() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        let e = call_at::<(), wire::Health>(&paths, "GET", wire::PATH_HEALTH, None, opts())
            .unwrap_err();
        assert!(matches!(e, CallError::Down(_)), "{e:?}");
        assert!(e.to_string().contains("Start it"), "{e}");
    }

    /// A socket that accepts (the kernel's backlog) but never answers: a hung daemon. The
    /// probe names it within about a second, not after the call's deadline.
    #[test]
    fn a_silent_listener_is_slow_not_down() {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths::under(dir.path());
        std::fs::create_dir_all(paths.socket.parent().unwrap()).unwrap();
        let _listener = std::os::unix::net::UnixListener::bind(&paths.socket).unwrap();
        let long = Options {
            deadline: Duration::from_secs(60),
            ..opts()
        };
        let start = Instant::now();
        let e = call_at::<_, wire::Health>(&paths, "POST", wire::PATH_MAINTAIN, Some(&()), long)
            .unwrap_err();
        assert!(matches!(e, CallError::Slow(_)), "{e:?}");
        // The deadline that matters is the probe's: fail well before the call's 60 s.
        assert!(start.elapsed() < Duration::from_secs(30), "{e}");
    }
}
