//! The local side of sync: this home's sync identity (`sync_state`), the outbound log the writer
//! appends to (`sync_log`), the pull cursors (`sync_cursors`) and where inbound events came
//! from (`sync_origin`). Every function takes the write connection (the single writer).
//!
//! Routing (migration 015): the writer logs a stored event for the personal space unless its
//! project is excluded (`sync_excluded`), and for each team space its project is shared with
//! (`sync_shares`) when the share carries its type, each space in its own dense stream
//! (`sync_space_log`). [`Routes`] is the writer's in-memory copy of those two tables.

use super::crypto::SpaceKey;
use super::envelope::Envelope;
use crate::ingest::Prepared;
use crate::store::writer::{Placement, RowIds};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

/// Whether the writer logs events: set from `sync_state` when nmemd opens the database and by
/// `enable`/`join`/`disable`. A flag, so a home without sync pays one load per event.
pub static ENABLED: AtomicBool = AtomicBool::new(false);

/// The writer's hook: log a stored event's envelope, in the event's own transaction, under the
/// next sequence number of each stream it is routed to (dense: the writer is the only one
/// appending), with the ids its rows got here (personal stream: for `nmem rebuild`).
pub fn append(conn: &Connection, ev: &Prepared, ids: &RowIds) -> rusqlite::Result<()> {
    if !ENABLED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some(env) = Envelope::of(ev) else {
        return Ok(());
    };
    let (personal, teams) = route(ev);
    let bytes = env.to_bytes();
    if personal {
        append_row(conn, &Stream::Personal, &ev.event_id, &bytes, Some(ids))?;
    }
    for space in teams {
        append_to(conn, &Stream::Team(space), &ev.event_id, &bytes)?;
    }
    Ok(())
}

/// One space's outbound stream on this device: the personal space's `sync_log`, or a team
/// space's rows of `sync_space_log` (migration 015). Both tables have the same columns but the
/// space; each holds a dense sequence per stream, and `state` (migrations 016 and 017) says
/// what became of each row ([`super::tombstone`], [`super::quarantine`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Stream {
    Personal,
    Team(String),
}

impl Stream {
    /// Every stream this home writes: the personal one and each team space's.
    pub fn all(conn: &Connection) -> rusqlite::Result<Vec<Stream>> {
        let mut out = vec![Stream::Personal];
        let mut st = conn.prepare_cached("SELECT DISTINCT space FROM sync_space_log")?;
        for s in st.query_map([], |r| r.get::<_, String>(0))? {
            out.push(Stream::Team(s?));
        }
        Ok(out)
    }

    /// `sql` for this stream: `{log}` becomes its table and `{rows}` the condition selecting
    /// its rows, on the parameter `?1`, which every statement binds to [`Stream::param`].
    pub fn sql(&self, sql: &str) -> String {
        let (table, rows) = match self {
            Stream::Personal => ("sync_log", "?1 IS NULL"),
            Stream::Team(_) => ("sync_space_log", "space = ?1"),
        };
        sql.replace("{log}", table).replace("{rows}", rows)
    }

    /// `?1` of [`Stream::sql`]'s statements: the team space's name (NULL for the personal
    /// stream, whose table holds nothing else).
    pub fn param(&self) -> Option<&str> {
        match self {
            Stream::Personal => None,
            Stream::Team(s) => Some(s),
        }
    }
}

/// Log an envelope under the stream's next sequence number (events, tombstones, released
/// quarantine).
pub fn append_to(
    conn: &Connection,
    stream: &Stream,
    event_id: &str,
    envelope: &[u8],
) -> rusqlite::Result<()> {
    append_row(conn, stream, event_id, envelope, None)
}

/// [`append_to`], with the ids the event's rows got on this device when it stored some (the
/// personal stream keeps them for `nmem rebuild`).
pub(super) fn append_row(
    conn: &Connection,
    stream: &Stream,
    event_id: &str,
    envelope: &[u8],
    ids: Option<&RowIds>,
) -> rusqlite::Result<()> {
    let now = nmem_proto::now_ms();
    match stream {
        Stream::Personal => conn
            .prepare_cached(
                "INSERT INTO sync_log (seq, event_id, created_at, envelope, row_id, thought_ids)
                 SELECT COALESCE(MAX(seq), 0) + 1, ?1, ?2, ?3, ?4, ?5 FROM sync_log",
            )?
            .execute(params![
                event_id,
                now,
                envelope,
                ids.and_then(|i| i.record),
                ids.and_then(RowIds::thoughts_json)
            ])?,
        Stream::Team(space) => conn
            .prepare_cached(
                "INSERT OR IGNORE INTO sync_space_log (space, seq, event_id, created_at, envelope)
                 SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4 FROM sync_space_log
                 WHERE space = ?1",
            )?
            .execute(params![space, event_id, now, envelope])?,
    };
    Ok(())
}

/// The observation types a team space carries by default: what teammates learn from (commits,
/// pushes, pull requests, failures, saved memories), not the conversation or every action.
pub const TEAM_TYPES: [&str; 6] = [
    "git_commit",
    "git_push",
    "github",
    "command_error",
    "tool_error",
    "memory",
];

/// What a share carries beyond [`TEAM_TYPES`] (`nmem share … --with`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Extra {
    pub prompts: bool,
    /// Every observation type (turn ends and raw command output included).
    pub all: bool,
    pub types: HashSet<String>,
}

impl Extra {
    /// Parse `prompts,turn_end,command` (or `all`): each an observation type nmem knows,
    /// `prompts` or `all`.
    pub fn parse(items: &[String]) -> Result<Extra, String> {
        let mut x = Extra::default();
        for item in items.iter().flat_map(|i| i.split(',')).map(str::trim) {
            match item {
                "" => {}
                "prompts" | "prompt" => x.prompts = true,
                "all" => x.all = true,
                "turn_ends" => {
                    x.types.insert("turn_end".into());
                }
                t if nmem_proto::obs::ObsType::from_name(t).is_some() => {
                    x.types.insert(t.to_string());
                }
                t => {
                    return Err(format!(
                        "`{t}` is not something a share can carry: give `prompts`, `all`, or \
                         observation types such as turn_end, command, file_edit (the default \
                         types {} are always shared)",
                        TEAM_TYPES.join(", ")
                    ))
                }
            }
        }
        Ok(x)
    }

    /// The stored form (`sync_shares.extra`), the parse's input.
    pub fn to_text(&self) -> String {
        let mut v: Vec<String> = self.types.iter().cloned().collect();
        v.sort();
        if self.all {
            v.insert(0, "all".into());
        }
        if self.prompts {
            v.insert(0, "prompts".into());
        }
        v.join(",")
    }

    fn allows(&self, record: &crate::ingest::Record) -> bool {
        use crate::ingest::Record;
        match record {
            Record::Observation(o) => {
                self.all || TEAM_TYPES.contains(&o.obs_type) || self.types.contains(o.obs_type)
            }
            Record::Prompt(_) => self.prompts,
            Record::Nothing => false,
        }
    }
}

/// Where stored events go: the writer reads it for every event while sync is on, the commands
/// that change it reload it ([`load_routes`]) after their transaction.
#[derive(Debug, Default)]
pub struct Routes {
    /// Projects kept out of the personal space.
    pub excluded: HashSet<String>,
    /// Per project: the team spaces it is shared with, and what each carries.
    pub shares: HashMap<String, Vec<(String, Extra)>>,
}

static ROUTES: RwLock<Option<Routes>> = RwLock::new(None);

/// Whether `ev` goes to the personal space, and to which team spaces.
pub(super) fn route(ev: &Prepared) -> (bool, Vec<String>) {
    route_project(&ev.project.name, |x| x.allows(&ev.record))
}

/// Whether `project`'s events go to the personal space, and to which of the team spaces it is
/// shared with (those whose share `carries`).
fn route_project(project: &str, carries: impl Fn(&Extra) -> bool) -> (bool, Vec<String>) {
    let routes = ROUTES.read().unwrap_or_else(|p| p.into_inner());
    let Some(r) = routes.as_ref() else {
        return (true, Vec::new());
    };
    let personal = !r.excluded.contains(project);
    let teams = r
        .shares
        .get(project)
        .map(|v| {
            v.iter()
                .filter(|(_, x)| carries(x))
                .map(|(s, _)| s.clone())
                .collect()
        })
        .unwrap_or_default();
    (personal, teams)
}

/// Whether `project`'s events go to the personal space (it is not excluded).
pub fn carries_personal(project: &str) -> bool {
    route_project(project, |_| false).0
}

/// Log a knowledge event of `project` (`crate::knowledge`: an item written, a change of one)
/// in the caller's transaction: for the personal space unless the project is excluded, and for
/// every team space it is shared with (knowledge items travel to a team by default).
pub fn append_knowledge(
    conn: &Connection,
    project: &str,
    ev: super::envelope::KnowledgeEvent,
) -> rusqlite::Result<()> {
    if !ENABLED.load(Ordering::Relaxed) {
        return Ok(());
    }
    let (personal, teams) = route_project(project, |_| true);
    let id = random_id("knowledge")?;
    let bytes = Envelope::knowledge(id.clone(), project, ev).to_bytes();
    if personal {
        append_to(conn, &Stream::Personal, &id, &bytes)?;
    }
    for space in teams {
        append_to(conn, &Stream::Team(space), &id, &bytes)?;
    }
    Ok(())
}

/// A new random id `PREFIX-<32 hex digits>` (a tombstone's, a knowledge event's or item's), as
/// a SQLite error if the system's randomness fails, for the writer's transactions.
pub fn random_id(prefix: &str) -> rusqlite::Result<String> {
    let id = super::crypto::random_id().map_err(|e| {
        rusqlite::Error::ToSqlConversionFailure(Box::new(std::io::Error::other(e.to_string())))
    })?;
    Ok(format!("{prefix}-{id}"))
}

/// Read the routing tables into the writer's copy. Shares of a team space this device can no
/// longer write (removed, or left) are not routed.
pub fn load_routes(conn: &Connection) -> rusqlite::Result<()> {
    let mut r = Routes::default();
    let mut st = conn.prepare("SELECT project FROM sync_excluded")?;
    for p in st.query_map([], |row| row.get::<_, String>(0))? {
        r.excluded.insert(p?);
    }
    let mut st = conn.prepare(
        "SELECT s.project, s.space, s.extra FROM sync_shares s
         JOIN sync_spaces p ON p.space = s.space AND p.kind = 'team' AND p.locked IS NULL",
    )?;
    let rows = st.query_map([], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, String>(1)?,
            row.get::<_, String>(2)?,
        ))
    })?;
    for row in rows {
        let (project, space, extra) = row?;
        // Stored by `share` after the same parse: a failure here is a hand-edited row.
        let extra = Extra::parse(&[extra]).unwrap_or_default();
        r.shares.entry(project).or_default().push((space, extra));
    }
    *ROUTES.write().unwrap_or_else(|p| p.into_inner()) = Some(r);
    Ok(())
}

/// Log an envelope in the personal stream ([`append_to`]).
pub fn append_envelope(conn: &Connection, event_id: &str, envelope: &[u8]) -> rusqlite::Result<()> {
    append_to(conn, &Stream::Personal, event_id, envelope)
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
/// no cursors (the sequence numbers of a previous identity mean nothing under the new one), and
/// the backfill of what was stored before.
pub fn start(
    conn: &mut Connection,
    device: &str,
    key: &SpaceKey,
    url: Option<&str>,
) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    // Team streams restart under the new device id too; team memberships and keys stay.
    tx.execute_batch(
        "DELETE FROM sync_log; DELETE FROM sync_cursors; DELETE FROM sync_space_log;
         DELETE FROM sync_received; DELETE FROM sync_streams;
         DELETE FROM sync_keys WHERE space IN (SELECT space FROM sync_spaces WHERE kind = 'personal');
         DELETE FROM sync_spaces WHERE kind = 'personal';",
    )?;
    tx.execute(
        "INSERT OR REPLACE INTO sync_spaces (space, kind, key_id, role, created_at)
         VALUES (?1, 'personal', ?2, 'owner', ?3)",
        params![key.space_id(), key.key_id(), nmem_proto::now_ms()],
    )?;
    tx.execute(
        "INSERT OR REPLACE INTO sync_keys (space, key_id, key) VALUES (?1, ?2, ?3)",
        params![key.space_id(), key.key_id(), &key.0[..]],
    )?;
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
    // What was stored before now enters the new streams too (`sync::backfill`): the personal
    // space's, and each shared project's team stream (restarted above).
    tx.execute("DELETE FROM sync_backfill", [])?;
    super::backfill::plan(&tx, &key.space_id(), "")?;
    let shares: Vec<(String, String)> = tx
        .prepare("SELECT space, project FROM sync_shares")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (space, project) in shares {
        super::backfill::plan(&tx, &space, &project)?;
    }
    tx.commit()?;
    ENABLED.store(true, Ordering::Relaxed);
    Ok(())
}

/// `nmem sync leave`: forget the personal space here: the identity (device id, key), the cursors
/// and the backfill. The rows stay, and so do the outbound log (for `nmem rebuild`; the next
/// `enable` or `join` starts a new one), the origins and the tombstones.
pub fn leave(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TEMP TABLE IF NOT EXISTS leaving (space TEXT PRIMARY KEY);
         DELETE FROM temp.leaving;
         INSERT OR IGNORE INTO temp.leaving
           SELECT space FROM sync_spaces WHERE kind = 'personal' UNION SELECT space FROM sync_state;
         DELETE FROM sync_cursors WHERE space IN (SELECT space FROM temp.leaving);
         DELETE FROM sync_received WHERE stream IN
           (SELECT id FROM sync_streams WHERE space IN (SELECT space FROM temp.leaving));
         DELETE FROM sync_streams WHERE space IN (SELECT space FROM temp.leaving);
         DELETE FROM sync_keys WHERE space IN (SELECT space FROM temp.leaving);
         DELETE FROM sync_backfill WHERE space IN (SELECT space FROM temp.leaving);
         DELETE FROM sync_spaces WHERE space IN (SELECT space FROM temp.leaving);
         DELETE FROM sync_state;
         DELETE FROM temp.leaving;",
    )?;
    tx.commit()?;
    ENABLED.store(false, Ordering::Relaxed);
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

/// This device's last sequence number in the personal stream (0: nothing logged).
pub fn local_seq(conn: &Connection) -> rusqlite::Result<i64> {
    stream_seq(conn, &Stream::Personal)
}

/// This device's last sequence number in `stream` (0: nothing logged).
pub fn stream_seq(conn: &Connection, stream: &Stream) -> rusqlite::Result<i64> {
    conn.prepare_cached(&stream.sql("SELECT COALESCE(MAX(seq), 0) FROM {log} WHERE {rows}"))?
        .query_row([stream.param()], |r| r.get(0))
}

/// A logged event bound for upload: seq, local id, envelope, state.
pub type Logged = (i64, String, Vec<u8>, i64);

/// Up to `limit` logged events of `stream` after `after`, in order, with their state.
pub fn outbox(
    conn: &Connection,
    stream: &Stream,
    after: i64,
    limit: usize,
) -> rusqlite::Result<Vec<Logged>> {
    let mut st = conn.prepare_cached(&stream.sql(
        "SELECT seq, event_id, envelope, state FROM {log}
         WHERE {rows} AND seq > ?2 ORDER BY seq LIMIT ?3",
    ))?;
    let rows = st.query_map(params![stream.param(), after, limit as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    rows.collect()
}

/// The local event id logged under `seq` in `stream`.
pub fn event_at(conn: &Connection, stream: &Stream, seq: i64) -> rusqlite::Result<Option<String>> {
    conn.prepare_cached(&stream.sql("SELECT event_id FROM {log} WHERE {rows} AND seq = ?2"))?
        .query_row(params![stream.param(), seq], |r| r.get(0))
        .optional()
}

pub fn cursors(conn: &Connection, space: &str) -> rusqlite::Result<HashMap<String, i64>> {
    let mut st = conn.prepare_cached("SELECT device, seq FROM sync_cursors WHERE space = ?1")?;
    let rows = st.query_map([space], |r| Ok((r.get(0)?, r.get(1)?)))?;
    rows.collect()
}

/// What a pull applies: an event, a tombstone (its own id, the ids it forgets, why), or a
/// knowledge event.
pub enum Inbound {
    Event(Prepared),
    Tombstone(Envelope),
    Knowledge(Envelope),
    /// An edit, with the rewritten event of a rewrite (through this device's redactor).
    Edit(Box<Envelope>, Option<Prepared>),
}

/// A batch pulled from one device of one space, as [`apply_inbound`] stores it.
pub struct Pulled<'a> {
    pub space: &'a str,
    pub device: &'a str,
    /// `space` is a team space.
    pub team: bool,
    /// The events to apply, by sequence number.
    pub events: &'a [(i64, Inbound)],
    /// Every row of the batch that had ciphertext: (seq, local event id, server event id),
    /// stored or not (`sync_received`, for `nmem sync verify`).
    pub received: &'a [(i64, String, String)],
    /// The cursor after the batch.
    pub through: i64,
}

/// Store events pulled from a device (in sequence order) and move its cursor, in one
/// transaction: a crash before the commit leaves both as they were, and the next pull fetches
/// the same events again (stored once: event ids are unique). Each applied envelope is kept in
/// `sync_inbound` (for `nmem rebuild`) and each row received in `sync_received` (for `nmem
/// sync verify`); an event a tombstone forgot is not stored again. A tombstone of a team space
/// forgets only events that came from its own device: a teammate cannot make this home forget
/// what it recorded or got from anyone else.
pub fn apply_inbound(conn: &mut Connection, batch: &Pulled) -> rusqlite::Result<usize> {
    let Pulled {
        space,
        device,
        team,
        events,
        received,
        through,
    } = *batch;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut stored = 0;
    let origin = source(&tx, space, device)?;
    for (seq, item) in events {
        let mut place = Placement {
            origin: Some(origin),
            ..Placement::default()
        };
        let (event_id, envelope) = match item {
            Inbound::Event(ev) => {
                if super::tombstone::is_forgotten(&tx, &ev.event_id)? {
                    continue;
                }
                if crate::store::writer::apply_inbound(&tx, ev, &mut place)? {
                    stored += 1;
                }
                let Some(env) = Envelope::of(ev) else {
                    continue;
                };
                (ev.event_id.as_str(), Some(env.to_bytes()))
            }
            Inbound::Tombstone(env) => {
                let t = env.tombstone.as_ref().expect("a tombstone");
                let from = team.then_some(device);
                super::tombstone::forget_here(&tx, &t.forget, &t.reason, from)?;
                (env.event_id.as_str(), Some(env.to_bytes()))
            }
            Inbound::Edit(env, rewrite) => {
                let e = env.edit.as_ref().expect("an edit");
                super::edit::apply(&tx, e, rewrite.as_ref(), device, *seq, team)?;
                // A rewrite's event is kept under its own id (`edit::apply`), not twice.
                let keep = matches!(e, super::envelope::Edit::Pin { .. });
                (env.event_id.as_str(), keep.then(|| env.to_bytes()))
            }
            Inbound::Knowledge(env) => {
                super::edit::apply_knowledge(&tx, env, device, *seq, team)?;
                (env.event_id.as_str(), Some(env.to_bytes()))
            }
        };
        tx.prepare_cached(
            "INSERT OR IGNORE INTO sync_origin (event_id, device, seq) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![event_id, device, seq])?;
        if let Some(envelope) = envelope {
            tx.prepare_cached(
                "INSERT OR IGNORE INTO sync_inbound (event_id, device, seq, envelope, row_id, thought_ids)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?
            .execute(params![
                event_id,
                device,
                seq,
                envelope,
                place.ids.record,
                place.ids.thoughts_json()
            ])?;
        }
    }
    if !received.is_empty() {
        tx.prepare_cached("INSERT OR IGNORE INTO sync_streams (space, device) VALUES (?1, ?2)")?
            .execute(params![space, device])?;
        let stream: i64 = tx
            .prepare_cached("SELECT id FROM sync_streams WHERE space = ?1 AND device = ?2")?
            .query_row(params![space, device], |r| r.get(0))?;
        // A team space's server id as pulled; a personal space's local id (the key derives the
        // server's from it).
        let mut st = tx.prepare_cached(
            "INSERT OR REPLACE INTO sync_received (stream, seq, event_id, server_id)
             VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (seq, id, server_id) in received {
            let (id, server_id) = if team {
                (None, Some(server_id))
            } else {
                (Some(id), None)
            };
            st.execute(params![stream, seq, id, server_id])?;
        }
    }
    tx.execute(
        "INSERT INTO sync_cursors (space, device, seq) VALUES (?1, ?2, ?3)
         ON CONFLICT(space, device) DO UPDATE SET seq = MAX(seq, excluded.seq)",
        params![space, device, through],
    )?;
    tx.commit()?;
    Ok(stored)
}

/// The source of rows pulled from `device` through `space` (`sync_sources`, made on first use;
/// docs/sync.md "Origin"): one of this user's devices when `space` is the personal space, or
/// when the personal space knows the device (a team space's event from another device of
/// mine); otherwise a teammate's device, through `space`.
pub fn source(conn: &Connection, space: &str, device: &str) -> rusqlite::Result<i64> {
    let personal: Option<String> = conn
        .prepare_cached("SELECT space FROM sync_spaces WHERE kind = 'personal'")?
        .query_row([], |r| r.get(0))
        .optional()?;
    let mine = match personal.as_deref() {
        Some(p) if p == space => true,
        Some(p) => conn
            .prepare_cached(
                "SELECT 1 FROM sync_cursors WHERE space = ?1 AND device = ?2
                 UNION ALL SELECT 1 FROM sync_sources WHERE space = ?1 AND device = ?2",
            )?
            .exists(params![p, device])?,
        None => false,
    };
    let (kind, space) = match personal {
        Some(p) if mine => ("my-devices", p),
        _ => ("team", space.to_string()),
    };
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sync_sources (kind, space, device) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![kind, space, device])?;
    conn.prepare_cached("SELECT id FROM sync_sources WHERE space = ?1 AND device = ?2")?
        .query_row(params![space, device], |r| r.get(0))
}

/// The source of an event received from `device` before, as `nmem rebuild` restores it (the
/// log keeps the device, not the space): one of this user's first.
pub fn source_of_device(conn: &Connection, device: &str) -> rusqlite::Result<Option<i64>> {
    conn.prepare_cached(
        "SELECT id FROM sync_sources WHERE device = ?1 ORDER BY kind = 'team', id LIMIT 1",
    )?
    .query_row([device], |r| r.get(0))
    .optional()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::{Obs, Record};

    fn obs(t: &'static str) -> Record {
        Record::Observation(Obs {
            obs_type: t,
            ..Obs::default()
        })
    }

    #[test]
    fn a_share_carries_the_default_types_and_what_it_adds() {
        let none = Extra::parse(&[]).unwrap();
        for t in TEAM_TYPES {
            assert!(none.allows(&obs(t)), "{t}");
        }
        for t in ["command", "turn_end", "file_edit", "file_read"] {
            assert!(!none.allows(&obs(t)), "{t}");
        }
        assert!(!none.allows(&Record::Nothing));
        let x = Extra::parse(&["prompts,turn_ends".into(), "command".into()]).unwrap();
        assert!(x.allows(&obs("turn_end")) && x.allows(&obs("command")));
        assert!(!x.allows(&obs("file_edit")));
        assert_eq!(Extra::parse(&[x.to_text()]).unwrap(), x);
        let all = Extra::parse(&["all".into()]).unwrap();
        assert!(all.allows(&obs("file_read")));
        let e = Extra::parse(&["prompts,chatter".into()]).unwrap_err();
        assert!(e.contains("`chatter`") && e.contains("git_commit"), "{e}");
    }
}
