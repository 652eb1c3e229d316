//! The local side of sync: this home's sync identity (`sync_state`), the outbound log the writer
//! appends to (`sync_log`), the pull cursors (`sync_cursors`) and where inbound events came
//! from (`sync_origin`). Every function takes the write connection (the single writer).

use super::crypto::SpaceKey;
use super::envelope::Envelope;
use crate::ingest::Prepared;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the writer logs events: set from `sync_state` when nmemd opens the database and by
/// `enable`/`join`/`disable`. A flag, so a home without sync pays one load per event.
pub static ENABLED: AtomicBool = AtomicBool::new(false);

/// The writer's hook: log a stored event's envelope, in the event's own transaction, under the
/// next sequence number (dense: the writer is the only one appending).
pub fn append(conn: &Connection, ev: &Prepared) -> rusqlite::Result<()> {
    if !ENABLED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some(env) = Envelope::of(ev) else {
        return Ok(());
    };
    append_envelope(conn, &ev.event_id, &env.to_bytes())
}

/// Log an envelope under the next sequence number (events, tombstones, released quarantine).
pub fn append_envelope(conn: &Connection, event_id: &str, envelope: &[u8]) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT INTO sync_log (seq, event_id, created_at, envelope)
         SELECT COALESCE(MAX(seq), 0) + 1, ?1, ?2, ?3 FROM sync_log",
    )?
    .execute(params![event_id, nmem_proto::now_ms(), envelope])?;
    Ok(())
}

/// This home's sync identity.
#[derive(Debug, Clone)]
pub struct State {
    pub enabled: bool,
    pub device: String,
    pub space: String,
    pub key_id: String,
    pub key: SpaceKey,
    pub url: Option<String>,
    pub cloned: bool,
}

pub fn load(conn: &Connection) -> rusqlite::Result<Option<State>> {
    conn.query_row(
        "SELECT enabled, device, space, key_id, space_key, url, cloned FROM sync_state WHERE id = 1",
        [],
        |r| {
            let key: Vec<u8> = r.get(4)?;
            Ok(State {
                enabled: r.get(0)?,
                device: r.get(1)?,
                space: r.get(2)?,
                key_id: r.get(3)?,
                key: SpaceKey::from_slice(&key).map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(
                        4,
                        rusqlite::types::Type::Blob,
                        Box::new(e),
                    )
                })?,
                url: r.get(5)?,
                cloned: r.get(6)?,
            })
        },
    )
    .optional()
}

/// Start syncing `key`'s space as the new device `device`: a fresh identity, an empty log and
/// no cursors (the sequence numbers of a previous identity mean nothing under the new one).
pub fn start(
    conn: &mut Connection,
    device: &str,
    key: &SpaceKey,
    url: Option<&str>,
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch("DELETE FROM sync_log; DELETE FROM sync_cursors;")?;
    tx.execute(
        "INSERT OR REPLACE INTO sync_state
           (id, enabled, device, space, key_id, space_key, url, cloned, created_at)
         VALUES (1, 1, ?1, ?2, ?3, ?4, ?5, 0, ?6)",
        params![
            device,
            key.space_id(),
            key.key_id(),
            &key.0[..],
            url,
            nmem_proto::now_ms()
        ],
    )?;
    tx.commit()?;
    ENABLED.store(true, Ordering::Relaxed);
    Ok(())
}

pub fn set_enabled(conn: &Connection, on: bool) -> rusqlite::Result<()> {
    conn.execute("UPDATE sync_state SET enabled = ?1 WHERE id = 1", [on])?;
    ENABLED.store(on, Ordering::Relaxed);
    Ok(())
}

pub fn set_cloned(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute("UPDATE sync_state SET cloned = 1 WHERE id = 1", [])?;
    Ok(())
}

/// This device's last sequence number (0: nothing logged).
pub fn local_seq(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row("SELECT COALESCE(MAX(seq), 0) FROM sync_log", [], |r| {
        r.get(0)
    })
}

/// A logged event: its sequence number, local event id and envelope.
pub type Logged = (i64, String, Vec<u8>);

/// Up to `limit` logged events after `after`, in order.
pub fn outbox(conn: &Connection, after: i64, limit: usize) -> rusqlite::Result<Vec<Logged>> {
    let mut st = conn.prepare_cached(
        "SELECT seq, event_id, envelope FROM sync_log WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
    let rows = st.query_map(params![after, limit as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    rows.collect()
}

/// The local event id logged under `seq`.
pub fn event_at(conn: &Connection, seq: i64) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT event_id FROM sync_log WHERE seq = ?1", [seq], |r| {
        r.get(0)
    })
    .optional()
}

pub fn cursors(conn: &Connection, space: &str) -> rusqlite::Result<HashMap<String, i64>> {
    let mut st = conn.prepare_cached("SELECT device, seq FROM sync_cursors WHERE space = ?1")?;
    let rows = st.query_map([space], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// What a pull applies: an event, or a tombstone (its own id, the ids it forgets, why).
pub enum Inbound {
    Event(Prepared),
    Tombstone(Envelope),
}

/// Store events pulled from `device` (in sequence order) and move its cursor to `through`, in
/// one transaction: a crash before the commit leaves both as they were, and the next pull
/// fetches the same events again (stored once: event ids are unique). Each applied envelope is
/// kept in `sync_inbound` (for `nmem rebuild`); an event a tombstone forgot is not stored again.
pub fn apply_inbound(
    conn: &mut Connection,
    space: &str,
    device: &str,
    events: &[(i64, Inbound)],
    through: i64,
) -> rusqlite::Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut stored = 0;
    for (seq, item) in events {
        let (event_id, envelope) = match item {
            Inbound::Event(ev) => {
                if super::tombstone::is_forgotten(&tx, &ev.event_id)? {
                    continue;
                }
                if crate::store::writer::apply_inbound(&tx, ev)? {
                    stored += 1;
                }
                let Some(env) = Envelope::of(ev) else {
                    continue;
                };
                (ev.event_id.as_str(), env.to_bytes())
            }
            Inbound::Tombstone(env) => {
                let t = env.tombstone.as_ref().expect("a tombstone");
                super::tombstone::forget_here(&tx, &t.forget, &t.reason)?;
                (env.event_id.as_str(), env.to_bytes())
            }
        };
        tx.prepare_cached(
            "INSERT OR IGNORE INTO sync_origin (event_id, device, seq) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![event_id, device, seq])?;
        tx.prepare_cached(
            "INSERT OR IGNORE INTO sync_inbound (event_id, device, seq, envelope)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![event_id, device, seq, envelope])?;
    }
    tx.execute(
        "INSERT INTO sync_cursors (space, device, seq) VALUES (?1, ?2, ?3)
         ON CONFLICT(space, device) DO UPDATE SET seq = MAX(seq, excluded.seq)",
        params![space, device, through],
    )?;
    tx.commit()?;
    Ok(stored)
}
