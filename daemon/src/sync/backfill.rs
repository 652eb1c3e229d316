//! Backfill (docs/sync.md, "Backfill"): history stored before `nmem sync enable` or `join` (and
//! before a project is shared with a team space) enters the space's stream too.
//!
//! The unit is the one the writer logs: the envelope of a [`Prepared`] event
//! ([`super::envelope::Envelope::of`]). Rows stored before sync was on have no logged envelope,
//! so each is re-derived from its stored row and its session's row ([`prepared_of`]) under its
//! own event id, and appended to the stream like an event the writer logs now. A job
//! (`sync_backfill`, migration 020) walks the rows that existed when it began in the order they
//! were recorded (timestamp; a prompt before an observation of the same millisecond; row id),
//! [`BATCH`] rows per writer transaction, which also moves the job's cursor: a crash resumes
//! after the last committed batch, and nothing is logged twice. Capture never waits: each batch
//! is its own short transaction on the writer, between the queued events.
//!
//! Not logged: rows without an event id, rows received from another device (their `origin`
//! column, migration 017, is set: they belong to their origin's stream), forgotten ones (`sync_tombstones`), what routing
//! keeps out of the space (an excluded project; for a team, types the share does not carry),
//! what the stream holds already, and (checked on the server by the round, [`commit`]'s
//! `present`) what the space holds already under another device id: this home before it left
//! and joined again, or the same event recorded in another home.
//!
//! Knowledge items and pins made before are logged once a job's rows are done ([`extras`]), so
//! that the events a pin names are in the stream before it: each knowledge item of the job's
//! scope as it is now (its status and pin included; an item written before migration 019 gets
//! its uid then; a saved memory's note follows its memory's row), and a pin of each pinned row
//! whose event the stream holds. A team's job carries the shared project's items (a team takes
//! knowledge items by default). What is sent twice (a second job after `leave` and `join`) is
//! applied once: an item is named by its uid, a pin sets a flag.
//!
//! A personal-stream entry keeps its row's id (`sync_log.row_id`) as the writer's do, so that
//! `nmem rebuild` restores the row under its own id. Reasoning is stored as its own prompt row
//! (its own event id), so a backfilled entry has no thought ids: each thought is its own entry.

use super::envelope::{Edit, Envelope, KnowledgeEvent};
use super::log::{self, Stream};
use super::space::ServerIds;
use crate::app::App;
use crate::ingest::{NewPrompt, Obs, Prepared, Project, Record, SessionEffect};
use crate::store::writer::RowIds;
use nmem_proto::harness::{Event, Harness};
use nmem_proto::sync::Backfill;
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::collections::{HashMap, HashSet};

/// Rows looked at per batch: one writer transaction, one server query.
pub const BATCH: usize = 500;

/// Where a job is: the last row looked at (timestamp, 0 prompt / 1 observation, row id).
type Cursor = (i64, i64, i64);

/// Before the first row.
const START: Cursor = (i64::MIN, -1, 0);

/// Begin (or begin again) the job of `space`: every row stored so far (`project` '': every
/// project; else that project's rows only). Rows stored after this are logged by the writer.
pub fn plan(conn: &Connection, space: &str, project: &str) -> rusqlite::Result<()> {
    let (obs_upto, prompts_upto): (i64, i64) = conn.query_row(
        "SELECT (SELECT COALESCE(MAX(id), 0) FROM observations),
                (SELECT COALESCE(MAX(id), 0) FROM prompts)",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let total: i64 = conn.query_row(
        "SELECT (SELECT COUNT(*) FROM observations
                 WHERE id <= ?1 AND origin IS NULL AND (?3 = '' OR project = ?3))
              + (SELECT COUNT(*) FROM prompts
                 WHERE id <= ?2 AND origin IS NULL AND (?3 = '' OR project = ?3))",
        params![obs_upto, prompts_upto, project],
        |r| r.get(0),
    )?;
    // Nothing to look at: done at once, unless there are knowledge items to send ([`extras`]).
    let items: bool = conn.query_row(
        "SELECT EXISTS (SELECT 1 FROM knowledge WHERE obs_id IS NULL AND (?1 = '' OR project = ?1))",
        [project],
        |r| r.get(0),
    )?;
    let now = nmem_proto::now_ms();
    conn.execute(
        "INSERT OR REPLACE INTO sync_backfill
           (space, project, obs_upto, prompts_upto, at_time, at_kind, at_id, total, done,
            started_at, finished_at)
         VALUES (?1, ?2, ?3, ?4, NULL, 0, 0, ?5, 0, ?6, CASE WHEN ?5 = 0 AND NOT ?7 THEN ?6 END)",
        params![space, project, obs_upto, prompts_upto, total, now, items],
    )?;
    Ok(())
}

/// Forget the jobs of `space` (of one project, or all).
pub fn drop_jobs(conn: &Connection, space: &str, project: Option<&str>) -> rusqlite::Result<()> {
    conn.execute(
        "DELETE FROM sync_backfill WHERE space = ?1 AND (?2 IS NULL OR project = ?2)",
        params![space, project],
    )?;
    Ok(())
}

/// Every job together: rows looked at out of rows to look at (None: no job was ever planned).
pub fn progress(conn: &Connection) -> rusqlite::Result<Option<Backfill>> {
    conn.query_row(
        "SELECT COUNT(*), COALESCE(SUM(done), 0), COALESCE(SUM(total), 0),
                COUNT(*) FILTER (WHERE finished_at IS NULL)
         FROM sync_backfill",
        [],
        |r| {
            let jobs: i64 = r.get(0)?;
            Ok((jobs > 0).then(|| Backfill {
                done: r.get(1).unwrap_or(0),
                total: r.get(2).unwrap_or(0),
                running: r.get::<_, i64>(3).unwrap_or(0) > 0,
            }))
        },
    )
}

/// One batch of a job, derived on the writer and committed by [`commit`].
#[derive(Debug)]
pub struct Batch {
    pub space: String,
    pub project: String,
    /// The personal space (else a team space).
    pub personal: bool,
    from: Cursor,
    through: Cursor,
    looked: i64,
    /// No row after this batch: the job ends with it.
    pub finished: bool,
    /// What to log: (local event id, envelope, the row's id).
    pub events: Vec<(String, Vec<u8>, i64)>,
}

/// A stored row, as the backfill reads it.
enum Row {
    Obs {
        key: Cursor,
        session_id: String,
        obs_type: String,
        source_event: String,
        tool_name: Option<String>,
        file_path: Option<String>,
        rel_path: Option<String>,
        content: String,
        metadata: Option<String>,
        project: String,
        project_root: Option<String>,
        harness: String,
        event_id: Option<String>,
        tool_use_id: Option<String>,
        redacted: bool,
    },
    Prompt {
        key: Cursor,
        session_id: String,
        source: String,
        content: String,
        project: String,
        harness: String,
        event_id: Option<String>,
        prompt_uid: Option<String>,
        redacted: bool,
    },
}

impl Row {
    fn key(&self) -> Cursor {
        match self {
            Row::Obs { key, .. } | Row::Prompt { key, .. } => *key,
        }
    }

    fn row_id(&self) -> i64 {
        self.key().2
    }

    fn event_id(&self) -> Option<&str> {
        match self {
            Row::Obs { event_id, .. } | Row::Prompt { event_id, .. } => event_id.as_deref(),
        }
    }

    fn session_id(&self) -> &str {
        match self {
            Row::Obs { session_id, .. } | Row::Prompt { session_id, .. } => session_id,
        }
    }
}

/// What the backfill takes from a row's session.
#[derive(Debug, Clone, Default)]
pub struct Session {
    pub cwd: Option<String>,
    pub project_root: Option<String>,
    pub worktree: Option<String>,
    pub branch: Option<String>,
    pub transcript_path: Option<String>,
}

fn session(conn: &Connection, id: &str) -> rusqlite::Result<Session> {
    Ok(conn
        .prepare_cached(
            "SELECT cwd, project_root, worktree, branch, transcript_path FROM sessions WHERE id = ?1",
        )?
        .query_row([id], |r| {
            Ok(Session {
                cwd: r.get(0)?,
                project_root: r.get(1)?,
                worktree: r.get(2)?,
                branch: r.get(3)?,
                transcript_path: r.get(4)?,
            })
        })
        .optional()?
        .unwrap_or_default())
}

/// Up to `limit` rows of each table after `at` (through the job's last ids), in order.
fn rows(
    conn: &Connection,
    at: Cursor,
    upto: (i64, i64),
    project: &str,
    limit: usize,
) -> rusqlite::Result<Vec<Row>> {
    let only = if project.is_empty() {
        ""
    } else {
        "AND project = ?6"
    };
    // `timestamp >= ?1` first: the range on the time (or project, time) index.
    let after = |kind: i64| {
        format!(
            "timestamp >= ?1 AND (timestamp > ?1 OR {kind} > ?2 OR ({kind} = ?2 AND id > ?3))
             AND id <= ?4 AND origin IS NULL {only} ORDER BY timestamp, id LIMIT ?5"
        )
    };
    let limit = limit as i64;
    let mut out = Vec::new();
    let mut st = conn.prepare_cached(&format!(
        "SELECT id, timestamp, session_id, obs_type, source_event, tool_name, file_path, rel_path,
                content, metadata, project, project_root, harness, event_id, tool_use_id, redacted
         FROM observations WHERE {}",
        after(1)
    ))?;
    let map_obs = |r: &rusqlite::Row| -> rusqlite::Result<Row> {
        Ok(Row::Obs {
            key: (r.get(1)?, 1, r.get(0)?),
            session_id: r.get(2)?,
            obs_type: r.get(3)?,
            source_event: r.get(4)?,
            tool_name: r.get(5)?,
            file_path: r.get(6)?,
            rel_path: r.get(7)?,
            content: r.get(8)?,
            metadata: r.get(9)?,
            project: r.get(10)?,
            project_root: r.get(11)?,
            harness: r.get(12)?,
            event_id: r.get(13)?,
            tool_use_id: r.get(14)?,
            redacted: r.get::<_, i64>(15)? != 0,
        })
    };
    // The parameters up to the table's last id `hi`; the project only when the statement names
    // it (`only`).
    let bind = |hi: i64| {
        let mut p: Vec<rusqlite::types::Value> = vec![
            at.0.into(),
            at.1.into(),
            at.2.into(),
            hi.into(),
            limit.into(),
        ];
        if !project.is_empty() {
            p.push(project.to_string().into());
        }
        rusqlite::params_from_iter(p)
    };
    let obs = st
        .query_map(bind(upto.0), map_obs)?
        .collect::<Result<Vec<_>, _>>()?;
    out.extend(obs);
    let mut st = conn.prepare_cached(&format!(
        "SELECT id, timestamp, session_id, source, content, project, harness, event_id,
                prompt_uid, redacted
         FROM prompts WHERE {}",
        after(0)
    ))?;
    let map_prompt = |r: &rusqlite::Row| -> rusqlite::Result<Row> {
        Ok(Row::Prompt {
            key: (r.get(1)?, 0, r.get(0)?),
            session_id: r.get(2)?,
            source: r.get(3)?,
            content: r.get(4)?,
            project: r.get(5)?,
            harness: r.get(6)?,
            event_id: r.get(7)?,
            prompt_uid: r.get(8)?,
            redacted: r.get::<_, i64>(9)? != 0,
        })
    };
    let prompts = st
        .query_map(bind(upto.1), map_prompt)?
        .collect::<Result<Vec<_>, _>>()?;
    out.extend(prompts);
    out.sort_by_key(Row::key);
    out.truncate(limit as usize);
    Ok(out)
}

/// The event the writer stored as `row`, re-derived: the record from the row, the session's
/// change from the observation's type, where it ran from the session's row.
///
/// What the rows do not keep is approximated: `cwd` is the session's first working directory,
/// the branch is the session's latest (on its start events), `redactions` is 1 for a redacted
/// row, a prompt's `event_name` is `prompt` (or `reasoning` for the agent's), and reasoning
/// stored before an event is its own event (an agent prompt under its own id), as it is stored.
/// `None` for a row this build cannot name (an unknown harness or observation type).
fn prepared_of(row: &Row, s: &Session) -> Option<Prepared> {
    let harness_of = |h: &str| -> Option<(&'static str, Option<Harness>)> {
        if h == "nmem" {
            return Some(("nmem", None));
        }
        let parsed = Harness::parse(h)?;
        Some((parsed.as_str(), Some(parsed)))
    };
    let event_id = row.event_id()?.to_string();
    let cwd = s.cwd.clone().unwrap_or_default();
    match row {
        Row::Obs {
            key,
            session_id,
            obs_type,
            source_event,
            tool_name,
            file_path,
            rel_path,
            content,
            metadata,
            project,
            project_root,
            harness,
            tool_use_id,
            redacted,
            ..
        } => {
            let (harness, parsed) = harness_of(harness)?;
            let obs_type = nmem_proto::obs::ObsType::from_name(obs_type)?.name();
            let metadata: serde_json::Map<String, serde_json::Value> = metadata
                .as_deref()
                .and_then(|m| serde_json::from_str(m).ok())
                .unwrap_or_default();
            let text = |k: &str| metadata.get(k).and_then(|v| v.as_str()).map(str::to_string);
            let (event, effect) = match obs_type {
                "session_start" | "session_resume" | "session_clear" | "session_compact"
                | "session_fork" => (
                    Event::SessionStart,
                    SessionEffect::Start {
                        source: content.clone(),
                        model: text("model"),
                        title: text("title"),
                        transcript_path: s.transcript_path.clone(),
                    },
                ),
                "compaction" => (Event::PreCompact, SessionEffect::Compaction),
                "compact_summary" => (Event::PostCompact, SessionEffect::None),
                "turn_end" => (Event::Stop, SessionEffect::TurnEnd),
                "subagent_end" => (Event::SubagentStop, SessionEffect::SubagentEnd),
                "api_error" => (Event::StopFailure, SessionEffect::None),
                "session_end" => (
                    Event::SessionEnd,
                    SessionEffect::End {
                        reason: text("reason"),
                    },
                ),
                _ => (
                    parsed
                        .and_then(|h| Event::from_name(h, source_event))
                        .unwrap_or(Event::ToolUse),
                    SessionEffect::None,
                ),
            };
            let starts = matches!(effect, SessionEffect::Start { .. });
            Some(Prepared {
                event_id,
                received_at: key.0,
                harness,
                session_id: session_id.clone(),
                cwd,
                project: Project {
                    name: project.clone(),
                    root: project_root
                        .clone()
                        .or_else(|| s.project_root.clone())
                        .unwrap_or_default(),
                    worktree: s.worktree.clone(),
                    git_dir: None,
                    branch: if starts { s.branch.clone() } else { None },
                },
                event,
                event_name: source_event.clone(),
                record: Record::Observation(Obs {
                    obs_type,
                    tool_name: tool_name.clone(),
                    file_path: file_path.clone(),
                    rel_path: rel_path.clone(),
                    content: content.clone(),
                    metadata,
                    tool_use_id: tool_use_id.clone(),
                    dedup_target: None,
                }),
                effect,
                thoughts: Vec::new(),
                transcript_offset: None,
                redactions: u32::from(*redacted),
            })
        }
        Row::Prompt {
            key,
            session_id,
            source,
            content,
            project,
            harness,
            prompt_uid,
            redacted,
            ..
        } => {
            let (harness, _) = harness_of(harness)?;
            let source: &'static str = match source.as_str() {
                "user" => "user",
                "agent" => "agent",
                _ => return None,
            };
            Some(Prepared {
                event_id,
                received_at: key.0,
                harness,
                session_id: session_id.clone(),
                cwd,
                project: Project {
                    name: project.clone(),
                    root: s.project_root.clone().unwrap_or_default(),
                    worktree: s.worktree.clone(),
                    git_dir: None,
                    branch: None,
                },
                event: Event::UserPrompt,
                event_name: if source == "user" {
                    "prompt"
                } else {
                    "reasoning"
                }
                .into(),
                record: Record::Prompt(NewPrompt {
                    source,
                    content: content.clone(),
                    prompt_uid: prompt_uid.clone(),
                }),
                effect: SessionEffect::None,
                thoughts: Vec::new(),
                transcript_offset: None,
                redactions: u32::from(*redacted),
            })
        }
    }
}

fn exists(conn: &Connection, sql: &str, p: impl rusqlite::Params) -> rusqlite::Result<bool> {
    Ok(conn
        .prepare_cached(sql)?
        .query_row(p, |r| r.get::<_, i64>(0))?
        != 0)
}

/// Whether `id` is already in the stream of the job's space.
fn logged(conn: &Connection, personal: bool, space: &str, id: &str) -> rusqlite::Result<bool> {
    if personal {
        exists(
            conn,
            "SELECT EXISTS (SELECT 1 FROM sync_log WHERE event_id = ?1)",
            [id],
        )
    } else {
        exists(
            conn,
            "SELECT EXISTS (SELECT 1 FROM sync_space_log WHERE space = ?1 AND event_id = ?2)",
            [space, id],
        )
    }
}

/// The next batch of the first unfinished job (the personal space's first), or None.
pub fn next(conn: &Connection, limit: usize) -> rusqlite::Result<Option<Batch>> {
    let job = conn
        .query_row(
            "SELECT space, project, obs_upto, prompts_upto, at_time, at_kind, at_id
             FROM sync_backfill WHERE finished_at IS NULL
             ORDER BY project <> '', space, project LIMIT 1",
            [],
            |r| {
                let at = match r.get::<_, Option<i64>>(4)? {
                    None => START,
                    Some(t) => (t, r.get(5)?, r.get(6)?),
                };
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    (r.get::<_, i64>(2)?, r.get::<_, i64>(3)?),
                    at,
                ))
            },
        )
        .optional()?;
    let Some((space, project, upto, from)) = job else {
        return Ok(None);
    };
    let personal = project.is_empty();
    let found = rows(conn, from, upto, &project, limit)?;
    let mut batch = Batch {
        personal,
        from,
        through: found.last().map_or(from, Row::key),
        looked: found.len() as i64,
        finished: found.len() < limit,
        events: Vec::new(),
        space,
        project,
    };
    let mut sessions: HashMap<String, Session> = HashMap::new();
    for row in &found {
        let Some(id) = row.event_id() else { continue };
        if super::tombstone::is_forgotten(conn, id)? || logged(conn, personal, &batch.space, id)? {
            continue;
        }
        if !sessions.contains_key(row.session_id()) {
            let s = session(conn, row.session_id())?;
            sessions.insert(row.session_id().to_string(), s);
        }
        let Some(ev) = prepared_of(row, &sessions[row.session_id()]) else {
            tracing::warn!("sync backfill: event {id} names a harness or type this nmem does not know; not sent");
            continue;
        };
        let (to_personal, teams) = log::route(&ev);
        let routed = if personal {
            to_personal
        } else {
            teams.contains(&batch.space)
        };
        if !routed {
            continue;
        }
        if let Some(env) = Envelope::of(&ev) {
            batch
                .events
                .push((ev.event_id, env.to_bytes(), row.row_id()));
        }
    }
    Ok(Some(batch))
}

/// Log `batch`'s events (but those in `present`: the space holds them under another device
/// id) and move its job's cursor, in one transaction. Nothing happens if the job moved since
/// [`next`] (planned again, or dropped). An event whose row is gone meanwhile (purged, swept)
/// is not logged. Returns how many were logged.
pub fn commit(
    conn: &mut Connection,
    batch: &Batch,
    present: &HashSet<String>,
) -> rusqlite::Result<usize> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let at: Option<Cursor> = tx
        .query_row(
            "SELECT at_time, at_kind, at_id FROM sync_backfill
             WHERE space = ?1 AND project = ?2 AND finished_at IS NULL",
            params![batch.space, batch.project],
            |r| {
                Ok(match r.get::<_, Option<i64>>(0)? {
                    None => START,
                    Some(t) => (t, r.get(1)?, r.get(2)?),
                })
            },
        )
        .optional()?;
    if at != Some(batch.from) {
        return Ok(0);
    }
    let mut n = 0;
    for (id, envelope, row_id) in &batch.events {
        if present.contains(id)
            || super::tombstone::is_forgotten(&tx, id)?
            || logged(&tx, batch.personal, &batch.space, id)?
            || !exists(
                &tx,
                "SELECT EXISTS (SELECT 1 FROM observations WHERE event_id = ?1)
                     OR EXISTS (SELECT 1 FROM prompts WHERE event_id = ?1)",
                [id],
            )?
        {
            continue;
        }
        if batch.personal {
            let ids = RowIds {
                record: Some(*row_id),
                thoughts: Vec::new(),
            };
            log::append_row(&tx, &Stream::Personal, id, envelope, Some(&ids))?;
        } else {
            log::append_to(&tx, &Stream::Team(batch.space.clone()), id, envelope)?;
        }
        n += 1;
    }
    if batch.finished {
        n += extras(&tx, batch)?;
    }
    let now = nmem_proto::now_ms();
    tx.execute(
        "UPDATE sync_backfill SET at_time = ?3, at_kind = ?4, at_id = ?5,
           done = CASE WHEN ?7 THEN total ELSE MIN(total, done + ?6) END,
           finished_at = CASE WHEN ?7 THEN ?8 END
         WHERE space = ?1 AND project = ?2",
        params![
            batch.space,
            batch.project,
            batch.through.0,
            batch.through.1,
            batch.through.2,
            batch.looked,
            batch.finished,
            now
        ],
    )?;
    tx.commit()?;
    Ok(n)
}

/// The end of a job: log the knowledge items and pins of its scope (see the module's notes).
/// Returns how many were logged.
fn extras(conn: &Connection, batch: &Batch) -> rusqlite::Result<usize> {
    let stream = if batch.personal {
        Stream::Personal
    } else {
        Stream::Team(batch.space.clone())
    };
    let in_scope = |project: &str| {
        if batch.personal {
            log::carries_personal(project)
        } else {
            project == batch.project
        }
    };
    let mut n = 0;
    let items: Vec<(i64, String, bool)> = conn
        .prepare(
            "SELECT id, project, uid IS NULL FROM knowledge
              WHERE obs_id IS NULL AND (?1 = '' OR project = ?1) ORDER BY id",
        )?
        .query_map([&batch.project], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (id, project, no_uid) in items {
        if !in_scope(&project) {
            continue;
        }
        if no_uid {
            conn.execute(
                "UPDATE knowledge SET uid = ?2 WHERE id = ?1 AND uid IS NULL",
                params![id, log::random_id("k")?],
            )?;
        }
        let Some((project, item)) = crate::knowledge::item_of(conn, id)? else {
            continue;
        };
        let eid = log::random_id("knowledge")?;
        let env = Envelope::knowledge(eid.clone(), &project, KnowledgeEvent::Item(Box::new(item)));
        log::append_to(conn, &stream, &eid, &env.to_bytes())?;
        n += 1;
    }
    let pins: Vec<(String, String)> = conn
        .prepare(
            "SELECT project, event_id FROM observations
              WHERE is_pinned = 1 AND event_id IS NOT NULL AND (?1 = '' OR project = ?1)
              ORDER BY id",
        )?
        .query_map([&batch.project], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (project, target) in pins {
        if !in_scope(&project) || !logged(conn, batch.personal, &batch.space, &target)? {
            continue;
        }
        let eid = log::random_id("edit")?;
        let edit = Edit::Pin {
            target,
            pinned: true,
        };
        log::append_to(
            conn,
            &stream,
            &eid,
            &Envelope::edit(eid.clone(), &project, edit).to_bytes(),
        )?;
        n += 1;
    }
    Ok(n)
}

/// One batch of the backfill, as a round's first step: derived on the writer, checked against
/// what the space holds already (by the ids the push would give its events), logged with its
/// cursor on the writer. Another round follows at once while there is more.
pub async fn step(
    app: &App,
    client: &tokio_postgres::Client,
    st: &log::State,
) -> Result<(), String> {
    let Some(batch) = app
        .writer
        .exec(|c| Ok(next(c, BATCH)?))
        .await
        .map_err(|e| e.to_string())?
    else {
        return Ok(());
    };
    let ids = if batch.personal {
        ServerIds::Personal(st.key.clone())
    } else {
        let me = app
            .writer
            .exec(|c| Ok(super::team::identity(c)?))
            .await
            .map_err(|e| e.to_string())?;
        ServerIds::Team(me)
    };
    let named: Vec<(String, String)> = batch
        .events
        .iter()
        .map(|(id, _, _)| (id.clone(), ids.of(&batch.space, id)))
        .collect();
    let server_ids: Vec<String> = named.iter().map(|(_, s)| s.clone()).collect();
    let on_server = super::remote::present(client, &batch.space, &server_ids).await?;
    let present: HashSet<String> = named
        .into_iter()
        .filter(|(_, s)| on_server.contains(s))
        .map(|(id, _)| id)
        .collect();
    let finished = batch.finished;
    app.writer
        .exec(move |c| Ok(commit(c, &batch, &present)?))
        .await
        .map_err(|e| e.to_string())?;
    if !finished {
        app.sync.wake.notify_one();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::reasoning::Thought;
    use crate::sync::envelope::sample;
    use serde_json::json;

    fn open() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        (dir, c)
    }

    /// Store `ev` as captured on this device (no origin).
    fn store(c: &Connection, ev: &Prepared) -> bool {
        let mut place = crate::store::writer::Placement::default();
        crate::store::writer::apply_inbound(c, ev, &mut place).unwrap()
    }

    fn obs(id: &str, t: i64, obs_type: &'static str, content: &str) -> Prepared {
        let mut ev = sample(id, content);
        ev.received_at = t;
        if let Record::Observation(o) = &mut ev.record {
            o.obs_type = obs_type;
        }
        ev
    }

    /// A session as the writer stores one: a start (with model, title, branch), a prompt with
    /// reasoning before it, a tool call with metadata, a redacted one, a turn end, an end.
    fn session_events() -> Vec<Prepared> {
        let mut start = obs("s-start", 1_000, "session_start", "startup");
        start.event = Event::SessionStart;
        start.event_name = "SessionStart".into();
        start.project.branch = Some("main".into());
        start.project.worktree = Some("/home/dev/app-wt".into());
        if let Record::Observation(o) = &mut start.record {
            o.tool_name = None;
            o.metadata = json!({"model": "opus", "title": "fix retries"})
                .as_object()
                .unwrap()
                .clone();
        }
        start.effect = SessionEffect::Start {
            source: "startup".into(),
            model: Some("opus".into()),
            title: Some("fix retries".into()),
            transcript_path: Some("/home/dev/.claude/t.jsonl".into()),
        };
        let mut prompt = sample("s-prompt", "");
        prompt.received_at = 2_000;
        prompt.project.worktree = Some("/home/dev/app-wt".into());
        prompt.event = Event::UserPrompt;
        prompt.record = Record::Prompt(NewPrompt {
            source: "user",
            content: "why do retries fail?".into(),
            prompt_uid: Some("p-1".into()),
        });
        prompt.thoughts = vec![Thought {
            uid: "s-thought".into(),
            timestamp: 1_500,
            content: "look at the backoff".into(),
        }];
        let mut call = obs("s-call", 3_000, "command", "cargo test");
        call.project.worktree = Some("/home/dev/app-wt".into());
        if let Record::Observation(o) = &mut call.record {
            o.tool_use_id = Some("toolu_1".into());
            o.file_path = Some("/home/dev/app/src/retry.rs".into());
            o.rel_path = Some("src/retry.rs".into());
            o.metadata = json!({"exit_code": 1}).as_object().unwrap().clone();
        }
        let mut secret = obs("s-secret", 3_000, "command", "token [REDACTED]");
        secret.project.worktree = Some("/home/dev/app-wt".into());
        secret.redactions = 1;
        let mut turn = obs("s-turn", 4_000, "turn_end", "retries fixed");
        turn.project.worktree = Some("/home/dev/app-wt".into());
        turn.event = Event::Stop;
        turn.event_name = "Stop".into();
        turn.effect = SessionEffect::TurnEnd;
        let mut end = obs("s-end", 5_000, "session_end", "session ended (logout)");
        end.project.worktree = Some("/home/dev/app-wt".into());
        end.event = Event::SessionEnd;
        end.event_name = "SessionEnd".into();
        end.effect = SessionEffect::End {
            reason: Some("logout".into()),
        };
        if let Record::Observation(o) = &mut end.record {
            o.metadata = json!({"reason": "logout"}).as_object().unwrap().clone();
        }
        vec![start, prompt, call, secret, turn, end]
    }

    fn all(c: &Connection) -> Vec<(String, Envelope)> {
        let b = next(c, 1_000).unwrap().expect("a job");
        assert!(b.finished);
        b.events
            .into_iter()
            .map(|(id, bytes, _)| (id, Envelope::from_bytes(&bytes).unwrap()))
            .collect()
    }

    #[test]
    fn a_stored_event_is_re_derived_as_the_writer_logged_it() {
        let (_d, c) = open();
        let events = session_events();
        for ev in &events {
            assert!(store(&c, ev));
        }
        plan(&c, "space", "").unwrap();
        let derived = all(&c);
        // In recorded order, the reasoning as its own event before its prompt; ids kept.
        let ids: Vec<&str> = derived.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "s-start",
                "s-thought",
                "s-prompt",
                "s-call",
                "s-secret",
                "s-turn",
                "s-end"
            ]
        );
        for ev in &events {
            let (_, got) = derived.iter().find(|(id, _)| *id == ev.event_id).unwrap();
            let mut want = Envelope::of(ev).unwrap();
            // What the rows do not keep (documented on `prepared_of`).
            want.thoughts.clear();
            if !matches!(ev.effect, SessionEffect::Start { .. }) {
                want.project.branch = None;
            }
            if let crate::sync::envelope::EnvRecord::Prompt { .. } = want.record {
                want.event_name = "prompt".into();
            }
            assert_eq!(got, &want, "{}", ev.event_id);
            // And it is an envelope another device stores.
            got.clone().into_prepared().unwrap();
        }
        let (_, thought) = &derived[1];
        assert!(matches!(
            &thought.record,
            crate::sync::envelope::EnvRecord::Prompt { source, content, .. }
                if source == "agent" && content == "look at the backoff"
        ));
    }

    #[test]
    fn batches_resume_where_the_last_commit_ended_and_log_nothing_twice() {
        let (_d, mut c) = open();
        for i in 0..25 {
            // Equal timestamps in pairs: the order falls back on the row id.
            let ev = obs(
                &format!("e{i}"),
                1_000 + i / 2,
                "command",
                &format!("c {i}"),
            );
            assert!(store(&c, &ev));
        }
        // One came from another device (its row has an origin), one was forgotten: neither is
        // logged, and the one received is not counted.
        c.execute_batch(
            "INSERT INTO sync_sources (id, kind, space, device) VALUES (7, 'my-devices', 'space', 'other');
             UPDATE observations SET origin = 7 WHERE event_id = 'e3';",
        )
        .unwrap();
        c.execute(
            "INSERT INTO sync_tombstones (event_id, forgotten_at) VALUES ('e4', 0)",
            [],
        )
        .unwrap();
        plan(&c, "space", "").unwrap();
        assert_eq!(
            progress(&c).unwrap(),
            Some(Backfill {
                done: 0,
                total: 24,
                running: true
            })
        );
        // A batch derived but not committed (a crash) changes nothing.
        let lost = next(&c, 10).unwrap().unwrap();
        assert_eq!(lost.events.len(), 9);
        let mut batches = 0;
        let present: HashSet<String> = ["e7".to_string()].into();
        while let Some(b) = next(&c, 10).unwrap() {
            commit(&mut c, &b, &present).unwrap();
            // A stale batch (committed already) is refused.
            assert_eq!(commit(&mut c, &b, &present).unwrap(), 0);
            batches += 1;
        }
        assert_eq!(batches, 3);
        let logged: Vec<String> = c
            .prepare("SELECT event_id FROM sync_log ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let want: Vec<String> = (0..25)
            .filter(|i| ![3, 4, 7].contains(i))
            .map(|i| format!("e{i}"))
            .collect();
        assert_eq!(logged, want);
        // Each entry names its row, as the writer's do (`nmem rebuild` restores it there).
        let unnamed: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM sync_log l
                 WHERE l.row_id IS NOT (SELECT id FROM observations o WHERE o.event_id = l.event_id)",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(unnamed, 0);
        assert_eq!(
            progress(&c).unwrap(),
            Some(Backfill {
                done: 24,
                total: 24,
                running: false
            })
        );
        // Planned again (a share changed, a re-join): nothing already in the stream again.
        plan(&c, "space", "").unwrap();
        while let Some(b) = next(&c, 10).unwrap() {
            commit(&mut c, &b, &HashSet::new()).unwrap();
        }
        let n: i64 = c
            .query_row("SELECT COUNT(*) FROM sync_log", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 23, "only e7 (no longer on the server) joins the stream");
    }

    #[test]
    fn a_team_job_takes_its_project_and_the_shared_types_only() {
        let (_d, mut c) = open();
        let mut other = obs("o1", 1_000, "git_commit", "elsewhere");
        other.project.name = "other".into();
        for ev in [
            obs("a1", 1_000, "git_commit", "commit"),
            obs("a2", 1_001, "command", "ls"),
            obs("a3", 1_002, "command_error", "boom"),
            other,
        ] {
            assert!(store(&c, &ev));
        }
        c.execute_batch(
            "INSERT INTO sync_spaces (space, kind, key_id, role, created_at)
               VALUES ('team', 'team', 'k', 'owner', 0);
             INSERT INTO sync_shares (project, space, extra) VALUES ('app', 'team', '');",
        )
        .unwrap();
        log::load_routes(&c).unwrap();
        plan(&c, "team", "app").unwrap();
        let b = next(&c, 100).unwrap().unwrap();
        assert!(!b.personal && b.finished);
        commit(&mut c, &b, &HashSet::new()).unwrap();
        let ids: Vec<String> = c
            .prepare("SELECT event_id FROM sync_space_log WHERE space = 'team' ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(ids, ["a1", "a3"]);
        assert_eq!(progress(&c).unwrap().unwrap().total, 3);
        // The routes are the process's: leave them routing nothing to a team.
        c.execute("DELETE FROM sync_shares", []).unwrap();
        log::load_routes(&c).unwrap();
    }

    #[test]
    fn a_job_with_only_knowledge_items_sends_them_and_gives_an_old_item_its_uid() {
        let (_d, mut c) = open();
        // One item with a uid, one written before migration 019 (none); no rows at all.
        c.execute_batch(
            "INSERT INTO knowledge (class, kind, project, scope, title, summary, reason,
                                    memory_source, status, is_pinned, created_at, updated_at, uid)
             VALUES ('knowledge', 'decision', 'p', 'project', 'keyset pages', '', 'measured',
                     'user_declared', 'active', 1, 1, 1, 'k-1'),
                    ('knowledge', 'decision', 'p', 'project', 'ledger rows', '', 'audited',
                     'user_declared', 'active', 0, 2, 2, NULL);",
        )
        .unwrap();
        plan(&c, "space", "").unwrap();
        assert_eq!(progress(&c).unwrap().map(|b| b.running), Some(true));
        let b = next(&c, 10).unwrap().expect("the job runs for its items");
        assert!(b.finished && b.events.is_empty());
        assert_eq!(commit(&mut c, &b, &HashSet::new()).unwrap(), 2);
        assert!(next(&c, 10).unwrap().is_none());
        let logged: Vec<Envelope> = c
            .prepare("SELECT envelope FROM sync_log ORDER BY seq")
            .unwrap()
            .query_map([], |r| r.get::<_, Vec<u8>>(0))
            .unwrap()
            .map(|e| Envelope::from_bytes(&e.unwrap()).unwrap())
            .collect();
        let items: Vec<(String, String, bool)> = logged
            .iter()
            .map(|e| match &e.knowledge {
                Some(KnowledgeEvent::Item(it)) => (it.uid.clone(), it.title.clone(), it.is_pinned),
                other => panic!("not an item: {other:?}"),
            })
            .collect();
        let uid: String = c
            .query_row(
                "SELECT uid FROM knowledge WHERE title = 'ledger rows'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(uid.starts_with("k-"), "{uid}");
        assert_eq!(
            items,
            [
                ("k-1".to_string(), "keyset pages".to_string(), true),
                (uid, "ledger rows".to_string(), false)
            ]
        );
    }
}
