//! Draining the spool: events that hooks wrote while the daemon was away.
//!
//! At start and whenever the writer is idle. A pass ([`drain`]) first renames the hooks' log
//! aside and seals it (`nmem_proto::spool::rename_aside`, `seal`: its lock taken once to wait out
//! an append in progress, then made read-only, so a hook that still holds the old name reopens
//! `events.log`), then takes every sealed log's records and every `*.event` file (older hooks,
//! and the hook's fallback) together, in receive order. A file is deleted once its event is
//! committed (or found to be a duplicate, or to store nothing); a sealed log is deleted once
//! the pass has gone through all of it: every record committed, found stored, quarantined,
//! dropped by the bounds, or, if its commit failed, spilled to a file of its own to be retried.
//! A crash or a shutdown mid-pass leaves the log to be read again at the next pass, harmlessly:
//! the event id is unique in the database.
//!
//! Nothing unreadable blocks the rest: a file that cannot be read or parsed is moved to
//! `spool/corrupt/`; a log record whose checksum fails, a garbled stretch or a torn tail (a hook
//! killed mid-write) is copied there (`<received_at>-<log>-<offset>.event` for a whole record
//! whose header is bad, `<log>-<offset>.garbled` otherwise) and the scan goes on at the next
//! record. Each counts in `spool_corrupt`.
//!
//! The folder is not trusted: only regular files of this user are read
//! (`nmem_proto::spool::read`, `open_checked`), files within `[spool] max_bytes`; a symlink,
//! FIFO, device or oversized file, and a log that is any of these, is quarantined without being
//! read. Reading and preparing (which may tail a transcript) run on a blocking thread, so the
//! drain never holds an async worker and shutdown is never stuck behind it.

use crate::app::App;
use crate::ingest::{Prepared, RawEvent};
use crate::stats::Stats;
use nmem_proto::spool::{self, Frame};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Events handed to the writer at once; their acknowledgements are awaited together, so one
/// group commit covers many.
const CHUNK: usize = 512;
/// How long a pass waits for a log's lock (a hook holds it for one `write`); a log still locked
/// after that is left for the next pass.
const SEAL_WAIT: Duration = Duration::from_secs(2);

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

/// Where a spooled event is.
enum Src {
    File(PathBuf),
    /// A record of `Backlog::logs[log]`.
    Record {
        log: usize,
        frame: Frame,
    },
}

struct Item {
    received_at: Option<i64>,
    src: Src,
}

/// A sealed log this pass drains.
struct Log {
    path: PathBuf,
    file: std::fs::File,
}

/// What one pass drains: events oldest first, and the sealed logs holding some of them.
struct Backlog {
    items: Vec<Item>,
    logs: Vec<Log>,
}

/// One pass over the spool. Returns how many events were committed or found already stored.
pub async fn drain(app: &Arc<App>, shutdown: &watch::Receiver<bool>) -> std::io::Result<u64> {
    let backlog = {
        let app = app.clone();
        tokio::task::spawn_blocking(move || collect(&app))
            .await
            .map_err(std::io::Error::other)??
    };
    let backlog = Arc::new(backlog);
    if !backlog.items.is_empty() {
        tracing::info!(backlog = backlog.items.len(), "draining the spool");
    }
    let mut done = 0;
    // Records whose commit failed: spilled to files at the end of the pass.
    let mut failed = Vec::new();
    let indices: Vec<usize> = (0..backlog.items.len()).collect();
    for chunk in indices.chunks(CHUNK) {
        if *shutdown.borrow() {
            return Ok(done); // the logs stay, read again next time
        }
        let mut pending = Vec::with_capacity(chunk.len());
        let loaded = {
            let (app, backlog) = (app.clone(), backlog.clone());
            let chunk = chunk.to_vec();
            tokio::task::spawn_blocking(move || {
                chunk
                    .into_iter()
                    .filter_map(|i| load(&app, &backlog, i).map(|p| (i, p)))
                    .collect::<Vec<_>>()
            })
            .await
            .map_err(std::io::Error::other)?
        };
        for (i, prepared) in loaded {
            match app.writer.enqueue_with_session(prepared).await {
                Ok((session, rx)) => pending.push((i, session, rx)),
                Err(_) => return Ok(done), // shutting down: the event stays for next time
            }
        }
        for (i, session, rx) in pending {
            match rx.await {
                Ok(Ok(_)) => {
                    resolve(&backlog, i);
                    done += 1;
                    Stats::add(&app.stats.spool_drained, 1);
                }
                // Not committed: a file stays and is retried on the next pass (a record is
                // spilled to one), and the transcript it read is read again then.
                Ok(Err(e)) => {
                    app.ingest.tailer.forget(&session);
                    app.stats.error(format!(
                        "spooled event {} not stored yet: {e}",
                        backlog.describe(i)
                    ));
                    failed.push(i);
                }
                Err(_) => return Ok(done),
            }
        }
    }
    let app = app.clone();
    tokio::task::spawn_blocking(move || finish(&app, &backlog, &failed))
        .await
        .map_err(std::io::Error::other)?;
    Ok(done)
}

/// Seal the hooks' log, list every spooled event (sealed logs' records and files) oldest first,
/// quarantine what cannot be read, and apply the bounds (on a blocking thread).
fn collect(app: &App) -> std::io::Result<Backlog> {
    let dir = &app.paths.spool;
    let max_bytes = app.config.spool.max_bytes;
    let now = nmem_proto::now_ms();
    spool::rename_aside(dir, now)?;
    let mut logs = Vec::new();
    let mut items = Vec::new();
    for path in spool::logs(dir)? {
        if path.file_name().is_some_and(|n| n == spool::LOG_NAME) {
            continue; // a hook began a new log since the rename: the next pass takes it
        }
        let file = match spool::seal(&path, SEAL_WAIT) {
            Ok(f) => f,
            Err(spool::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(spool::ReadError::Io(e)) => {
                tracing::warn!("spool log {} left for the next pass: {e}", path.display());
                continue;
            }
            Err(e) => {
                quarantine(app, &path, &e.to_string());
                continue;
            }
        };
        let size = file.metadata()?.len();
        let log = logs.len();
        for frame in spool::scan(&file, size, true, max_bytes)? {
            match frame {
                Frame::Record {
                    header: Some(ref h),
                    ..
                } => items.push(Item {
                    received_at: Some(h.received_at),
                    src: Src::Record { log, frame },
                }),
                Frame::Record { .. } => quarantine_frame(
                    app,
                    &path,
                    &file,
                    &frame,
                    "its header line is not a spool header",
                ),
                Frame::Garbled { .. } => quarantine_frame(
                    app,
                    &path,
                    &file,
                    &frame,
                    "no whole record (garbled, or torn by a write that did not finish)",
                ),
            }
        }
        logs.push(Log { path, file });
    }
    // Each event with its size, for the bounds.
    let mut sized: Vec<(Item, u64)> = items
        .into_iter()
        .map(|item| {
            let (from, to) = match &item.src {
                Src::Record { frame, .. } => frame.span(),
                Src::File(_) => (0, 0),
            };
            (item, to - from)
        })
        .collect();
    for (path, len) in spool::list(dir)? {
        let received_at = spool::received_at_of(&path);
        sized.push((
            Item {
                received_at,
                src: Src::File(path),
            },
            len,
        ));
    }
    // Receive order (stable: files keep their names' order, records their log's).
    sized.sort_by_key(|(item, _)| item.received_at.unwrap_or(i64::MAX));
    let entries: Vec<(Option<i64>, u64)> = sized.iter().map(|(i, n)| (i.received_at, *n)).collect();
    let items: Vec<Item> = sized.into_iter().map(|(i, _)| i).collect();
    let max_age_ms = app.config.spool.max_age_days.saturating_mul(86_400_000) as i64;
    let dropped = spool::over_bounds(&entries, max_bytes, max_age_ms, now);
    let dropped_log = app.paths.spool_dropped_log();
    let backlog = Backlog { items, logs };
    for (i, why) in dropped.iter().enumerate() {
        let gone = match &backlog.items[i].src {
            Src::File(path) => std::fs::remove_file(path).is_ok(),
            // Gone with its log at the end of the pass.
            Src::Record { .. } => true,
        };
        if gone {
            spool::log_dropped(&dropped_log, &backlog.describe(i), entries[i].1, why);
        }
    }
    let mut backlog = backlog;
    backlog.items.drain(..dropped.len());
    Ok(backlog)
}

impl Backlog {
    /// An event's place, for messages: a file's path, or `<log>@<offset>`.
    fn describe(&self, i: usize) -> String {
        match &self.items[i].src {
            Src::File(path) => path.display().to_string(),
            Src::Record { log, frame } => {
                format!("{}@{}", self.logs[*log].path.display(), frame.span().0)
            }
        }
    }
}

/// Read and prepare one event (on a blocking thread). `None` when there is nothing to queue:
/// vanished, stored nothing (a file deleted), or refused (quarantined).
fn load(app: &App, backlog: &Backlog, i: usize) -> Option<Prepared> {
    let entry = match &backlog.items[i].src {
        Src::File(path) => match spool::read(path, app.config.spool.max_bytes) {
            Ok(e) => e,
            // Vanished meanwhile (another drain, or the bounds): nothing to do.
            Err(spool::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                return None
            }
            Err(e) => {
                quarantine(app, path, &e.to_string());
                return None;
            }
        },
        Src::Record { log, frame } => {
            let log = &backlog.logs[*log];
            match spool::read_record(&log.file, frame) {
                Ok(e) => e,
                Err(e) => {
                    quarantine_frame(app, &log.path, &log.file, frame, &e.to_string());
                    return None;
                }
            }
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
            quarantine_item(app, backlog, i, &why);
            return None;
        }
    };
    match app.ingest.prepare(&raw) {
        Ok(None) => {
            resolve(backlog, i);
            None
        }
        Ok(Some(prepared)) => Some(prepared),
        Err(e) => {
            quarantine_item(app, backlog, i, &e.to_string());
            None
        }
    }
}

/// The event is in the database (or stores nothing): a file goes now, a record with its log.
fn resolve(backlog: &Backlog, i: usize) {
    if let Src::File(path) = &backlog.items[i].src {
        remove(path);
    }
}

/// The end of a pass that went through every event: records whose commit failed are spilled to
/// files (retried on the next pass, as any file), then the sealed logs are deleted. A log with
/// a record that could not be spilled stays, read again next time.
fn finish(app: &App, backlog: &Backlog, failed: &[usize]) {
    let mut keep = vec![false; backlog.logs.len()];
    for &i in failed {
        let Src::Record { log, frame } = &backlog.items[i].src else {
            continue;
        };
        let spilled = spool::read_record(&backlog.logs[*log].file, frame)
            .map_err(|e| e.to_string())
            .and_then(|e| {
                spool::write(&app.paths.spool, &e.header, &e.payload).map_err(|e| e.to_string())
            });
        if let Err(e) = spilled {
            keep[*log] = true;
            app.stats.error(format!(
                "spooled event {} kept in its log: {e}",
                backlog.describe(i)
            ));
        }
    }
    for (log, keep) in backlog.logs.iter().zip(keep) {
        if !keep {
            remove(&log.path);
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

fn quarantine_item(app: &App, backlog: &Backlog, i: usize, why: &str) {
    match &backlog.items[i].src {
        Src::File(path) => quarantine(app, path, why),
        Src::Record { log, frame } => {
            let log = &backlog.logs[*log];
            quarantine_frame(app, &log.path, &log.file, frame, why)
        }
    }
}

/// Move an unreadable file (or log) aside, keep its name, and say so.
fn quarantine(app: &App, path: &Path, why: &str) {
    let dir = app.paths.spool_corrupt();
    let _ = nmem_proto::paths::ensure_private_dir(&dir);
    let dst = dir.join(path.file_name().unwrap_or_default());
    match std::fs::rename(path, &dst) {
        Ok(()) => quarantined(app, &dst, why),
        Err(e) => app.stats.error(format!(
            "cannot move corrupt spool file {}: {e}",
            path.display()
        )),
    }
}

/// Copy a bad stretch of a log, or a record the daemon cannot take, into the corrupt folder
/// (at most `[spool] max_bytes` of it). A whole record keeps the file format (its header line
/// and payload: `POST /api/ops/retry-failed` can put it back as a spool file); anything else is
/// `<log>-<offset>.garbled`. The name depends only on the place, so a log read again after a
/// crash writes the same file again.
fn quarantine_frame(app: &App, log: &Path, file: &std::fs::File, frame: &Frame, why: &str) {
    let stem = log
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let (name, from, to) = match frame {
        Frame::Record {
            offset,
            body_at,
            body_len,
            header,
            ..
        } => (
            format!(
                "{:013}-{stem}-{offset}.{}",
                header.as_ref().map_or(0, |h| h.received_at.max(0)),
                spool::EXTENSION
            ),
            *body_at,
            body_at + body_len,
        ),
        Frame::Garbled { offset, end } => (format!("{stem}-{offset}.garbled"), *offset, *end),
    };
    let dir = app.paths.spool_corrupt();
    let dst = dir.join(name);
    let copied = nmem_proto::paths::ensure_private_dir(&dir)
        .and_then(|_| spool::read_span(file, from, to, app.config.spool.max_bytes))
        .and_then(|bytes| {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .custom_flags(nmem_proto::paths::NOFOLLOW_FLAGS)
                .open(&dst)?
                .write_all(&bytes)
        });
    match copied {
        Ok(()) => quarantined(
            app,
            &dst,
            &format!("{} bytes of {}: {why}", to - from, log.display()),
        ),
        Err(e) => app.stats.error(format!(
            "cannot copy a corrupt spool record of {} to {}: {e}",
            log.display(),
            dst.display()
        )),
    }
}

fn quarantined(app: &App, dst: &Path, why: &str) {
    Stats::add(&app.stats.spool_corrupt, 1);
    app.stats.failure(
        "spool_corrupt",
        format!("spool file moved to {}: {why}", dst.display()),
    );
}
