//! `nmem rebuild` (docs/sync.md, "Rebuild"): regenerate the local projections from the event log:
//! this device's `sync_log` and the envelopes applied from others (`sync_inbound`).
//!
//! 1. In one transaction (a crash leaves everything as it was): every logged event whose rows
//!    are missing is stored again through the writer's `apply` (observations, prompts, thoughts,
//!    sessions, follow-ups; stored once: event ids are unique, so rows present are left as they
//!    are, with their pins and knowledge state), events a tombstone forgot excepted; and the
//!    full-text indexes are emptied with their watermarks set to 0.
//! 2. The full-text indexes are rebuilt from the rows in chunks (`store::fts::index_all`, each
//!    chunk its own transaction: a crash midway is finished by the writer's ordinary catch-up).
//! 3. Vectors: rows stored again have none; the embedding backfill computes them.
//!
//! Progress goes to the daemon's log every [`PROGRESS`] events.

use super::envelope::Envelope;
use super::log::ENABLED;
use nmem_proto::sync::Rebuilt;
use rusqlite::{Connection, TransactionBehavior};

/// Log progress every this many events.
const PROGRESS: usize = 10_000;

/// Steps 1 and 2 on the write connection.
pub fn run(conn: &mut Connection) -> rusqlite::Result<Rebuilt> {
    let mut out = Rebuilt {
        sync_enabled: ENABLED.load(std::sync::atomic::Ordering::Relaxed),
        ..Default::default()
    };
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    {
        let mut envelopes: Vec<Vec<u8>> = tx
            .prepare("SELECT envelope FROM sync_log WHERE length(envelope) > 0 ORDER BY seq")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let inbound: Vec<Vec<u8>> = tx
            .prepare("SELECT envelope FROM sync_inbound ORDER BY device, seq")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        envelopes.extend(inbound);
        let total = envelopes.len();
        for (i, bytes) in envelopes.into_iter().enumerate() {
            if i > 0 && i % PROGRESS == 0 {
                tracing::info!("rebuild: {i} of {total} logged events read");
            }
            let Ok(env) = Envelope::from_bytes(&bytes) else {
                out.unreadable += 1;
                continue;
            };
            // Tombstones and knowledge events store no row of their own.
            if !env.is_record() {
                continue;
            }
            out.events += 1;
            if super::tombstone::is_forgotten(&tx, &env.event_id)? {
                continue;
            }
            let Ok(ev) = env.into_prepared() else {
                out.unreadable += 1;
                continue;
            };
            if crate::store::writer::apply_inbound(&tx, &ev)? {
                out.restored += 1;
            }
        }
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
    out.indexed = crate::store::fts::index_all(conn)?;
    Ok(out)
}
