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
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::RwLock;

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
    let (personal, teams) = route(ev);
    let bytes = env.to_bytes();
    if personal {
        append_envelope(conn, &ev.event_id, &bytes)?;
    }
    for space in teams {
        append_space(conn, &space, &ev.event_id, &bytes)?;
    }
    Ok(())
}

/// Log an envelope in a team space's stream under its next sequence number (once per event).
pub fn append_space(
    conn: &Connection,
    space: &str,
    event_id: &str,
    envelope: &[u8],
) -> rusqlite::Result<()> {
    conn.prepare_cached(
        "INSERT OR IGNORE INTO sync_space_log (space, seq, event_id, created_at, envelope)
         SELECT ?1, COALESCE(MAX(seq), 0) + 1, ?2, ?3, ?4 FROM sync_space_log WHERE space = ?1",
    )?
    .execute(params![space, event_id, nmem_proto::now_ms(), envelope])?;
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
    let routes = ROUTES.read().unwrap_or_else(|p| p.into_inner());
    let Some(r) = routes.as_ref() else {
        return (true, Vec::new());
    };
    let personal = !r.excluded.contains(&ev.project.name);
    let teams = r
        .shares
        .get(&ev.project.name)
        .map(|v| {
            v.iter()
                .filter(|(_, x)| x.allows(&ev.record))
                .map(|(s, _)| s.clone())
                .collect()
        })
        .unwrap_or_default();
    (personal, teams)
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
