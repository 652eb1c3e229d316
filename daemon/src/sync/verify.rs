//! `nmem sync verify` (docs/sync.md, "Verify"): compare every device's stream as the server holds
//! it with what this home holds of it, and say what differs.
//!
//! * This device's own stream: the log's events through the server's head for this device (the
//!   ones above it are pending, not missing) against every server row of this device.
//! * Another device's stream: the events applied here (`sync_origin`) through this home's cursor
//!   against the server's rows with ciphertext through the same cursor (a nulled row is a
//!   forgotten event: nothing to hold).
//!
//! Both sides are reduced to `seq:server event id` lines; their SHA-256 says at a glance whether
//! the two agree, and the sequence numbers on one side only (or holding different ids) say where.

use super::log::State;
use nmem_proto::sync::{StreamCheck, Verified};
use rusqlite::Connection;
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};

/// At most this many sequence numbers per list in the reply.
const SHOWN: usize = 100;

/// (device → (seq → server event id)) as this home holds it, with the bound (inclusive) it is
/// compared through: None for this device (bounded by the server's head, known only later).
type Local = BTreeMap<String, (Option<i64>, BTreeMap<i64, String>)>;

/// What this home holds of each stream.
pub fn local(conn: &Connection, st: &State) -> rusqlite::Result<Local> {
    let mut out = Local::new();
    let mut own = BTreeMap::new();
    let mut q = conn.prepare("SELECT seq, event_id FROM sync_log ORDER BY seq")?;
    for r in q.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))? {
        let (seq, id) = r?;
        own.insert(seq, st.key.server_event_id(&id));
    }
    out.insert(st.device.clone(), (None, own));
    for (device, cursor) in super::log::cursors(conn, &st.space)? {
        out.entry(device).or_default().0 = Some(cursor);
    }
    // The events of this user's other devices (in the personal space): a teammate's came
    // through a team space, whose streams are not the personal space's.
    let mut q = conn.prepare(
        "SELECT g.device, g.seq, g.event_id FROM sync_origin g
          WHERE g.device IN (SELECT device FROM sync_sources
                              WHERE kind = 'my-devices' AND space = ?1)",
    )?;
    for r in q.query_map([&st.space], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
        ))
    })? {
        let (device, seq, id) = r?;
        if device == st.device {
            continue;
        }
        out.entry(device)
            .or_default()
            .1
            .insert(seq, st.key.server_event_id(&id));
    }
    Ok(out)
}

fn digest(m: &BTreeMap<i64, String>) -> String {
    let mut h = sha2::Sha256::new();
    for (seq, id) in m {
        h.update(format!("{seq}:{id}\n").as_bytes());
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Compare: `server` is every row of the space as (device, seq, event id, has ciphertext).
pub fn compare(st: &State, server: &[(String, i64, String, bool)], local: Local) -> Verified {
    let mut by_device: BTreeMap<&str, Vec<&(String, i64, String, bool)>> = BTreeMap::new();
    for r in server {
        by_device.entry(r.0.as_str()).or_default().push(r);
    }
    let devices: BTreeSet<String> = by_device
        .keys()
        .map(|d| d.to_string())
        .chain(local.keys().cloned())
        .collect();
    let mut streams = Vec::new();
    for device in devices {
        let rows = by_device.get(device.as_str()).cloned().unwrap_or_default();
        let server_head = rows.iter().map(|r| r.1).max().unwrap_or(0);
        let (cursor, mine) = local.get(&device).cloned().unwrap_or_default();
        let this_device = device == st.device;
        let local_head = match cursor {
            _ if this_device => mine.keys().max().copied().unwrap_or(0),
            Some(c) => c,
            None => 0,
        };
        // Through what both sides should agree on.
        let bound = if this_device { server_head } else { local_head };
        let theirs: BTreeMap<i64, String> = rows
            .iter()
            .filter(|r| r.1 <= bound && (this_device || r.3))
            .map(|r| (r.1, r.2.clone()))
            .collect();
        let ours: BTreeMap<i64, String> = mine.into_iter().filter(|(s, _)| *s <= bound).collect();
        let missing_on_server: Vec<i64> = ours
            .keys()
            .filter(|s| !theirs.contains_key(s))
            .copied()
            .collect();
        let missing_here: Vec<i64> = theirs
            .keys()
            .filter(|s| !ours.contains_key(s))
            .copied()
            .collect();
        let different: Vec<i64> = ours
            .iter()
            .filter(|(s, id)| theirs.get(s).is_some_and(|t| t != *id))
            .map(|(s, _)| *s)
            .collect();
        let (server_hash, local_hash) = (digest(&theirs), digest(&ours));
        let ok = server_hash == local_hash
            && (!this_device || server_head <= local_head)
            && (this_device || server_head >= local_head);
        streams.push(StreamCheck {
            device,
            this_device,
            server_head,
            local_head,
            server_count: theirs.len() as i64,
            local_count: ours.len() as i64,
            server_hash,
            local_hash,
            missing_on_server: missing_on_server.into_iter().take(SHOWN).collect(),
            missing_here: missing_here.into_iter().take(SHOWN).collect(),
            different: different.into_iter().take(SHOWN).collect(),
            ok,
        });
    }
    Verified {
        ok: streams.iter().all(|s| s.ok),
        streams,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::crypto::SpaceKey;

    fn state() -> State {
        State {
            enabled: true,
            device: "me".into(),
            space: "s".into(),
            key_id: "k".into(),
            key: SpaceKey::from_slice(&[7u8; 32]).unwrap(),
            url: None,
            cloned: false,
        }
    }

    #[test]
    fn equal_streams_agree_and_a_deleted_row_is_named() {
        let st = state();
        let ids: BTreeMap<i64, String> = (1..=5)
            .map(|s| (s, st.key.server_event_id(&format!("e{s}"))))
            .collect();
        let mut local = Local::new();
        local.insert("me".into(), (None, ids.clone()));
        let server: Vec<_> = ids
            .iter()
            .map(|(s, id)| ("me".to_string(), *s, id.clone(), true))
            .collect();
        let v = compare(&st, &server, local.clone());
        assert!(v.ok, "{v:?}");
        // The server lost seq 3: named, and the hashes differ.
        let tampered: Vec<_> = server.iter().filter(|r| r.1 != 3).cloned().collect();
        let v = compare(&st, &tampered, local.clone());
        assert!(!v.ok);
        assert_eq!(v.streams[0].missing_on_server, vec![3]);
        assert_ne!(v.streams[0].server_hash, v.streams[0].local_hash);
        // Pending events above the server's head are not differences.
        let pending: Vec<_> = server.iter().filter(|r| r.1 <= 3).cloned().collect();
        assert!(compare(&st, &pending, local).ok);
    }

    #[test]
    fn another_devices_stream_is_compared_through_the_cursor_and_nulled_rows_skipped() {
        let st = state();
        let id = |s: i64| st.key.server_event_id(&format!("o{s}"));
        let mut local = Local::new();
        local.insert(
            "other".into(),
            (Some(3), [(1, id(1)), (3, id(3))].into_iter().collect()),
        );
        local.insert("me".into(), (None, BTreeMap::new()));
        let server = vec![
            ("other".to_string(), 1, id(1), true),
            ("other".to_string(), 2, id(2), false),
            ("other".to_string(), 3, id(3), true),
            ("other".to_string(), 4, id(4), true),
        ];
        let v = compare(&st, &server, local);
        assert!(v.ok, "{v:?}");
        assert_eq!(
            v.streams
                .iter()
                .find(|s| s.device == "other")
                .unwrap()
                .server_head,
            4
        );
    }
}
