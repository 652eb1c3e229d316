//! Draining the spool: events that shims wrote while the daemon was away.
//!
//! At start and whenever the writer is idle, oldest first. A file is deleted only after its
//! event is committed (or found to be a duplicate), so a crash mid-drain replays it, harmlessly:
//! the event id is unique in the database. A file that cannot be read or parsed is moved to
//! `spool/corrupt/` and reported; it never blocks the rest.
//!
//! The folder is not trusted: only regular files of this user within `[spool] max_bytes` are
//! read (`nmem_proto::spool::read`); a symlink, FIFO, device or oversized file is quarantined
//! without being read. Reading and preparing (which may tail a transcript) run on a blocking
//! thread, so the drain never holds an async worker and shutdown is never stuck behind it.

use crate::app::App;
use crate::ingest::{Prepared, RawEvent};
use crate::stats::Stats;
use nmem_proto::spool;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Files handed to the writer at once; their acknowledgements are awaited together, so one
/// group commit covers many.
const CHUNK: usize = 512;

/// Drain now, then again whenever idle, until shutdown.
pub async fn run(app: Arc<App>, mut shutdown: watch::Receiver<bool>) {
    let interval = Duration::from_millis(app.config.spool.drain_interval_ms.max(10));
    loop {
        if app.writer.depth() == 0 {
            if let Err(e) = drain(&app, &shutdown).await {
                app.stats.error(format!("spool drain failed: {e}"));
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.changed() => return,
        }
        if *shutdown.borrow() {
            return;
        }
    }
}

/// One pass over the spool. Returns how many events were committed or found already stored.
pub async fn drain(app: &Arc<App>, shutdown: &watch::Receiver<bool>) -> std::io::Result<u64> {
    let dir = &app.paths.spool;
    let max_age_ms = app.config.spool.max_age_days.saturating_mul(86_400_000) as i64;
    spool::enforce_bounds(
        dir,
        app.config.spool.max_bytes,
        max_age_ms,
        nmem_proto::now_ms(),
        &app.paths.spool_dropped_log(),
    )?;
    let files = spool::list(dir)?;
    if files.is_empty() {
        return Ok(0);
    }
    tracing::info!(backlog = files.len(), "draining the spool");
    let mut done = 0;
    for chunk in files.chunks(CHUNK) {
        if *shutdown.borrow() {
            break;
        }
        let mut pending = Vec::with_capacity(chunk.len());
        let loaded = {
            let app = app.clone();
            let chunk: Vec<PathBuf> = chunk.iter().map(|(p, _)| p.clone()).collect();
            tokio::task::spawn_blocking(move || {
                chunk
                    .into_iter()
                    .filter_map(|path| load(&app, &path).map(|p| (path, p)))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(std::io::Error::other)?
        };
        for (path, prepared) in loaded {
            match app.writer.enqueue_with_session(prepared).await {
                Ok((session, rx)) => pending.push((path, session, rx)),
                Err(_) => return Ok(done), // shutting down: the file stays for next time
            }
        }
        for (path, session, rx) in pending {
            match rx.await {
                Ok(Ok(_)) => {
                    remove(&path);
                    done += 1;
                    Stats::add(&app.stats.spool_drained, 1);
                }
                // Not committed: keep the file, it is retried on the next pass, and the
                // transcript it read is read again then.
                Ok(Err(e)) => {
                    app.ingest.tailer.forget(&session);
                    app.stats.error(format!(
                        "spooled event {} not stored yet: {e}",
                        path.display()
                    ));
                }
                Err(_) => return Ok(done),
            }
        }
    }
    Ok(done)
}

/// Read and prepare one spool file (on a blocking thread). `None` when there is nothing to
/// queue: vanished, stored nothing (deleted), or refused (quarantined).
fn load(app: &App, path: &Path) -> Option<Prepared> {
    let entry = match spool::read(path, app.config.spool.max_bytes) {
        Ok(e) => e,
        // Vanished meanwhile (another drain, or the bounds): nothing to do.
        Err(spool::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            quarantine(app, path, &e.to_string());
            return None;
        }
    };
    let raw = match RawEvent::new(
        entry.header.event_id,
        entry.header.received_at,
        &entry.header.harness,
        entry.payload,
    ) {
        Ok(raw) => raw,
        Err(why) => {
            quarantine(app, path, &why);
            return None;
        }
    };
    match app.ingest.prepare(&raw) {
        Ok(None) => {
            remove(path);
            None
        }
        Ok(Some(prepared)) => Some(prepared),
        Err(e) => {
            quarantine(app, path, &e.to_string());
            None
        }
    }
}

fn remove(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot delete drained spool file {}: {e}", path.display());
        }
    }
}

/// Move an unreadable file aside, keep its name, and say so.
fn quarantine(app: &App, path: &Path, why: &str) {
    let dir = app.paths.spool_corrupt();
    let _ = nmem_proto::paths::ensure_private_dir(&dir);
    let dst = dir.join(path.file_name().unwrap_or_default());
    match std::fs::rename(path, &dst) {
        Ok(()) => {
            Stats::add(&app.stats.spool_corrupt, 1);
            app.stats.failure(
                "spool_corrupt",
                format!("spool file moved to {}: {why}", dst.display()),
            );
        }
        Err(e) => app.stats.error(format!(
            "cannot move corrupt spool file {}: {e}",
            path.display()
        )),
    }
}
