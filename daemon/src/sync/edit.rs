//! Edits of stored events across devices (docs/sync.md, "Edits"): a pin or unpin of an
//! observation, and a row rewritten by `nmemctl redact --apply`, each an event of its own
//! ([`Edit`]) in the streams of the spaces that carry the event: the personal one (unless its
//! project is excluded) and each team space this device shared the event with.
//!
//! * A pin names the event; receivers set the row's pin, so the last pin in a stream wins.
//! * A rewrite carries the whole event again as the current redaction rules leave it (the same
//!   event id). A receiver rewrites its row (or stores the event, if it never got it: its old
//!   ciphertext may be gone already) and keeps the new envelope for `nmem rebuild`. The old
//!   envelope is emptied from every log here and its ciphertext nulled on the server by its
//!   owner, who also passes the rewrite on to the team spaces it shared the event with. What has
//!   no envelope of its own (a thought's row) is forgotten by a tombstone instead.
//!
//! A team space's edit applies only to events that came from the device that sent it.
//!
//! Knowledge items (docs/sync.md, "Knowledge items") are rewritten the same way: `redact
//! --apply` changing an item's text sends the whole item again ([`items_rewritten`]); a
//! receiver holding the item takes the new text ([`apply_knowledge`]). Either side empties the
//! events that carried the old text from its logs ([`retire_items`]): their owner nulls their
//! ciphertext on the server, as for a forget.

use super::envelope::{Edit, Envelope, KnowledgeEvent, KnowledgeItem};
use super::log::{self, Stream};
use crate::ingest::{Prepared, Record};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::Ordering;

/// Log `edit` of the event `event_id` of `project`: to the personal stream unless the project
/// is excluded, and to each team stream of this device that carried the event (`teams`, read
/// before the event's rows there were emptied).
fn append(
    conn: &Connection,
    project: &str,
    edit: Edit,
    teams: impl IntoIterator<Item = Stream>,
    personal: bool,
) -> rusqlite::Result<()> {
    let id = log::random_id("edit")?;
    let bytes = Envelope::edit(id.clone(), project, edit).to_bytes();
    if personal && log::carries_personal(project) {
        log::append_to(conn, &Stream::Personal, &id, &bytes)?;
    }
    for stream in teams {
        log::append_to(conn, &stream, &id, &bytes)?;
    }
    Ok(())
}

/// The observation `id` was pinned or unpinned here: log it (in the caller's transaction).
pub fn pinned(conn: &Connection, id: i64, pinned: bool) -> rusqlite::Result<()> {
    if !log::ENABLED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some((project, event_id)) = conn
        .query_row(
            "SELECT project, event_id FROM observations WHERE id = ?1 AND event_id IS NOT NULL",
            [id],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
        )
        .optional()?
    else {
        return Ok(());
    };
    let teams = super::tombstone::shared(conn, &[event_id.as_str()])?.into_keys();
    let edit = Edit::Pin {
        target: event_id,
        pinned,
    };
    append(conn, &project, edit, teams, true)
}

/// The envelope an event was logged or received in here, if this home has it.
fn envelope_of(conn: &Connection, event_id: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    for sql in [
        "SELECT envelope FROM sync_log WHERE event_id = ?1 AND length(envelope) > 0",
        "SELECT envelope FROM sync_space_log WHERE event_id = ?1 AND length(envelope) > 0
         LIMIT 1",
        "SELECT envelope FROM sync_inbound WHERE event_id = ?1",
    ] {
        if let Some(e) = conn
            .prepare_cached(sql)?
            .query_row([event_id], |r| r.get::<_, Vec<u8>>(0))
            .optional()?
        {
            return Ok(Some(e));
        }
    }
    Ok(None)
}

/// `redact --apply` rewrote the rows of `events` (project, event id) here, in the caller's
/// transaction: each event whose envelope this home has is logged as a rewrite (the envelope
/// passed through `redactor`, as the rows were), and its old envelope emptied everywhere here
/// (its ciphertext to be nulled by its owner). Returns the events that cannot be rewritten
/// elsewhere (no envelope of their own): the caller forgets those with a tombstone.
pub fn rewritten(
    conn: &Connection,
    redactor: &crate::redact::Redactor,
    events: &[(String, String)],
) -> rusqlite::Result<Vec<(String, String)>> {
    let mut rest = Vec::new();
    for (project, id) in events {
        let ev = envelope_of(conn, id)?
            .and_then(|b| Envelope::from_bytes(&b).ok())
            .filter(Envelope::is_record)
            .and_then(|e| e.into_prepared().ok())
            .and_then(|mut ev| redactor.apply(&mut ev).then_some(ev));
        let Some(new) = ev.as_ref().and_then(Envelope::of) else {
            rest.push((project.clone(), id.clone()));
            continue;
        };
        replace(conn, id, &new, None)?;
    }
    Ok(rest)
}

/// Event `id` has the new envelope `new` here: keep it for `nmem rebuild` in place of the old
/// one, empty the old one from this device's logs (an owner nulls it on the server), and log
/// the rewrite for the spaces that carry it. `from` is the (device, seq) it came from, when
/// received; received, it is passed on to team spaces only (the personal one had it).
fn replace(
    conn: &Connection,
    id: &str,
    new: &Envelope,
    from: Option<(&str, i64)>,
) -> rusqlite::Result<()> {
    let bytes = new.to_bytes();
    let kept = conn
        .prepare_cached("UPDATE sync_inbound SET envelope = ?2 WHERE event_id = ?1")?
        .execute(params![id, bytes])?;
    if let (0, Some((device, seq))) = (kept, from) {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO sync_inbound (event_id, device, seq, envelope)
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![id, device, seq, bytes])?;
    }
    let teams = super::tombstone::shared(conn, &[id])?.into_keys();
    super::tombstone::forget_in_log(conn, &[id])?;
    if !log::ENABLED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let edit = Edit::Rewrite {
        envelope: Box::new(new.clone()),
    };
    append(conn, &new.project.name, edit, teams, from.is_none())
}

/// An edit received from `device` (at `seq`), in the pull's transaction. `rewrite` is the
/// rewritten event of an [`Edit::Rewrite`], already through this device's redactor (None when
/// the redactor keeps nothing of it). With `team`, only events that came from `device` change.
pub fn apply(
    conn: &Connection,
    edit: &Edit,
    rewrite: Option<&Prepared>,
    device: &str,
    seq: i64,
    team: bool,
) -> rusqlite::Result<()> {
    let allowed =
        |id: &str| -> rusqlite::Result<bool> { Ok(!team || came_from(conn, id, device)?) };
    match edit {
        Edit::Pin { target, pinned } => {
            if allowed(target)? {
                conn.prepare_cached(
                    "UPDATE observations SET is_pinned = ?2 WHERE event_id = ?1 AND is_pinned <> ?2",
                )?
                .execute(params![target, *pinned as i64])?;
            }
        }
        Edit::Rewrite { envelope } => {
            let id = envelope.event_id.as_str();
            if super::tombstone::is_forgotten(conn, id)? || !allowed(id)? {
                return Ok(());
            }
            let Some(ev) = rewrite else {
                return Ok(());
            };
            if !rewrite_rows(conn, ev)? {
                // Never received (its old ciphertext may be gone already): stored as it is now,
                // with the origin of the device that sent the rewrite.
                let mut place = crate::store::writer::Placement {
                    origin: super::log::source_of_device(conn, device)?,
                    ..Default::default()
                };
                crate::store::writer::apply_inbound(conn, ev, &mut place)?;
            }
            let Some(new) = Envelope::of(ev) else {
                return Ok(());
            };
            replace(conn, id, &new, Some((device, seq)))?;
        }
    }
    Ok(())
}

/// Rewrite the stored row of `ev` (and its thoughts' rows) with its text; false when the row is
/// not here.
fn rewrite_rows(conn: &Connection, ev: &Prepared) -> rusqlite::Result<bool> {
    let n = match &ev.record {
        Record::Observation(o) => {
            let metadata = (!o.metadata.is_empty())
                .then(|| serde_json::Value::Object(o.metadata.clone()).to_string());
            conn.prepare_cached(
                "UPDATE observations SET content = ?2, file_path = ?3, rel_path = ?4,
                        metadata = ?5, redacted = 1 WHERE event_id = ?1",
            )?
            .execute(params![
                ev.event_id,
                o.content,
                o.file_path,
                o.rel_path,
                metadata
            ])?
        }
        Record::Prompt(p) => conn
            .prepare_cached("UPDATE prompts SET content = ?2, redacted = 1 WHERE event_id = ?1")?
            .execute(params![ev.event_id, p.content])?,
        Record::Nothing => 0,
    };
    let mut thoughts =
        conn.prepare_cached("UPDATE prompts SET content = ?2 WHERE event_id = ?1")?;
    for t in &ev.thoughts {
        thoughts.execute(params![t.uid, t.content])?;
    }
    Ok(n > 0)
}

/// Whether the event (or knowledge item, by its uid) `id` came here from `device`.
pub(super) fn came_from(conn: &Connection, id: &str, device: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sync_origin WHERE event_id = ?1 AND device = ?2")?
        .exists(params![id, device])
}

/// The knowledge events in this home's logs (its own streams, and what it received) that carry
/// one of the items `uids` as written (made, or written again by a rewrite): (event id, uid).
/// Knowledge events are named `knowledge-…`: a range of each table's event id index.
fn item_events(conn: &Connection, uids: &[&str]) -> rusqlite::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for table in ["sync_log", "sync_space_log", "sync_inbound"] {
        let mut st = conn.prepare_cached(&format!(
            "SELECT event_id, envelope FROM {table}
              WHERE event_id >= 'knowledge-' AND event_id < 'knowledge.' AND length(envelope) > 0"
        ))?;
        let rows = st.query_map([], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (id, env) = row?;
            let Ok(env) = Envelope::from_bytes(&env) else {
                continue;
            };
            if let Some(KnowledgeEvent::Item(it)) = &env.knowledge {
                if uids.contains(&it.uid.as_str()) && seen.insert(id.clone()) {
                    out.push((id, it.uid.clone()));
                }
            }
        }
    }
    Ok(out)
}

/// The items `uids` were written again, or forgotten, here: the earlier events carrying them are
/// emptied from this device's logs (an owner nulls their ciphertext on the server) and dropped
/// from what it received. Returns this device's team streams that carried any of them, each
/// with those items as (project, uid).
pub(super) fn retire_items(
    conn: &Connection,
    uids: &[&str],
) -> rusqlite::Result<BTreeMap<Stream, Vec<(String, String)>>> {
    let events = item_events(conn, uids)?;
    let ids: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    let uid_of: HashMap<&str, &str> = events
        .iter()
        .map(|(e, u)| (e.as_str(), u.as_str()))
        .collect();
    let mut teams: BTreeMap<Stream, Vec<(String, String)>> = BTreeMap::new();
    for (stream, evs) in super::tombstone::shared(conn, &ids)? {
        let list = teams.entry(stream).or_default();
        for (project, id) in evs {
            let uid = uid_of[id.as_str()].to_string();
            if !list.iter().any(|(_, u)| *u == uid) {
                list.push((project, uid));
            }
        }
    }
    super::tombstone::forget_in_log(conn, &ids)?;
    let mut del = conn.prepare_cached("DELETE FROM sync_inbound WHERE event_id = ?1")?;
    for id in &ids {
        del.execute([id])?;
    }
    Ok(teams)
}

/// `redact --apply` rewrote the text of the knowledge items `ids` here, in the caller's
/// transaction: the events that carried their old text are emptied here (one pass over the
/// knowledge events for all of them), and each synced item is logged again as it is now (for
/// the spaces its project goes to).
pub fn items_rewritten(conn: &Connection, ids: &[i64]) -> rusqlite::Result<()> {
    let mut synced = Vec::new();
    for id in ids {
        if let Some((_, item)) = crate::knowledge::item_of(conn, *id)? {
            synced.push((*id, item.uid));
        }
    }
    if synced.is_empty() {
        return Ok(());
    }
    let uids: Vec<&str> = synced.iter().map(|(_, u)| u.as_str()).collect();
    retire_items(conn, &uids)?;
    for (id, _) in &synced {
        crate::knowledge::log_item(conn, *id)?;
    }
    Ok(())
}

fn same_text(a: &KnowledgeItem, b: &KnowledgeItem) -> bool {
    (
        &a.title, &a.summary, &a.reason, &a.subject, &a.value, &a.payload,
    ) == (
        &b.title, &b.summary, &b.reason, &b.subject, &b.value, &b.payload,
    )
}

/// Whether applying `events` would rewrite the text of an item held here (the pull scrubs such
/// a batch, as one that forgets).
pub fn rewrites_items(conn: &Connection, events: &[(i64, log::Inbound)]) -> rusqlite::Result<bool> {
    for (_, e) in events {
        let log::Inbound::Knowledge(env) = e else {
            continue;
        };
        let Some(KnowledgeEvent::Item(it)) = &env.knowledge else {
            continue;
        };
        if let Some(id) = crate::knowledge::resolve(conn, &it.uid)? {
            if crate::knowledge::item_of(conn, id)?.is_some_and(|(_, have)| !same_text(&have, it)) {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// A knowledge event received from `device` (at `seq`), in the pull's transaction. An item not
/// held here is stored, and noted as coming from `device` (`sync_origin`, by its uid: a team's
/// tombstone of it is honoured only from there). An item held here received with other text is
/// a rewrite (`redact --apply` where it was sent): its text changes, the events of its old text
/// are emptied here ([`retire_items`]) and it is passed on to this device's team streams that
/// carried it. A team space's rewrite applies only to an item that came from `device`.
pub fn apply_knowledge(
    conn: &Connection,
    env: &Envelope,
    device: &str,
    seq: i64,
    team: bool,
) -> rusqlite::Result<()> {
    let k = env.knowledge.as_ref().expect("a knowledge event");
    let project = &env.project.name;
    let now = nmem_proto::now_ms();
    let KnowledgeEvent::Item(it) = k else {
        crate::knowledge::apply_event(conn, project, k, now)?;
        return Ok(());
    };
    let Some(id) = crate::knowledge::resolve(conn, &it.uid)? else {
        if crate::knowledge::apply_event(conn, project, k, now)? {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO sync_origin (event_id, device, seq) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![it.uid, device, seq])?;
        }
        return Ok(());
    };
    if team && !came_from(conn, &it.uid, device)? {
        return Ok(());
    }
    if !crate::knowledge::rewrite_text(conn, id, it, now)? {
        return Ok(());
    }
    let teams = retire_items(conn, &[it.uid.as_str()])?;
    if !log::ENABLED.load(Ordering::Relaxed) {
        return Ok(());
    }
    for stream in teams.into_keys() {
        let id = log::random_id("knowledge")?;
        let bytes = Envelope::knowledge(id.clone(), project, k.clone()).to_bytes();
        log::append_to(conn, &stream, &id, &bytes)?;
    }
    Ok(())
}
