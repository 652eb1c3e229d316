//! `nmem rebuild` (docs/sync.md, "Rebuild"): regenerate the local projections from the event log:
//! this device's `sync_log` and the envelopes applied from others (`sync_inbound`).
//!
//! 1. In one transaction (a crash leaves everything as it was): every logged event whose rows
//!    are missing is stored again through the writer's `apply` (observations, prompts, thoughts,
//!    sessions, follow-ups; stored once: event ids are unique, so rows present are left as they
//!    are, with their pins and knowledge state), events a tombstone forgot excepted. Each row is
//!    stored under the id it had (the log keeps them, migration 017), so search, which walks its
//!    candidates and breaks ties by id, gives the same results in the same order as before;
//!    a row received from another device keeps its origin. The full-text indexes are emptied
//!    with their watermarks set to 0, and rows stored again under their old ids (below the
//!    embedding backfill's watermarks) are queued for their vectors (`embed_redo`).
//! 2. The full-text indexes are rebuilt from the rows in chunks (`store::fts::index_pending`,
//!    each chunk its own transaction: a crash midway is finished by the writer's ordinary
//!    catch-up).
//! 3. Vectors: rows stored again have none; the embedding backfill computes them.
//!
//! [`Progress`] says how far it is (`/v1/rebuild/progress`, the CLI's progress bar); the
//! daemon's log has a line every [`PROGRESS`] events.

use super::envelope::Envelope;
use super::log::ENABLED;
use crate::ingest::Record;
use crate::store::writer::{Placement, RowIds};
use nmem_proto::sync::{RebuildProgress, Rebuilt};
use rusqlite::{params, Connection, TransactionBehavior};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Log progress every this many events.
const PROGRESS: usize = 10_000;

/// The phases a rebuild goes through, in order.
const PHASES: [&str; 3] = ["reading", "restoring", "indexing"];

/// How far a running rebuild is: counters the writer moves and any request reads.
#[derive(Debug, Default)]
pub struct Progress {
    running: AtomicBool,
    phase: AtomicU8,
    done: AtomicU64,
    total: AtomicU64,
}

impl Progress {
    fn phase(&self, phase: u8, total: u64) {
        self.done.store(0, Ordering::Relaxed);
        self.total.store(total, Ordering::Relaxed);
        self.phase.store(phase, Ordering::Relaxed);
    }

    fn done(&self, n: u64) {
        self.done.store(n, Ordering::Relaxed);
    }

    pub fn read(&self) -> RebuildProgress {
        let running = self.running.load(Ordering::Relaxed);
        RebuildProgress {
            running,
            phase: if running {
                PHASES[usize::from(self.phase.load(Ordering::Relaxed)).min(PHASES.len() - 1)]
                    .to_string()
            } else {
                String::new()
            },
            done: self.done.load(Ordering::Relaxed),
            total: self.total.load(Ordering::Relaxed),
        }
    }
}

/// Marks a rebuild running until dropped (an error included).
struct Running<'a>(&'a Progress);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.running.store(false, Ordering::Relaxed);
    }
}

/// One logged event: its envelope, the ids its rows had, and the device it came from (`None`:
/// this device's own).
struct Logged {
    event_id: String,
    envelope: Vec<u8>,
    ids: RowIds,
    device: Option<String>,
}

/// Steps 1 and 2 on the write connection.
pub fn run(conn: &mut Connection, progress: &Progress) -> rusqlite::Result<Rebuilt> {
    progress.phase(0, 0);
    progress.running.store(true, Ordering::Relaxed);
    let _running = Running(progress);
    let mut out = Rebuilt {
        sync_enabled: ENABLED.load(Ordering::Relaxed),
        ..Default::default()
    };
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let read = |sql: &str| -> rusqlite::Result<Vec<Logged>> {
            let mut st = tx.prepare(sql)?;
            let rows = st.query_map([], |r| {
                Ok(Logged {
                    event_id: r.get(0)?,
                    envelope: r.get(1)?,
                    ids: RowIds::from_columns(r.get(2)?, r.get(3)?),
                    device: r.get(4)?,
                })
            })?;
            rows.collect()
        };
        let mut logged = read(
            "SELECT event_id, envelope, row_id, thought_ids, NULL FROM sync_log
             WHERE length(envelope) > 0 ORDER BY seq",
        )?;
        logged.extend(read(
            "SELECT event_id, envelope, row_id, thought_ids, device FROM sync_inbound
             ORDER BY device, seq",
        )?);
        let total = logged.len();
        progress.phase(1, total as u64);
        for (i, l) in logged.into_iter().enumerate() {
            if i > 0 && i % PROGRESS == 0 {
                tracing::info!("rebuild: {i} of {total} logged events read");
            }
            progress.done(i as u64);
            if restore(&tx, l, &mut out)? {
                out.restored += 1;
            }
        }
        progress.done(total as u64);
        tx.execute_batch(
            "INSERT INTO observations_fts(observations_fts) VALUES ('delete-all');
             INSERT INTO prompts_fts(prompts_fts) VALUES ('delete-all');
             UPDATE fts_state SET observations_upto = 0, prompts_upto = 0;",
        )?;
    }
    tx.commit()?;
    tracing::info!(
        "rebuild: {} logged events, {} stored again; re-indexing",
        out.events,
        out.restored
    );
    let rows: i64 = conn.query_row(
        "SELECT (SELECT COUNT(*) FROM observations) + (SELECT COUNT(*) FROM prompts)",
        [],
        |r| r.get(0),
    )?;
    progress.phase(2, rows as u64);
    loop {
        let n = crate::store::fts::index_pending(conn)?;
        if n == 0 {
            break;
        }
        out.indexed += n;
        progress.done(out.indexed);
    }
    Ok(out)
}

/// Store one logged event's rows again if they are missing, under the ids they had (those still
/// free) and with their origin. Returns whether it stored anything.
fn restore(tx: &Connection, l: Logged, out: &mut Rebuilt) -> rusqlite::Result<bool> {
    let Ok(env) = Envelope::from_bytes(&l.envelope) else {
        out.unreadable += 1;
        return Ok(false);
    };
    // Tombstones and knowledge events store no row of their own.
    if !env.is_record() {
        return Ok(false);
    }
    out.events += 1;
    if super::tombstone::is_forgotten(tx, &env.event_id)? {
        return Ok(false);
    }
    let Ok(ev) = env.into_prepared() else {
        out.unreadable += 1;
        return Ok(false);
    };
    let origin = match &l.device {
        Some(d) => super::log::source_of_device(tx, d)?,
        None => None,
    };
    let mut place = Placement {
        origin,
        restore: Some(l.ids.clone()),
        ..Placement::default()
    };
    if !crate::store::writer::apply_inbound(tx, &ev, &mut place)? {
        return Ok(false);
    }
    // Rows under their old ids lie below the embedding backfill's watermarks: queue them.
    let record_kind = match ev.record {
        Record::Prompt(_) => 1,
        _ => 0,
    };
    let old = |had: Option<i64>, got: Option<i64>| got.filter(|g| had == Some(*g));
    let mut queue =
        tx.prepare_cached("INSERT OR IGNORE INTO embed_redo (kind, id) VALUES (?1, ?2)")?;
    if let Some(id) = old(l.ids.record, place.ids.record) {
        queue.execute(params![record_kind, id])?;
    }
    for (i, got) in place.ids.thoughts.iter().enumerate() {
        if let Some(id) = old(l.ids.thoughts.get(i).copied().flatten(), *got) {
            queue.execute(params![1, id])?;
        }
    }
    // Ids the log did not have (events logged before migration 017, or an id taken): keep the
    // new ones, so the next rebuild keeps them; rows that were present keep theirs.
    let keep = RowIds {
        record: place.ids.record.or(l.ids.record),
        thoughts: (0..place.ids.thoughts.len().max(l.ids.thoughts.len()))
            .map(|i| {
                let got = place.ids.thoughts.get(i).copied().flatten();
                got.or(l.ids.thoughts.get(i).copied().flatten())
            })
            .collect(),
    };
    if keep != l.ids {
        let table = if l.device.is_some() {
            "sync_inbound"
        } else {
            "sync_log"
        };
        tx.prepare_cached(&format!(
            "UPDATE {table} SET row_id = ?2, thought_ids = ?3 WHERE event_id = ?1"
        ))?
        .execute(params![l.event_id, keep.record, keep.thoughts_json()])?;
    }
    Ok(true)
}
