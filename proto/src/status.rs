//! What the files alone say about nmem: sizes and the spool. The daemon adds its own view;
//! `nmemctl status` uses this alone when the daemon is down.

use crate::paths::Paths;
use crate::{spool, wire};

/// The database's counts and schema version for `Status` (sessions, prompts, observations,
/// `user_version`, in that order): the one query `nmemd` runs on a reader and `nmemctl status`
/// on a read-only connection when the daemon is down.
pub const COUNTS_SQL: &str =
    "SELECT (SELECT COUNT(*) FROM sessions), (SELECT COUNT(*) FROM prompts),
    (SELECT COUNT(*) FROM observations), (SELECT user_version FROM pragma_user_version)";

pub fn from_files(paths: &Paths) -> wire::Status {
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let mut wal = paths.db.as_os_str().to_os_string();
    wal.push("-wal");
    let backlog = spool::backlog(&paths.spool);
    let now = crate::now_ms();
    wire::Status {
        socket: paths.socket.display().to_string(),
        db_path: paths.db.display().to_string(),
        db_bytes: size(&paths.db),
        wal_bytes: size(std::path::Path::new(&wal)),
        spool_backlog: backlog.events,
        spool_oldest_age_s: backlog.oldest.map(|t| ((now - t).max(0) / 1000) as u64),
        spool_corrupt: std::fs::read_dir(paths.spool_corrupt())
            .map(|d| d.count() as u64)
            .unwrap_or(0),
        spool_dropped: spool::dropped_count(&paths.spool_dropped_log()),
        paused: paths.paused_flag().exists(),
        ..Default::default()
    }
}
