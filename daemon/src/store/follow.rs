//! What storing a row changes besides the row: the writer's follow-ups to its inserts.
//!
//! These were `AFTER INSERT` triggers (migrations 008 and 010) until migration 011 dropped them.
//! A trigger on a table makes every insert into it a statement SQLite must be able to roll back
//! alone, so each insert copied the pages it touched to a statement journal first (14% of the
//! writer's time under a stream of events). The writer knows each row's type, path and project
//! without reading them back, so it does the same work here, in the same transaction as the
//! insert:
//!
//! * the SessionStart digest's change counters (`digest_gen`, `digest_gen_all`; see
//!   `context::DigestCache`): collected in [`Generations`] and bumped once per project per
//!   transaction ([`Generations::flush`]) instead of once per row. A reader only compares them
//!   for equality, so one bump per commit says the same as one per row;
//! * a saved memory (an observation of type `memory`) becomes a knowledge `note` with its
//!   `created` audit row ([`observation_inserted`]);
//! * an edit or write of a file that an active knowledge item's evidence names flags the item
//!   possibly stale, once, with a `stale` audit row ([`observation_inserted`]).
//!
//! Updates and deletes keep their triggers: they come from several places (re-redaction, pins,
//! retention, purges) and are not on the ingest path.

use rusqlite::{params, Connection};
use std::collections::BTreeSet;

/// What a follow-up needs to know of an observation just inserted.
#[derive(Debug, Clone, Copy)]
pub struct Inserted<'a> {
    pub id: i64,
    pub timestamp: i64,
    pub obs_type: &'a str,
    pub file_path: Option<&'a str>,
    pub project: &'a str,
}

/// The digest counters a transaction has to bump before it commits.
#[derive(Debug, Default)]
pub struct Generations {
    projects: BTreeSet<String>,
    /// A user prompt of any project: the digest's "Elsewhere" section.
    all: bool,
}

impl Generations {
    /// An observation of `project` of type `obs_type` was inserted. Session bookkeeping
    /// (`session_*`) is never shown by the digest, so a SessionStart does not invalidate the
    /// digest it is about to read (the trigger's `NOT LIKE 'session\_%'`, case-insensitive as
    /// LIKE is).
    pub fn observation(&mut self, project: &str, obs_type: &str) {
        let bookkeeping = obs_type
            .as_bytes()
            .get(..8)
            .is_some_and(|p| p.eq_ignore_ascii_case(b"session_"));
        if !bookkeeping {
            self.project(project);
        }
    }

    /// A prompt of `project` with `source` (`user`, `agent`) was inserted.
    pub fn prompt(&mut self, project: &str, source: &str) {
        self.project(project);
        self.all |= source == "user";
    }

    fn project(&mut self, project: &str) {
        if !self.projects.contains(project) {
            self.projects.insert(project.to_owned());
        }
    }

    /// Take in what another (committed) part of the transaction collected.
    pub fn merge(&mut self, other: Generations) {
        self.projects.extend(other.projects);
        self.all |= other.all;
    }

    /// Bump the counters, inside the transaction that made the changes, and start afresh.
    pub fn flush(&mut self, conn: &Connection) -> rusqlite::Result<()> {
        if !self.projects.is_empty() {
            let mut bump = conn.prepare_cached(
                "INSERT INTO digest_gen (project, n) VALUES (?1, 1)
                   ON CONFLICT (project) DO UPDATE SET n = n + 1",
            )?;
            for p in std::mem::take(&mut self.projects) {
                bump.execute([p])?;
            }
        }
        if std::mem::take(&mut self.all) {
            conn.prepare_cached("UPDATE digest_gen_all SET n = n + 1 WHERE id = 1")?
                .execute([])?;
        }
        Ok(())
    }
}

/// The knowledge follow-ups of one observation just inserted (in the same transaction), and its
/// digest counter noted in `gens`. Types other than `memory`, `file_edit` and `file_write` run
/// no statement.
pub fn observation_inserted(
    conn: &Connection,
    row: &Inserted,
    gens: &mut Generations,
) -> rusqlite::Result<()> {
    gens.observation(row.project, row.obs_type);
    match (row.obs_type, row.file_path) {
        ("memory", _) => note(conn, row),
        ("file_edit" | "file_write", Some(path)) => stale(conn, row, path),
        _ => Ok(()),
    }
}

/// A saved memory is a note, `user_declared` and active, linked by `obs_id`; its title is the
/// metadata's `title`, else the first 80 characters (the same SQL the trigger ran, so an
/// upgraded database and a new one agree).
fn note(conn: &Connection, row: &Inserted) -> rusqlite::Result<()> {
    let n = conn
        .prepare_cached(
            "INSERT INTO knowledge (class, kind, project, scope, title, summary, reason,
                                    memory_source, status, obs_id, created_at, updated_at)
             SELECT 'knowledge', 'note', project, 'project',
                    COALESCE(CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.title') END,
                             substr(content, 1, 80)),
                    content, 'saved with save_memory', 'user_declared', 'active', id,
                    timestamp, timestamp
               FROM observations WHERE id = ?1",
        )?
        .execute([row.id])?;
    if n > 0 {
        conn.prepare_cached(
            "INSERT INTO knowledge_audit (knowledge_id, at, action, to_status, reason, other_id)
             VALUES (last_insert_rowid(), ?2, 'created', 'active', 'saved with save_memory', ?1)",
        )?
        .execute(params![row.id, row.timestamp])?;
    }
    Ok(())
}

/// A later edit or write of a file an active item's evidence names flags the item, once, with
/// the observation that touched it. Only edits made after the cited observation count.
fn stale(conn: &Connection, row: &Inserted, path: &str) -> rusqlite::Result<()> {
    let n = conn
        .prepare_cached(
            "UPDATE knowledge SET stale_obs_id = ?1, updated_at = ?2
              WHERE status = 'active' AND stale_obs_id IS NULL
                AND id IN (SELECT knowledge_id FROM knowledge_evidence
                            WHERE file_path = ?3 AND (obs_id IS NULL OR obs_id < ?1))",
        )?
        .execute(params![row.id, row.timestamp, path])?;
    if n > 0 {
        conn.prepare_cached(
            "INSERT INTO knowledge_audit (knowledge_id, at, action, from_status, to_status, reason, other_id)
             SELECT id, ?2, 'stale', status, status,
                    'a later change of ' || ?3 || ' may have made it out of date', ?1
               FROM knowledge WHERE stale_obs_id = ?1",
        )?
        .execute(params![row.id, row.timestamp, path])?;
    }
    Ok(())
}

/// For tests that insert rows with SQL instead of through the writer: what the writer would
/// have done after inserting observation `id`, counters included.
#[cfg(test)]
pub fn inserted_by_sql(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    let (timestamp, obs_type, file_path, project): (i64, String, Option<String>, String) = conn
        .query_row(
            "SELECT timestamp, obs_type, file_path, project FROM observations WHERE id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )?;
    let mut gens = Generations::default();
    observation_inserted(
        conn,
        &Inserted {
            id,
            timestamp,
            obs_type: &obs_type,
            file_path: file_path.as_deref(),
            project: &project,
        },
        &mut gens,
    )?;
    gens.flush(conn)
}

/// For tests that insert prompts with SQL: the counters the writer would have bumped.
#[cfg(test)]
pub fn prompt_by_sql(conn: &Connection, id: i64) -> rusqlite::Result<()> {
    let (project, source): (String, String) = conn.query_row(
        "SELECT project, source FROM prompts WHERE id = ?1",
        [id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let mut gens = Generations::default();
    gens.prompt(&project, &source);
    gens.flush(conn)
}
