//! Forgetting on purpose: retention (per-type ages, a per-project cap) and purge (by project,
//! session, type, date or search). Both are dry runs unless asked to apply; applying deletes in
//! the writer, writes an audit row, and reclaims the space. Retention never touches pinned rows.
//!
//! Knowledge is never swept by age or count unless configured: a saved memory is also a knowledge
//! note (migration 010), which would follow its `memory` row out, so a memory whose note is still
//! live (not archived or superseded) is kept unless `[retention] max_age_days` names `memory`.

use crate::app::App;
use crate::store::writer::WriteError;
use rusqlite::types::Value as Sql;
use rusqlite::Connection;
use serde_json::json;
use std::collections::{BTreeMap, HashMap};

const DAY_MS: i64 = 86_400_000;

/// Default ages in days (docs/design.md §5): the vocabulary's ([`nmem_proto::obs::TABLE`]),
/// overridable per type in `[retention]`.
pub fn default_days(obs_type: &str) -> i64 {
    nmem_proto::obs::retention_days_of(obs_type)
}
use nmem_proto::obs::{AGENT_REASONING_DAYS, USER_PROMPT_DAYS};

pub use nmem_proto::admin::{DeletionReport as Outcome, PurgeRequest, RetentionRequest};

#[derive(Default)]
struct Candidates {
    obs: Vec<i64>,
    prompts: Vec<i64>,
    by_reason: BTreeMap<String, u64>,
}

fn retention_candidates(
    c: &Connection,
    req: &RetentionRequest,
    overrides: &HashMap<String, i64>,
    now: i64,
) -> rusqlite::Result<Candidates> {
    let mut cand = Candidates::default();
    let mut seen = std::collections::HashSet::new();
    let types: Vec<String> = match &req.obs_type {
        Some(t) => vec![t.clone()],
        None => c
            .prepare("SELECT DISTINCT obs_type FROM observations")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?,
    };
    let project_clause = if req.project.is_some() {
        " AND project = ?3"
    } else {
        ""
    };
    // A memory whose note is live is knowledge: kept unless its age is configured.
    let notes_clause = if overrides.contains_key("memory") {
        ""
    } else {
        " AND id NOT IN (SELECT obs_id FROM knowledge WHERE obs_id IS NOT NULL AND status NOT IN ('archived', 'superseded'))"
    };
    for t in &types {
        let days = req
            .max_age_days
            .or_else(|| overrides.get(t).copied())
            .unwrap_or_else(|| default_days(t));
        let cutoff = now.saturating_sub(days.max(0).saturating_mul(DAY_MS));
        let sql = format!("SELECT id FROM observations WHERE obs_type = ?1 AND timestamp < ?2 AND is_pinned = 0{project_clause}{notes_clause}");
        let mut stmt = c.prepare(&sql)?;
        let mut args: Vec<Sql> = vec![Sql::Text(t.clone()), Sql::Integer(cutoff)];
        if let Some(p) = &req.project {
            args.push(Sql::Text(p.clone()));
        }
        for id in stmt.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, i64>(0))? {
            let id = id?;
            if seen.insert(id) {
                cand.obs.push(id);
                *cand.by_reason.entry("age".into()).or_default() += 1;
            }
        }
    }
    if req.obs_type.is_none()
        || matches!(
            req.obs_type.as_deref(),
            Some("user_prompt" | "agent_reasoning" | "prompt")
        )
    {
        for (source, default) in [("user", USER_PROMPT_DAYS), ("agent", AGENT_REASONING_DAYS)] {
            let key = if source == "user" {
                "user_prompt"
            } else {
                "agent_reasoning"
            };
            let days = req
                .max_age_days
                .or_else(|| overrides.get(key).copied())
                .unwrap_or(default);
            let sql = format!("SELECT id FROM prompts WHERE source = ?1 AND timestamp < ?2 AND is_pinned = 0{project_clause}");
            let mut args: Vec<Sql> = vec![
                Sql::Text(source.into()),
                Sql::Integer(now.saturating_sub(days.max(0).saturating_mul(DAY_MS))),
            ];
            if let Some(p) = &req.project {
                args.push(Sql::Text(p.clone()));
            }
            let ids: Vec<i64> = c
                .prepare(&sql)?
                .query_map(rusqlite::params_from_iter(args), |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            *cand.by_reason.entry("age".into()).or_default() += ids.len() as u64;
            cand.prompts.extend(ids);
        }
    }
    if let Some(max) = req.max_per_project.filter(|n| *n >= 0) {
        let projects: Vec<String> = match &req.project {
            Some(p) => vec![p.clone()],
            None => c
                .prepare("SELECT DISTINCT project FROM observations")?
                .query_map([], |r| r.get(0))?
                .collect::<Result<_, _>>()?,
        };
        for p in projects {
            let mut stmt = c.prepare(&format!(
                "SELECT id FROM observations WHERE project = ?1 AND is_pinned = 0{notes_clause} ORDER BY timestamp DESC, id DESC LIMIT -1 OFFSET ?2",
            ))?;
            for id in stmt.query_map(rusqlite::params![p, max], |r| r.get::<_, i64>(0))? {
                let id = id?;
                if seen.insert(id) {
                    cand.obs.push(id);
                    *cand.by_reason.entry("project_count".into()).or_default() += 1;
                }
            }
        }
    }
    Ok(cand)
}

fn purge_candidates(c: &Connection, req: &PurgeRequest) -> Result<Candidates, WriteError> {
    let when = |w: &Option<nmem_proto::query::When>, end| {
        w.as_ref()
            .map(|w| crate::query::millis(w, end))
            .transpose()
            .map_err(|e| WriteError::Invalid(e.to_string()))
    };
    let (before, after) = (when(&req.before, false)?, when(&req.after, true)?);
    let mut cand = Candidates::default();
    for (table, is_obs) in [("observations", true), ("prompts", false)] {
        if !is_obs
            && req
                .obs_type
                .as_deref()
                .is_some_and(|t| !matches!(t, "user_prompt" | "agent_reasoning" | "prompt"))
        {
            continue;
        }
        let mut sql = format!("SELECT t.id FROM {table} t WHERE 1");
        let mut args: Vec<Sql> = Vec::new();
        if let Some(q) = req.search.as_deref().filter(|q| !q.trim().is_empty()) {
            sql.push_str(&format!(
                " AND t.id IN (SELECT rowid FROM {table}_fts WHERE {table}_fts MATCH ?)"
            ));
            args.push(Sql::Text(crate::query::to_fts5(q)));
        }
        if let Some(p) = &req.project {
            sql.push_str(" AND t.project = ?");
            args.push(Sql::Text(p.clone()));
        }
        if let Some(s) = &req.session {
            sql.push_str(" AND t.session_id = ?");
            args.push(Sql::Text(s.clone()));
        }
        match (is_obs, req.obs_type.as_deref()) {
            (true, Some("user_prompt" | "agent_reasoning" | "prompt")) => continue,
            (true, Some(t)) => {
                sql.push_str(" AND t.obs_type = ?");
                args.push(Sql::Text(t.into()));
            }
            (false, Some("user_prompt")) => sql.push_str(" AND t.source = 'user'"),
            (false, Some("agent_reasoning")) => sql.push_str(" AND t.source = 'agent'"),
            _ => {}
        }
        if let Some(b) = before {
            sql.push_str(" AND t.timestamp < ?");
            args.push(Sql::Integer(b));
        }
        if let Some(a) = after {
            sql.push_str(" AND t.timestamp > ?");
            args.push(Sql::Integer(a));
        }
        let ids: Vec<i64> = c
            .prepare(&sql)
            .and_then(|mut s| {
                s.query_map(rusqlite::params_from_iter(args), |r| r.get(0))?
                    .collect::<Result<_, _>>()
            })
            .map_err(|e| match crate::query::is_fts_syntax(&e) {
                true => WriteError::Invalid(format!("the search is not a valid query: {e}")),
                false => WriteError::from(e),
            })?;
        *cand
            .by_reason
            .entry(if is_obs { "observations" } else { "prompts" }.into())
            .or_default() += ids.len() as u64;
        if is_obs {
            cand.obs = ids;
        } else {
            cand.prompts = ids;
        }
    }
    Ok(cand)
}

/// Delete the candidates (in chunks), write the audit row, reclaim the space.
/// Deleted on purpose means unrecoverable: see [`crate::maintain::scrubbed`]. A purge is
/// thorough (the file is rewritten); retention's sweeps are routine.
fn delete(
    c: &mut Connection,
    cand: &Candidates,
    action: &str,
    detail: serde_json::Value,
) -> rusqlite::Result<(u64, u64)> {
    if cand.obs.is_empty() && cand.prompts.is_empty() {
        return Ok((0, 0));
    }
    let how = if action == "purge" {
        crate::maintain::Scrub::Thorough
    } else {
        crate::maintain::Scrub::Routine
    };
    crate::maintain::scrubbed(c, how, |c| delete_rows(c, cand, action, detail)).map(|(n, _)| n)
}

fn delete_rows(
    c: &mut Connection,
    cand: &Candidates,
    action: &str,
    detail: serde_json::Value,
) -> rusqlite::Result<(u64, u64)> {
    let tx = c.transaction()?;
    let mut counts = (0u64, 0u64);
    // The sessions the deleted rows belonged to: those left empty go too.
    let mut sessions = std::collections::BTreeSet::new();
    for (table, ids) in [("observations", &cand.obs), ("prompts", &cand.prompts)] {
        for chunk in ids.chunks(500) {
            let sql = format!(
                "SELECT DISTINCT session_id FROM {table} WHERE id IN ({})",
                vec!["?"; chunk.len()].join(",")
            );
            let mut stmt = tx.prepare(&sql)?;
            let rows = stmt.query_map(rusqlite::params_from_iter(chunk.iter()), |r| {
                r.get::<_, String>(0)
            })?;
            for s in rows {
                sessions.insert(s?);
            }
        }
    }
    // A purge is forgotten on every synced device too (a tombstone, docs/sync.md); retention
    // is each device's own policy.
    if action == "purge" {
        let mut events = crate::sync::tombstone::ids_of_rows(&tx, "observations", &cand.obs)?;
        events.extend(crate::sync::tombstone::ids_of_rows(
            &tx,
            "prompts",
            &cand.prompts,
        )?);
        crate::sync::tombstone::emit(&tx, &events, "purge")?;
    }
    for (table, ids, n) in [
        ("observations", &cand.obs, &mut counts.0),
        ("prompts", &cand.prompts, &mut counts.1),
    ] {
        for chunk in ids.chunks(500) {
            let sql = format!(
                "DELETE FROM {table} WHERE id IN ({})",
                vec!["?"; chunk.len()].join(",")
            );
            *n += tx.execute(&sql, rusqlite::params_from_iter(chunk.iter()))? as u64;
        }
    }
    let mut empty = 0;
    for s in &sessions {
        empty += tx.execute(
            "DELETE FROM sessions WHERE id = ?1
               AND NOT EXISTS (SELECT 1 FROM observations WHERE session_id = ?1)
               AND NOT EXISTS (SELECT 1 FROM prompts WHERE session_id = ?1)",
            [s],
        )?;
    }
    if empty > 0 {
        tracing::info!(sessions = empty, "{action}: removed sessions left empty");
    }
    if counts.0 + counts.1 > 0 {
        tx.execute(
            "INSERT INTO audit (timestamp, action, detail, observations, prompts) VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![nmem_proto::now_ms(), action, detail.to_string(), counts.0 as i64, counts.1 as i64],
        )?;
    }
    tx.commit()?;
    Ok(counts)
}

fn outcome(
    cand: &Candidates,
    apply: bool,
    deleted: (u64, u64),
    before: u64,
    after: u64,
) -> Outcome {
    Outcome {
        mode: nmem_proto::admin::Mode::from_apply(apply),
        executed_at: nmem_proto::now_ms(),
        total_candidates: (cand.obs.len() + cand.prompts.len()) as u64,
        by_reason: cand.by_reason.clone(),
        candidate_ids: cand
            .obs
            .iter()
            .map(|i| format!("o{i}"))
            .chain(cand.prompts.iter().map(|i| format!("p{i}")))
            .take(1000)
            .collect(),
        deleted_observations: deleted.0,
        deleted_prompts: deleted.1,
        db_bytes_before: before,
        db_bytes_after: after,
    }
}

pub async fn retention(app: &App, req: RetentionRequest) -> Result<Outcome, WriteError> {
    if let Some(d) = req.max_age_days.filter(|d| *d < 0) {
        return Err(WriteError::Invalid(format!(
            "max_age_days = {d}: an age is 0 days or more (0 means everything not pinned)"
        )));
    }
    if req.apply && req.now.is_some() {
        return Err(WriteError::Invalid(
            "`now` is for a dry run (what would be swept then); a sweep that applies uses the \
             present time: drop `now`, or `apply`"
                .into(),
        ));
    }
    let overrides = app.config.retention.max_age_days.clone();
    let db = app.paths.db.clone();
    let size = move || std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    app.writer
        .exec(move |c| {
            let before = size();
            let now = req.now.unwrap_or_else(nmem_proto::now_ms);
            let cand = retention_candidates(c, &req, &overrides, now)?;
            let deleted = if req.apply {
                delete(c, &cand, "retention", json!(req))?
            } else {
                (0, 0)
            };
            Ok(outcome(&cand, req.apply, deleted, before, size()))
        })
        .await
}

/// The sweep idle maintenance runs: every type's age (defaults, or `[retention].max_age_days`)
/// applied; pinned rows stay. Off with `[retention] sweep = false`.
pub async fn sweep(app: &App) -> Result<Option<Outcome>, WriteError> {
    if !app.config.retention.sweep {
        return Ok(None);
    }
    let out = retention(
        app,
        RetentionRequest {
            apply: true,
            ..Default::default()
        },
    )
    .await?;
    Ok(Some(out))
}

/// What the audit row keeps of a purge: everything but the search text, which is often the very
/// secret being purged; its SHA-256 prefix still tells two purges apart.
fn audit_detail(req: &PurgeRequest) -> serde_json::Value {
    use sha2::Digest;
    let mut v = json!(req);
    if let Some(q) = &req.search {
        let h = sha2::Sha256::digest(q.as_bytes());
        let hex: String = h[..8].iter().map(|b| format!("{b:02x}")).collect();
        v["search"] = json!(format!("[{} characters, sha256 {hex}…]", q.chars().count()));
    }
    v
}

/// A purge that names a project and nothing narrower: the whole project goes.
fn whole_project(req: &PurgeRequest) -> bool {
    req.project.is_some()
        && req.session.is_none()
        && req.obs_type.is_none()
        && req.before.is_none()
        && req.after.is_none()
        && req.search.is_none()
}

pub async fn purge(app: &App, req: PurgeRequest) -> Result<Outcome, WriteError> {
    if req.project.is_none()
        && req.session.is_none()
        && req.obs_type.is_none()
        && req.before.is_none()
        && req.after.is_none()
        && req.search.is_none()
    {
        return Err(WriteError::Invalid(
            "say what to purge: a project, session, type, date or search".into(),
        ));
    }
    let db = app.paths.db.clone();
    let size = move || std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0);
    app.writer
        .exec(move |c| {
            crate::store::fts::index_all(c)?;
            let before = size();
            let mut cand = purge_candidates(c, &req)?;
            // A purge of a whole project (no other filter) takes its documents, knowledge and
            // work items too (before the rows, so the thorough scrub of the file covers them).
            let whole = req
                .project
                .as_deref()
                .filter(|_| whole_project(&req))
                .map(str::to_string);
            let knowledge: Vec<i64> = match &whole {
                Some(p) => c
                    .prepare("SELECT id FROM knowledge WHERE project = ?1 ORDER BY id")?
                    .query_map([p], |r| r.get(0))?
                    .collect::<Result<_, _>>()?,
                None => Vec::new(),
            };
            if let Some(p) = &whole {
                let n = crate::docs::count_project(c, p)?;
                if n > 0 {
                    cand.by_reason.insert("doc_chunks".into(), n);
                }
            }
            let deleted = if req.apply {
                // Scrubbed like the observations: nothing of a purged document or knowledge
                // item stays readable in the file or in the full-text index's old segments.
                if let Some(p) = whole
                    .filter(|_| cand.by_reason.contains_key("doc_chunks") || !knowledge.is_empty())
                {
                    crate::maintain::scrubbed(c, crate::maintain::Scrub::Thorough, |c| {
                        let tx = c.transaction()?;
                        crate::docs::purge_project(&tx, &p)?;
                        let uids = crate::sync::tombstone::item_uids(&tx, &p)?;
                        tx.execute("DELETE FROM knowledge WHERE project = ?1", [&p])?;
                        // Synced items: a tombstone for the other devices (docs/sync.md).
                        crate::sync::tombstone::forget_items(&tx, &p, &uids, "purge")?;
                        tx.commit()
                    })?;
                }
                delete(c, &cand, "purge", audit_detail(&req))?
            } else {
                (0, 0)
            };
            let mut out = outcome(&cand, req.apply, deleted, before, size());
            if !knowledge.is_empty() {
                out.total_candidates += knowledge.len() as u64;
                out.by_reason
                    .insert("knowledge".into(), knowledge.len() as u64);
                let room = 1000usize.saturating_sub(out.candidate_ids.len());
                out.candidate_ids
                    .extend(knowledge.iter().take(room).map(|i| format!("k{i}")));
            }
            Ok(out)
        })
        .await
}

#[cfg(test)]
mod default_tests {
    use super::default_days;

    #[test]
    fn every_type_of_the_vocabulary_has_its_age() {
        for t in nmem_proto::query::OBS_TYPES {
            assert!(default_days(t) >= 90, "{t}");
        }
        assert_eq!(default_days("tool_rejected"), 90);
        assert_eq!(default_days("skill"), 90);
        assert_eq!(default_days("command_error"), 180);
        assert_eq!(default_days("git_commit"), 730);
    }
}
