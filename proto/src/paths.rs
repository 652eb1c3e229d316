//! Where nmem keeps its files, and the checks that make those folders safe to use.
//!
//! With `NMEM_HOME` set everything lives directly in it (`nmem.db`, `nmemd.sock`, `spool/`,
//! `config.toml`, logs and lock files). Otherwise the platform's folders are used (Linux: data in
//! `~/.local/share/nmem`, config in `~/.config/nmem`, state and spool in `~/.local/state/nmem`,
//! socket in `$XDG_RUNTIME_DIR/nmem`). `NMEM_DB` and `NMEM_SOCKET` override those two files.
//!
//! The folders are found from the environment alone, never through the user database: the
//! binaries are statically linked, and glibc's NSS (`getpwuid`, which the `directories` crate
//! calls when `HOME` is unset) crashes a static binary. Without `HOME` the fallback is
//! `$XDG_RUNTIME_DIR/nmem`, else `/tmp/nmem-<uid>`, created owner-only and checked like any other.
//!
//! A folder nmem uses must be owned by the user and writable by nobody else
//! ([`ensure_private_dir`]): in a folder others can write to, another user could plant a symlink
//! where the lock, database or spool goes, or bind the socket first. nmem creates missing folders
//! owner-only and never changes the mode of a folder it did not create.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Paths {
    /// The SQLite database.
    pub db: PathBuf,
    /// The daemon's Unix socket.
    pub socket: PathBuf,
    /// Events written by hooks while the daemon is away: the log `events.log`, files of older
    /// hooks (see `spool`).
    pub spool: PathBuf,
    /// The user's configuration file (optional).
    pub config: PathBuf,
    /// Logs, lock files and small state.
    pub state: PathBuf,
    /// Embedding models imported with `nmemctl model import`, one folder each.
    pub models: PathBuf,
}

/// An absolute path from a non-empty environment variable (a relative XDG path is ignored, as
/// the XDG spec says).
fn abs_var(k: &str) -> Option<PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

impl Paths {
    /// Resolve from the environment. Never fails and never consults the user database: without a
    /// home folder it falls back to `$XDG_RUNTIME_DIR/nmem` or `/tmp/nmem-<uid>`, so a hook never
    /// errors out (or crashes) for want of a path.
    pub fn from_env() -> Paths {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        let mut paths = if let Some(home) = var("NMEM_HOME") {
            Paths::under(&home)
        } else {
            Paths::platform()
        };
        if let Some(db) = var("NMEM_DB") {
            paths.db = db;
        }
        if let Some(sock) = var("NMEM_SOCKET") {
            paths.socket = sock;
        }
        paths
    }

    /// Everything directly under one folder.
    pub fn under(home: &Path) -> Paths {
        Paths {
            db: home.join("nmem.db"),
            socket: home.join("nmemd.sock"),
            spool: home.join("spool"),
            config: home.join("config.toml"),
            state: home.to_path_buf(),
            models: home.join("models"),
        }
    }

    /// The folder used when there is no home folder: the runtime folder, else one per uid in
    /// `/tmp` (owner-only and checked before use, like every folder).
    pub fn fallback_home() -> PathBuf {
        match abs_var("XDG_RUNTIME_DIR") {
            Some(run) => run.join("nmem"),
            None => PathBuf::from(format!("/tmp/nmem-{}", unsafe { libc::geteuid() })),
        }
    }

    fn platform() -> Paths {
        let Some(home) = abs_var("HOME") else {
            return Paths::under(&Paths::fallback_home());
        };
        Paths::platform_under(&home)
    }

    /// The platform's layout for a home folder, as the `directories` crate had it (so existing
    /// installs keep their files), computed from the environment only.
    #[cfg(target_os = "macos")]
    fn platform_under(home: &Path) -> Paths {
        let base = home.join("Library/Application Support/nmem");
        let state = base.join("state");
        Paths {
            db: base.join("nmem.db"),
            socket: state.join("nmemd.sock"),
            spool: state.join("spool"),
            config: base.join("config.toml"),
            state,
            models: base.join("models"),
        }
    }

    #[cfg(not(target_os = "macos"))]
    fn platform_under(home: &Path) -> Paths {
        let xdg = |k: &str, default: &str| abs_var(k).unwrap_or_else(|| home.join(default));
        let data = xdg("XDG_DATA_HOME", ".local/share").join("nmem");
        let state = xdg("XDG_STATE_HOME", ".local/state").join("nmem");
        let socket_dir = abs_var("XDG_RUNTIME_DIR")
            .map(|d| d.join("nmem"))
            .unwrap_or_else(|| state.clone());
        Paths {
            db: data.join("nmem.db"),
            socket: socket_dir.join("nmemd.sock"),
            spool: state.join("spool"),
            config: xdg("XDG_CONFIG_HOME", ".config")
                .join("nmem")
                .join("config.toml"),
            state,
            models: data.join("models"),
        }
    }

    /// The lock file the daemon holds for its whole life: one `nmemd` per database.
    pub fn db_lock(&self) -> PathBuf {
        let mut name = self.db.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        self.db.with_file_name(name)
    }

    /// The lock file that makes shim autostarts single-flight.
    pub fn autostart_lock(&self) -> PathBuf {
        self.state.join("autostart.lock")
    }

    /// While this file exists, recording is paused (`nmemctl pause`): hooks exit 0 at once.
    pub fn paused_flag(&self) -> PathBuf {
        self.state.join("paused")
    }

    /// Where an autostarted daemon writes its log.
    pub fn daemon_log(&self) -> PathBuf {
        self.state.join("nmemd.log")
    }

    /// Spool files that could not be read, moved aside for a person to look at.
    pub fn spool_corrupt(&self) -> PathBuf {
        self.spool.join("corrupt")
    }

    /// One line per event the spool had to drop (too large, or evicted by the bounds).
    pub fn spool_dropped_log(&self) -> PathBuf {
        self.state.join("spool-dropped.log")
    }
}

/// Create a folder (and its missing parents) readable by the owner alone, or check an existing
/// one: it must be a folder owned by this user that nobody else can write to. An existing folder
/// is never chmod'ed (it may be shared, and it is not nmem's). The error says to set `NMEM_HOME`.
pub fn ensure_private_dir(dir: &Path) -> io::Result<()> {
    ensure_private_dir_for(dir, "NMEM_HOME")
}

/// [`ensure_private_dir`], with the error naming `var`, the variable that moves this file
/// elsewhere (`NMEM_DB` for the database's folder, `NMEM_SOCKET` for the socket's).
pub fn ensure_private_dir_for(dir: &Path, var: &str) -> io::Result<()> {
    // One stat when the folder exists (the hook's spool path runs this on every spooled event).
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // Only the folders created here get 0700; `recursive` leaves existing parents alone.
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
            std::fs::metadata(dir)?
        }
        Err(e) => return Err(e),
    };
    judge_private_dir(dir, &meta, var)
}

/// Whether `dir` is safe to keep nmem's files in (see [`ensure_private_dir`]); the error says
/// what is wrong and which variable to change. A symlinked folder is judged by its target.
pub fn check_private_dir(dir: &Path, var: &str) -> io::Result<()> {
    judge_private_dir(dir, &std::fs::metadata(dir)?, var)
}

/// [`check_private_dir`] on metadata already read.
fn judge_private_dir(dir: &Path, meta: &std::fs::Metadata, var: &str) -> io::Result<()> {
    let me = unsafe { libc::geteuid() };
    let refuse = |why: String| {
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "{} {why}: nmem keeps its files only in a folder that you own and nobody else can \
                 write to; set {var} to a path in such a folder",
                dir.display()
            ),
        ))
    };
    if !meta.is_dir() {
        return refuse("is not a folder".into());
    }
    if meta.uid() != me {
        return refuse(format!(
            "belongs to uid {}, not to you (uid {me})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return refuse(format!(
            "is writable by others (mode {:o})",
            meta.mode() & 0o7777
        ));
    }
    Ok(())
}

/// `lstat` a file nmem is about to open or create: absent is fine; present, it must be a regular
/// file owned by this user, never a symlink (which could point at another file to truncate) nor
/// a FIFO or device (which could block or never end).
pub fn check_own_file(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let me = unsafe { libc::geteuid() };
    let why = if meta.file_type().is_symlink() {
        "is a symbolic link".to_string()
    } else if !meta.is_file() {
        "is not a regular file".to_string()
    } else if meta.uid() != me {
        format!("belongs to uid {}, not to you (uid {me})", meta.uid())
    } else {
        return Ok(());
    };
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} {why}: nmem will not open it; remove it (or move nmem elsewhere with NMEM_HOME)",
            path.display()
        ),
    ))
}

/// Open flags for files nmem opens by name in its own folders: a symlink in the last component
/// fails (`ELOOP`) instead of being followed, and a FIFO never blocks the open.
pub const NOFOLLOW_FLAGS: i32 = libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC;

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A folder not yet made inside a fresh temporary one, removed with it when the guard
    /// drops (the test passed or not).
    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("d");
        (t, d)
    }

    #[test]
    fn creates_owner_only_and_never_chmods_an_existing_folder() {
        let (_t, d) = tmp();
        ensure_private_dir(&d.join("a/b")).unwrap();
        for p in [d.join("a"), d.join("a/b")] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode & 0o077, 0, "{} created {mode:o}", p.display());
        }
        // A shared folder is refused, named with the variable, and left as it was.
        let shared = d.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let e = ensure_private_dir_for(&shared, "NMEM_DB").unwrap_err();
        assert!(e.to_string().contains("NMEM_DB"), "{e}");
        assert!(e.to_string().contains("writable by others"), "{e}");
        let mode = std::fs::metadata(&shared).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o1777);
        // A readable (0755) folder of one's own is fine, and stays 0755.
        let open = d.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_private_dir(&open).unwrap();
        let mode = std::fs::metadata(&open).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn own_file_check_refuses_symlinks_and_fifos() {
        let (_t, d) = tmp();
        std::fs::create_dir_all(&d).unwrap();
        assert!(check_own_file(&d.join("absent")).is_ok());
        std::fs::write(d.join("plain"), b"x").unwrap();
        assert!(check_own_file(&d.join("plain")).is_ok());
        std::os::unix::fs::symlink(d.join("plain"), d.join("link")).unwrap();
        let e = check_own_file(&d.join("link")).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let fifo = std::ffi::CString::new(d.join("fifo").to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert!(check_own_file(&d.join("fifo")).is_err());
    }

    #[test]
    fn no_home_falls_back_without_the_user_database() {
        // Only the pure part: the fallback is derived from the environment and the uid.
        let p = Paths::fallback_home();
        assert!(p.is_absolute());
        assert!(p.ends_with("nmem") || p.to_string_lossy().starts_with("/tmp/nmem-"));
    }
}
