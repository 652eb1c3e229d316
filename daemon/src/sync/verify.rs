//! `nmem sync verify` (docs/sync.md, "Verify"): compare every stream of every space this device
//! is in (the personal space and each team space) as the server holds it with what this home
//! holds of it, per (space, device), and say what differs.
//!
//! * This device's own stream of a space: the log's events through the server's head for this
//!   device (the ones above it are pending, not missing) against every server row of this
//!   device in that space.
//! * Another device's stream: the rows received from it through that space (`sync_received`,
//!   migration 021: a team space's with the server's event id as pulled, a personal space's
//!   with the local id, from which the space key derives the server's) through this home's
//!   cursor, against the server's rows through the same cursor. A row nulled on the server (a
//!   forgotten event) counts on neither side: there is nothing to hold.
//!
//! Both sides are reduced to `seq:server event id` lines; their SHA-256 says at a glance whether
//! the two agree, and the sequence numbers on one side only (or holding different ids) say where.
//! A team space's row received before migration 021 has no server id here: it is compared by
//! its presence (the server's id stands in for it).

use super::log::State;
use super::space::Space;
use nmem_proto::sync::{StreamCheck, Verified};
use rusqlite::Connection;
use sha2::Digest;
use std::collections::{BTreeMap, BTreeSet};

/// At most this many sequence numbers per list in the reply.
const SHOWN: usize = 100;

/// (device → (seq → server event id, None when not known)) of one space as this home holds it,
/// with the bound (inclusive) it is compared through: None for this device (bounded by the
/// server's head, known only later).
pub type Local = BTreeMap<String, (Option<i64>, BTreeMap<i64, Option<String>>)>;

/// What this home holds of each stream of `sp`.
pub fn local(conn: &Connection, st: &State, sp: &Space) -> rusqlite::Result<Local> {
    let mut out = Local::new();
    let mut own = BTreeMap::new();
    let mut q = conn.prepare(
        &sp.stream
            .sql("SELECT seq, event_id FROM {log} WHERE {rows} ORDER BY seq"),
    )?;
    for r in q.query_map([sp.stream.param()], |r| {
        Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?))
    })? {
        let (seq, id) = r?;
        own.insert(seq, Some(sp.server_id(&id)));
    }
    out.insert(st.device.clone(), (None, own));
    for (device, cursor) in super::log::cursors(conn, &sp.id)? {
        out.entry(device).or_default().0 = Some(cursor);
    }
    let mut q = conn.prepare(
        "SELECT s.device, r.seq, r.event_id, r.server_id
           FROM sync_received r JOIN sync_streams s ON s.id = r.stream WHERE s.space = ?1",
    )?;
    for r in q.query_map([&sp.id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, Option<String>>(2)?,
            r.get::<_, Option<String>>(3)?,
        ))
    })? {
        let (device, seq, id, server_id) = r?;
        if device == st.device {
            continue;
        }
        // The personal key derives a personal space's id from the local one; a team space's
        // row received before migration 021 has only the local id (compared by its presence).
        let server_id =
            server_id.or_else(|| id.filter(|_| sp.is_personal()).map(|id| sp.server_id(&id)));
        out.entry(device).or_default().1.insert(seq, server_id);
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

/// Compare the streams of `space`: `server` is every row of the space as (device, seq, event
/// id, has ciphertext); `me` is this device.
pub fn compare(
    me: &str,
    space: &str,
    server: &[(String, i64, String, bool)],
    local: Local,
) -> Vec<StreamCheck> {
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
        let this_device = device == me;
        let local_head = match cursor {
            _ if this_device => mine.keys().max().copied().unwrap_or(0),
            Some(c) => c,
            None => 0,
        };
        // Through what both sides should agree on.
        let bound = if this_device { server_head } else { local_head };
        // Another device's rows nulled on the server: forgotten, held on neither side.
        let nulled: BTreeSet<i64> = rows
            .iter()
            .filter(|r| !this_device && !r.3)
            .map(|r| r.1)
            .collect();
        let theirs: BTreeMap<i64, String> = rows
            .iter()
            .filter(|r| r.1 <= bound && !nulled.contains(&r.1))
            .map(|r| (r.1, r.2.clone()))
            .collect();
        let ours: BTreeMap<i64, String> = mine
            .into_iter()
            .filter(|(s, _)| *s <= bound && !nulled.contains(s))
            .map(|(s, id)| {
                // An id not known here stands for whatever the server holds at that seq.
                let id = id.or_else(|| theirs.get(&s).cloned()).unwrap_or_default();
                (s, id)
            })
            .collect();
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
            space: space.to_string(),
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
    streams
}

/// The reply: every space's streams.
pub fn verified(streams: Vec<StreamCheck>) -> Verified {
    Verified {
        ok: streams.iter().all(|s| s.ok),
        streams,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::crypto::SpaceKey;

    fn id(s: i64) -> String {
        SpaceKey::from_slice(&[7u8; 32])
            .unwrap()
            .server_event_id(&format!("e{s}"))
    }

    fn check(server: &[(String, i64, String, bool)], local: &Local) -> Verified {
        verified(compare("me", "s", server, local.clone()))
    }

    #[test]
    fn equal_streams_agree_and_a_deleted_row_is_named() {
        let ids: BTreeMap<i64, Option<String>> = (1..=5).map(|s| (s, Some(id(s)))).collect();
        let mut local = Local::new();
        local.insert("me".into(), (None, ids.clone()));
        let server: Vec<_> = (1..=5)
            .map(|s| ("me".to_string(), s, id(s), true))
            .collect();
        let v = check(&server, &local);
        assert!(v.ok, "{v:?}");
        assert_eq!(v.streams[0].space, "s");
        // The server lost seq 3: named, and the hashes differ.
        let tampered: Vec<_> = server.iter().filter(|r| r.1 != 3).cloned().collect();
        let v = check(&tampered, &local);
        assert!(!v.ok);
        assert_eq!(v.streams[0].missing_on_server, vec![3]);
        assert_ne!(v.streams[0].server_hash, v.streams[0].local_hash);
        // Pending events above the server's head are not differences.
        let pending: Vec<_> = server.iter().filter(|r| r.1 <= 3).cloned().collect();
        assert!(check(&pending, &local).ok);
    }

    #[test]
    fn another_devices_stream_is_compared_through_the_cursor_and_nulled_rows_skipped() {
        let mut local = Local::new();
        // Seq 2 was received, then nulled on the server by its owner (forgotten): fine.
        local.insert(
            "other".into(),
            (
                Some(3),
                [(1, Some(id(1))), (2, Some(id(2))), (3, Some(id(3)))]
                    .into_iter()
                    .collect(),
            ),
        );
        local.insert("me".into(), (None, BTreeMap::new()));
        let mut server = vec![
            ("other".to_string(), 1, id(1), true),
            ("other".to_string(), 2, id(2), false),
            ("other".to_string(), 3, id(3), true),
            ("other".to_string(), 4, id(4), true),
        ];
        let v = check(&server, &local);
        assert!(v.ok, "{v:?}");
        let other = |v: &Verified| v.streams.iter().find(|s| s.device == "other").cloned();
        assert_eq!(other(&v).unwrap().server_head, 4);
        // Another id at seq 3 on the server: named.
        server[2].2 = id(9);
        let v = check(&server, &local);
        assert!(!v.ok);
        assert_eq!(other(&v).unwrap().different, vec![3]);
    }

    #[test]
    fn a_row_received_without_its_server_id_is_compared_by_presence() {
        let mut local = Local::new();
        local.insert(
            "other".into(),
            (Some(2), [(1, None), (2, Some(id(2)))].into_iter().collect()),
        );
        let server = vec![
            ("other".to_string(), 1, id(1), true),
            ("other".to_string(), 2, id(2), true),
        ];
        assert!(check(&server, &local).ok);
        let v = check(&server[1..], &local);
        assert!(!v.ok);
        assert_eq!(v.streams[0].missing_on_server, vec![1]);
    }
}
