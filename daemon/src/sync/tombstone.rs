//! Forgetting across devices (docs/sync.md, "Tombstones"): a purge or a `redact --apply` of
//! synced events is itself an event, a tombstone listing the local event ids it removed.
//!
//! * The device that forgets ([`emit`]) empties its own logs' envelopes of those events (their
//!   plaintext must not outlive the rows), remembers the ids (`sync_tombstones`) and appends the
//!   tombstone to its personal stream, and to each team space's stream that carried any of
//!   them (so teammates forget them too).
//! * A device that receives one ([`forget_here`]) removes the rows through the writer, in the
//!   pull's transaction: the full-text index, vectors and re-embed queue follow through the
//!   tables' delete triggers, sessions left empty go, and an audit row says so. If it had
//!   shared some of them with a team itself (its own team stream holds them: a forget from
//!   another of the user's devices), it passes the tombstone on to that team. A team space's
//!   tombstone forgets only what came from the device that sent it.
//! * The owner of a forgotten event (the device whose stream holds it, whether it forgot it or
//!   received the tombstone) nulls its ciphertext on the server, in each space whose stream
//!   holds it ([`null_on_server`]); the pull skips a nulled row. Only an owner can: every device
//!   writes only its own rows.
//!
//! An event arriving after its tombstone (from a device that had not seen it yet) is not stored
//! again ([`is_forgotten`]).

use super::envelope::Envelope;
use super::log::Stream;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::BTreeMap;

/// Event ids per tombstone: a whole-project purge becomes several tombstones of bounded size.
const PER_TOMBSTONE: usize = 1000;

/// `sync_log.state` values (migration 016).
pub const LIVE: i64 = 0;
pub const FORGOTTEN: i64 = 1;
pub const NULLED: i64 = 2;

/// The rows about to be deleted, as (project, local event id): call before deleting, inside the
/// same transaction. `table` is `observations` or `prompts`.
pub fn ids_of_rows(
    conn: &Connection,
    table: &str,
    ids: &[i64],
) -> rusqlite::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for chunk in ids.chunks(500) {
        let sql = format!(
            "SELECT project, event_id FROM {table} WHERE event_id IS NOT NULL AND id IN ({})",
            vec!["?"; chunk.len()].join(",")
        );
        let mut st = conn.prepare(&sql)?;
        let rows = st.query_map(rusqlite::params_from_iter(chunk.iter()), |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })?;
        for r in rows {
            out.push(r?);
        }
    }
    Ok(out)
}

/// The uids of `project`'s synced knowledge items (before a purge deletes them).
pub fn item_uids(conn: &Connection, project: &str) -> rusqlite::Result<Vec<String>> {
    conn.prepare_cached("SELECT uid FROM knowledge WHERE project = ?1 AND uid IS NOT NULL")?
        .query_map([project], |r| r.get(0))?
        .collect()
}

/// This device purged the knowledge items `uids` of `project`, in the caller's transaction: the
/// events that carried them are emptied from its logs (always; an owner nulls them on the
/// server), and while sync is enabled the uids are remembered (a late copy is not stored again)
/// and a tombstone naming them goes to the personal stream and to each team stream that carried
/// any of them. A receiver deletes the items ([`forget_here`]).
pub fn forget_items(
    conn: &Connection,
    project: &str,
    uids: &[String],
    reason: &str,
) -> rusqlite::Result<()> {
    if uids.is_empty() {
        return Ok(());
    }
    let refs: Vec<&str> = uids.iter().map(String::as_str).collect();
    let teams = super::edit::retire_items(conn, &refs)?;
    if !super::log::ENABLED.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    remember(conn, &refs)?;
    let events: Vec<(String, String)> = uids
        .iter()
        .map(|u| (project.to_string(), u.clone()))
        .collect();
    append(conn, &Stream::Personal, &events, reason)?;
    for (stream, events) in teams {
        append(conn, &stream, &events, reason)?;
    }
    Ok(())
}

/// This device forgot `events` (project, local event id) for `reason`: empty their envelopes in
/// the logs (always: a disabled sync keeps its logs), and while sync is enabled remember them and
/// append tombstones, one per stream, project and [`PER_TOMBSTONE`] ids: to the personal stream,
/// and to each team stream that carried any of them. Runs in the caller's transaction.
pub fn emit(conn: &Connection, events: &[(String, String)], reason: &str) -> rusqlite::Result<()> {
    if events.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = events.iter().map(|(_, id)| id.as_str()).collect();
    let teams = shared(conn, &ids)?;
    forget_in_log(conn, &ids)?;
    if !super::log::ENABLED.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    remember(conn, &ids)?;
    append(conn, &Stream::Personal, events, reason)?;
    for (stream, events) in teams {
        append(conn, &stream, &events, reason)?;
    }
    Ok(())
}

/// The team streams of this device that carried any of `ids` to their space (live or released
/// rows, not forgotten yet), each with those events as (project, event id). Call before
/// [`forget_in_log`] empties the envelopes the projects are read from.
pub(super) fn shared(
    conn: &Connection,
    ids: &[&str],
) -> rusqlite::Result<BTreeMap<Stream, Vec<(String, String)>>> {
    let mut out: BTreeMap<Stream, Vec<(String, String)>> = BTreeMap::new();
    let mut st = conn.prepare_cached(
        "SELECT space, envelope FROM sync_space_log WHERE event_id = ?1 AND state IN (?2, ?3)",
    )?;
    for id in ids {
        let rows = st.query_map(params![id, LIVE, super::quarantine::RELEASED], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        for row in rows {
            let (space, env) = row?;
            let project = Envelope::from_bytes(&env)
                .map(|e| e.project.name)
                .unwrap_or_default();
            out.entry(Stream::Team(space))
                .or_default()
                .push((project, id.to_string()));
        }
    }
    Ok(out)
}

/// Append tombstones of `events` (project, event id) to `stream`, one per project and
/// [`PER_TOMBSTONE`] ids, each under its own random id: the one place a tombstone enters a log.
fn append(
    conn: &Connection,
    stream: &Stream,
    events: &[(String, String)],
    reason: &str,
) -> rusqlite::Result<()> {
    let mut by_project: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (p, id) in events {
        by_project.entry(p).or_default().push(id.clone());
    }
    for (project, ids) in by_project {
        for chunk in ids.chunks(PER_TOMBSTONE) {
            let id = super::log::random_id("tombstone")?;
            let env = Envelope::tombstone(id.clone(), project, chunk.to_vec(), reason);
            super::log::append_to(conn, stream, &id, &env.to_bytes())?;
        }
    }
    Ok(())
}

/// Empty this device's logged envelopes of `ids`, in every stream, and mark them for nulling
/// on the server.
pub(super) fn forget_in_log(conn: &Connection, ids: &[&str]) -> rusqlite::Result<()> {
    for table in ["sync_log", "sync_space_log"] {
        let mut st = conn.prepare_cached(&format!(
            "UPDATE {table} SET envelope = x'', state = ?2
             WHERE event_id = ?1 AND state NOT IN (?2, ?3)"
        ))?;
        for id in ids {
            st.execute(params![id, FORGOTTEN, NULLED])?;
        }
    }
    Ok(())
}

fn remember(conn: &Connection, ids: &[&str]) -> rusqlite::Result<()> {
    let now = nmem_proto::now_ms();
    let mut st = conn.prepare_cached(
        "INSERT OR IGNORE INTO sync_tombstones (event_id, forgotten_at) VALUES (?1, ?2)",
    )?;
    let mut inbound = conn.prepare_cached("DELETE FROM sync_inbound WHERE event_id = ?1")?;
    let mut origin = conn.prepare_cached("DELETE FROM sync_origin WHERE event_id = ?1")?;
    for id in ids {
        st.execute(params![id, now])?;
        inbound.execute([id])?;
        origin.execute([id])?;
    }
    Ok(())
}

/// The event ids of the thoughts stored here with the events `ids`: their rows' ids, as the log
/// entry of each event kept them (`thought_ids` of `sync_inbound` for a received event, of
/// `sync_log` for one of this device's).
fn thoughts_of(conn: &Connection, ids: &[&str]) -> rusqlite::Result<Vec<String>> {
    let mut logged = conn.prepare_cached(
        "SELECT thought_ids FROM sync_inbound WHERE event_id = ?1 AND thought_ids IS NOT NULL
         UNION ALL
         SELECT thought_ids FROM sync_log WHERE event_id = ?1 AND thought_ids IS NOT NULL",
    )?;
    let mut row = conn.prepare_cached(
        "SELECT event_id FROM prompts WHERE id = ?1 AND source = 'agent' AND event_id IS NOT NULL",
    )?;
    let mut out = Vec::new();
    for id in ids {
        let lists: Vec<String> = logged
            .query_map([id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for list in lists {
            let ids = crate::store::writer::RowIds::from_columns(None, Some(list)).thoughts;
            for rid in ids.into_iter().flatten() {
                if let Some(e) = row.query_row([rid], |r| r.get(0)).optional()? {
                    out.push(e);
                }
            }
        }
    }
    Ok(out)
}

/// Whether a tombstone forgot `event_id` here.
pub fn is_forgotten(conn: &Connection, event_id: &str) -> rusqlite::Result<bool> {
    conn.prepare_cached("SELECT 1 FROM sync_tombstones WHERE event_id = ?1")?
        .exists([event_id])
}

/// A tombstone from another device: remove the rows of `ids` (observations and prompts, with
/// their projections through the delete triggers), sessions left empty, this device's log
/// envelopes of them (an owner then nulls them on the server), pass it on to the team spaces
/// this device shared any of them with, and remember the ids. With `from` (a team space's
/// tombstone, sent by that device) only the events that came from `from` are forgotten. Returns
/// the rows removed. Runs in the pull's transaction.
pub fn forget_here(
    conn: &Connection,
    ids: &[String],
    reason: &str,
    from: Option<&str>,
) -> rusqlite::Result<u64> {
    let mut refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    if let Some(device) = from {
        let mut keep = Vec::with_capacity(refs.len());
        for id in refs {
            if super::edit::came_from(conn, id, device)? {
                keep.push(id);
            }
        }
        refs = keep;
    }
    // The thoughts (reasoning rows) stored with each event go with it: a team's tombstone names
    // them by their own ids, which have no origin here (`thoughts_of`).
    let thoughts = thoughts_of(conn, &refs)?;
    for t in &thoughts {
        if !refs.contains(&t.as_str()) {
            refs.push(t);
        }
    }
    let mut sessions = std::collections::BTreeSet::new();
    let mut counts = (0u64, 0u64);
    for (table, n) in [("observations", &mut counts.0), ("prompts", &mut counts.1)] {
        let mut find = conn.prepare_cached(&format!(
            "SELECT session_id FROM {table} WHERE event_id = ?1"
        ))?;
        let mut del = conn.prepare_cached(&format!("DELETE FROM {table} WHERE event_id = ?1"))?;
        for id in &refs {
            if let Some(s) = find
                .query_map([id], |r| r.get::<_, String>(0))?
                .next()
                .transpose()?
            {
                sessions.insert(s);
            }
            *n += del.execute([id])? as u64;
        }
    }
    for s in &sessions {
        conn.execute(
            "DELETE FROM sessions WHERE id = ?1
               AND NOT EXISTS (SELECT 1 FROM observations WHERE session_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM prompts WHERE session_id = ?1)",
            [s],
        )?;
    }
    // Knowledge items (their project purged elsewhere), named by uid: the events that carried
    // them are emptied here too, and the tombstone passed on to the teams that got them.
    let mut items = Vec::new();
    {
        let mut del = conn.prepare_cached("DELETE FROM knowledge WHERE uid = ?1")?;
        for id in &refs {
            if del.execute([id])? > 0 {
                items.push(*id);
            }
        }
    }
    let mut teams = shared(conn, &refs)?;
    if !items.is_empty() {
        for (stream, events) in super::edit::retire_items(conn, &items)? {
            teams.entry(stream).or_default().extend(events);
        }
    }
    forget_in_log(conn, &refs)?;
    remember(conn, &refs)?;
    for (stream, events) in teams {
        append(conn, &stream, &events, reason)?;
    }
    if counts.0 + counts.1 > 0 || !items.is_empty() {
        conn.execute(
            "INSERT INTO audit (timestamp, action, detail, observations, prompts)
             VALUES (?1, 'sync_forget', ?2, ?3, ?4)",
            params![
                nmem_proto::now_ms(),
                serde_json::json!({ "reason": reason, "events": refs.len(), "knowledge": items.len() })
                    .to_string(),
                counts.0 as i64,
                counts.1 as i64
            ],
        )?;
    }
    Ok(counts.0 + counts.1 + items.len() as u64)
}

/// This device's forgotten events of `stream` the server still holds (sequence number at most
/// `head`): (seq, local event id).
pub fn to_null(
    conn: &Connection,
    stream: &Stream,
    head: i64,
) -> rusqlite::Result<Vec<(i64, String)>> {
    let mut st = conn.prepare_cached(&stream.sql(
        "SELECT seq, event_id FROM {log} WHERE {rows} AND state = ?2 AND seq <= ?3 ORDER BY seq",
    ))?;
    let rows = st.query_map(params![stream.param(), FORGOTTEN, head], |r| {
        Ok((r.get(0)?, r.get(1)?))
    })?;
    rows.collect()
}

pub fn nulled(conn: &Connection, stream: &Stream, seqs: &[i64]) -> rusqlite::Result<()> {
    let mut st = conn.prepare_cached(
        &stream.sql("UPDATE {log} SET state = ?3 WHERE {rows} AND seq = ?2 AND state = ?4"),
    )?;
    for s in seqs {
        st.execute(params![stream.param(), s, NULLED, FORGOTTEN])?;
    }
    Ok(())
}

/// Null the ciphertext of this device's forgotten events of `space` on the server, then note it
/// locally (a crash between the two nulls them again: harmless).
pub async fn null_on_server(
    app: &crate::app::App,
    client: &tokio_postgres::Client,
    space: &super::space::Space,
    device: &str,
    head: i64,
) -> Result<(), String> {
    let stream = space.stream.clone();
    let rows = app
        .writer
        .exec(move |c| Ok(to_null(c, &stream, head)?))
        .await
        .map_err(|e| e.to_string())?;
    if rows.is_empty() {
        return Ok(());
    }
    let seqs: Vec<i64> = rows.iter().map(|r| r.0).collect();
    super::remote::null_ciphertext(client, &space.id, device, &seqs).await?;
    let stream = space.stream.clone();
    app.writer
        .exec(move |c| Ok(nulled(c, &stream, &seqs)?))
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Prepared;

    fn event(id: &str, content: &str) -> Prepared {
        crate::sync::envelope::sample(id, content)
    }

    #[test]
    fn a_received_tombstone_removes_the_rows_and_keeps_them_out() {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        let count = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        for (id, text) in [("e1", "keep this"), ("e2", "forget this")] {
            assert!(crate::store::writer::apply_inbound(
                &c,
                &event(id, text),
                &mut Default::default()
            )
            .unwrap());
        }
        // This device's own log holds e2 (as if it had recorded it).
        super::super::log::append_envelope(&c, "e2", b"{\"plaintext\":1}").unwrap();
        let removed = forget_here(&c, &["e2".into(), "e9".into()], "purge", None).unwrap();
        assert_eq!(removed, 1);
        assert_eq!(count("SELECT COUNT(*) FROM observations"), 1);
        assert_eq!(
            count("SELECT COUNT(*) FROM sync_log WHERE length(envelope) = 0 AND state = 1"),
            1
        );
        let p = &Stream::Personal;
        assert_eq!(to_null(&c, p, 10).unwrap(), vec![(1, "e2".to_string())]);
        assert!(
            to_null(&c, p, 0).unwrap().is_empty(),
            "not on the server yet"
        );
        nulled(&c, p, &[1]).unwrap();
        assert!(to_null(&c, p, 10).unwrap().is_empty());
        assert!(is_forgotten(&c, "e2").unwrap() && is_forgotten(&c, "e9").unwrap());
        assert!(!is_forgotten(&c, "e1").unwrap());
        assert_eq!(
            count("SELECT COUNT(*) FROM audit WHERE action = 'sync_forget'"),
            1
        );
        // The same tombstone again changes nothing and writes no audit row.
        assert_eq!(forget_here(&c, &["e2".into()], "purge", None).unwrap(), 0);
        assert_eq!(
            count("SELECT COUNT(*) FROM audit WHERE action = 'sync_forget'"),
            1
        );
    }

    #[test]
    fn a_team_tombstone_forgets_only_what_came_from_its_sender() {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        let count = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        for (id, text) in [
            ("x1", "from x"),
            ("y1", "from y"),
            ("mine", "recorded here"),
        ] {
            assert!(crate::store::writer::apply_inbound(
                &c,
                &event(id, text),
                &mut Default::default()
            )
            .unwrap());
        }
        for (id, device) in [("x1", "dev-x"), ("y1", "dev-y")] {
            c.execute(
                "INSERT INTO sync_origin (event_id, device, seq) VALUES (?1, ?2, 1)",
                params![id, device],
            )
            .unwrap();
        }
        let all: Vec<String> = ["x1", "y1", "mine"].map(String::from).to_vec();
        // A teammate's tombstone naming everyone's events: only its own go.
        assert_eq!(forget_here(&c, &all, "purge", Some("dev-x")).unwrap(), 1);
        assert_eq!(count("SELECT COUNT(*) FROM observations"), 2);
        assert!(is_forgotten(&c, "x1").unwrap());
        assert!(!is_forgotten(&c, "y1").unwrap() && !is_forgotten(&c, "mine").unwrap());
        // The user's own devices (the personal space) may forget anything.
        assert_eq!(forget_here(&c, &all, "purge", None).unwrap(), 2);
        assert_eq!(count("SELECT COUNT(*) FROM observations"), 0);
    }

    #[test]
    fn a_team_tombstone_takes_the_thoughts_that_came_with_its_event() {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        let count = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        let mut ev = event("x1", "from x");
        ev.thoughts = vec![crate::ingest::reasoning::Thought {
            uid: "t:x1:0".into(),
            timestamp: 0,
            content: "reasoning that came with x1".into(),
        }];
        let mut place = crate::store::writer::Placement::default();
        assert!(crate::store::writer::apply_inbound(&c, &ev, &mut place).unwrap());
        // As the pull records a received event: its origin and its rows' ids.
        c.execute(
            "INSERT INTO sync_origin (event_id, device, seq) VALUES ('x1', 'dev-x', 1)",
            [],
        )
        .unwrap();
        c.execute(
            "INSERT INTO sync_inbound (event_id, device, seq, envelope, row_id, thought_ids)
             VALUES ('x1', 'dev-x', 1, x'', ?1, ?2)",
            params![place.ids.record, place.ids.thoughts_json()],
        )
        .unwrap();
        assert_eq!(
            count("SELECT COUNT(*) FROM prompts WHERE source = 'agent'"),
            1
        );
        // The sender's tombstone names the event and its thought by their own ids; the thought
        // has no origin here, and goes with its event.
        let ids = ["x1", "t:x1:0"].map(String::from).to_vec();
        assert_eq!(forget_here(&c, &ids, "purge", Some("dev-x")).unwrap(), 2);
        assert_eq!(count("SELECT COUNT(*) FROM prompts"), 0);
        assert_eq!(count("SELECT COUNT(*) FROM observations"), 0);
        assert!(is_forgotten(&c, "t:x1:0").unwrap());
    }

    #[test]
    fn a_forget_of_a_shared_event_is_passed_on_to_its_team() {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        let count = |sql: &str| c.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap();
        let shared = crate::sync::envelope::Envelope::of(&event("s1", "shared"))
            .unwrap()
            .to_bytes();
        let team = Stream::Team("acme".into());
        super::super::log::append_to(&c, &team, "s1", &shared).unwrap();
        super::super::log::append_to(&c, &Stream::Personal, "s1", &shared).unwrap();
        assert!(crate::store::writer::apply_inbound(
            &c,
            &event("s1", "shared"),
            &mut Default::default()
        )
        .unwrap());
        // Received from another of the user's devices: this device shared it, so it tells the
        // team, and its team row is emptied and due for nulling.
        assert_eq!(forget_here(&c, &["s1".into()], "purge", None).unwrap(), 1);
        let logged: Vec<(i64, Vec<u8>)> = c
            .prepare("SELECT seq, envelope FROM sync_space_log WHERE space = 'acme' ORDER BY seq")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(logged.len(), 2);
        assert!(logged[0].1.is_empty(), "the shared row's plaintext stayed");
        let tomb = Envelope::from_bytes(&logged[1].1).unwrap();
        assert_eq!(tomb.forgets(), Some(&["s1".to_string()][..]));
        assert_eq!(tomb.project.name, event("s1", "x").project.name);
        assert_eq!(to_null(&c, &team, 10).unwrap(), vec![(1, "s1".to_string())]);
        // The same tombstone again tells the team nothing more.
        forget_here(&c, &["s1".into()], "purge", None).unwrap();
        assert_eq!(
            count("SELECT COUNT(*) FROM sync_space_log WHERE space = 'acme'"),
            2
        );
    }
}
