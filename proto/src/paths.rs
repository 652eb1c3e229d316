//! Where nmem keeps its files.
//!
//! With `NMEM_HOME` set everything lives directly in it (`nmem.db`, `nmemd.sock`, `spool/`,
//! `config.toml`, logs and lock files). Otherwise the platform's folders are used (Linux: data in
//! `~/.local/share/nmem`, config in `~/.config/nmem`, state and spool in `~/.local/state/nmem`,
//! socket in `$XDG_RUNTIME_DIR/nmem`). `NMEM_DB` and `NMEM_SOCKET` override those two files.

use std::path::{Path, PathBuf};

#[derive(Debug, Clone)]
pub struct Paths {
    /// The SQLite database.
    pub db: PathBuf,
    /// The daemon's Unix socket.
    pub socket: PathBuf,
    /// One file per event, written by shims while the daemon is away.
    pub spool: PathBuf,
    /// The user's configuration file (optional).
    pub config: PathBuf,
    /// Logs, lock files and small state.
    pub state: PathBuf,
    /// Embedding models imported with `nmemctl model import`, one folder each.
    pub models: PathBuf,
}

impl Paths {
    /// Resolve from the environment. Never fails: without a home folder, falls back to
    /// `/tmp/nmem-<uid>` so a hook never errors out for want of a path.
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

    fn platform() -> Paths {
        let fallback = || std::env::temp_dir().join(format!("nmem-{}", unsafe { libc::getuid() }));
        let Some(dirs) = directories::ProjectDirs::from("", "", "nmem") else {
            return Paths::under(&fallback());
        };
        let state = dirs
            .state_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dirs.data_local_dir().join("state"));
        let socket_dir = dirs
            .runtime_dir()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| state.clone());
        Paths {
            db: dirs.data_dir().join("nmem.db"),
            socket: socket_dir.join("nmemd.sock"),
            spool: state.join("spool"),
            config: dirs.config_dir().join("config.toml"),
            state,
            models: dirs.data_dir().join("models"),
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

/// Create a folder (and its parents) readable by the owner alone.
pub fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let meta = std::fs::metadata(dir)?;
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}
