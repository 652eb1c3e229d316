//! The daemon's hold on its files: the database lock, the socket (bound here or inherited from
//! systemd socket activation), and the signals that end it.
//!
//! Nothing here follows a symlink or trusts a folder others can write to: the lock is opened with
//! `O_NOFOLLOW` (a planted link to another file would otherwise be truncated), the socket's folder
//! must be the user's own, and only a stale *socket* is ever removed to bind anew: any other file
//! at that path is left alone and the start refused.

use nmem_proto::paths::{check_own_file, ensure_private_dir_for, Paths, NOFOLLOW_FLAGS};
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Tries at taking the database lock, 20 ms apart (see `DbLock::acquire`).
const LOCK_ATTEMPTS: u32 = 5;

/// The exclusive lock beside the database, held for the daemon's whole life.
pub struct DbLock {
    _file: File,
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("another nmemd (pid {pid}) already owns {db}; stop it first (`nmemctl stop`), or set NMEM_DB to use another database")]
    AlreadyRunning { pid: String, db: String },
    #[error("another nmemd is already listening on {0}; stop it first, or set NMEM_SOCKET to use another socket")]
    SocketInUse(String),
    #[error("{0} exists and is not a socket: nmemd replaces only a stale socket of its own; move that file away, or set NMEM_SOCKET to another path")]
    NotASocket(String),
    #[error("{0}")]
    Unsafe(String),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StartError + 'a {
    move |source| StartError::Io {
        what,
        path: path.display().to_string(),
        source,
    }
}

impl DbLock {
    /// Take the lock or say who has it.
    pub fn acquire(paths: &Paths) -> Result<DbLock, StartError> {
        let path = paths.db_lock();
        check_own_file(&path).map_err(|e| StartError::Unsafe(e.to_string()))?;
        // O_NOFOLLOW as well as the check: a link planted between the two still fails (ELOOP).
        let mut file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(NOFOLLOW_FLAGS)
            .open(&path)
            .map_err(io("cannot open the lock file", &path))?;
        let meta = file
            .metadata()
            .map_err(io("cannot open the lock file", &path))?;
        if !meta.is_file() || meta.uid() != unsafe { libc::geteuid() } {
            return Err(StartError::Unsafe(format!(
                "{} is not a regular file of yours: remove it, or set NMEM_DB to another database",
                path.display()
            )));
        }
        // `nmemctl status` and the CLI find a daemon by probing this lock with a shared lock held
        // for an instant: a start that collides with a probe tries again a few times before it
        // concludes that another nmemd holds the lock.
        let mut rc = -1;
        for attempt in 0..LOCK_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            // SAFETY: flock on a descriptor we own.
            rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EWOULDBLOCK)
            {
                break;
            }
        }
        if rc != 0 {
            // Read through the descriptor already checked, never the name again.
            let mut pid = String::new();
            let _ = (&file).take(64).read_to_string(&mut pid);
            let pid = pid.trim().to_string();
            return Err(StartError::AlreadyRunning {
                pid: if pid.is_empty() {
                    "unknown".into()
                } else {
                    pid
                },
                db: paths.db.display().to_string(),
            });
        }
        file.set_len(0)
            .map_err(io("cannot write the lock file", &path))?;
        let _ = writeln!(file, "{}", std::process::id());
        Ok(DbLock { _file: file })
    }
}

/// Where the daemon listens, and whether it must remove the socket file when it stops.
pub struct Bound {
    pub listener: std::os::unix::net::UnixListener,
    /// Some(path) when this process created the socket (never for socket activation).
    pub owned_path: Option<PathBuf>,
}

/// Check the socket's folder and path before anything is created (database, lock), so a refused
/// start changes nothing: [`bind`] checks again when it binds.
pub fn preflight(paths: &Paths) -> Result<(), StartError> {
    if std::env::var_os("LISTEN_FDS").is_some() {
        return Ok(()); // the service manager owns the socket
    }
    let path = &paths.socket;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if dir.exists() {
            nmem_proto::paths::check_private_dir(dir, "NMEM_SOCKET")
                .map_err(|e| StartError::Unsafe(format!("the socket's folder: {e}")))?;
        }
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if !meta.file_type().is_socket() => {
            Err(StartError::NotASocket(path.display().to_string()))
        }
        _ => Ok(()),
    }
}

/// Take the socket from systemd (`LISTEN_PID`/`LISTEN_FDS`) or bind our own.
pub fn bind(paths: &Paths) -> Result<Bound, StartError> {
    if let Some(listener) = inherited_socket()? {
        tracing::info!("using the socket handed over by the service manager");
        return Ok(Bound {
            listener,
            owned_path: None,
        });
    }
    let path = &paths.socket;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        // Refuses a folder another user owns or can write to: they could bind first or swap the
        // socket under us.
        ensure_private_dir_for(dir, "NMEM_SOCKET")
            .map_err(|e| StartError::Unsafe(format!("the socket's folder: {e}")))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(StartError::SocketInUse(path.display().to_string()));
            }
            // A stale socket from a daemon that died: replace it.
            std::fs::remove_file(path).map_err(io("cannot remove the stale socket", path))?;
        }
        // Anything else (a regular file, a symlink, a folder) is not ours to delete.
        Ok(_) => return Err(StartError::NotASocket(path.display().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io("cannot inspect the socket path", path)(e)),
    }
    let listener =
        std::os::unix::net::UnixListener::bind(path).map_err(io("cannot listen on", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(io("cannot restrict", path))?;
    Ok(Bound {
        listener,
        owned_path: Some(path.clone()),
    })
}

/// systemd socket activation, through the `listenfd` crate: fd 3 when `LISTEN_PID` is us and
/// `LISTEN_FDS` ≥ 1, checked to be a Unix stream socket and marked close-on-exec; the
/// variables are removed so our children (the embedder) do not take them for theirs. Anything
/// else at fd 3 refuses the start, saying so.
fn inherited_socket() -> Result<Option<std::os::unix::net::UnixListener>, StartError> {
    let mut fds = listenfd::ListenFd::from_env();
    std::env::remove_var("LISTEN_FDNAMES");
    if fds.len() == 0 {
        return Ok(None);
    }
    fds.take_unix_listener(0).map_err(|e| {
        StartError::Unsafe(format!(
            "the socket the service manager handed over (LISTEN_FDS) is unusable: {e}; check \
             nmemd.socket's ListenStream"
        ))
    })
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
        _ = int.recv() => tracing::info!("SIGINT: shutting down"),
    }
}
