//! Governed knowledge and work items (migration 010): writing them under memory-substrate's
//! rules, changing their status with a reason, and reading them back.
//!
//! Writes run on the writer (the single-writer invariant), each in one transaction with its
//! audit rows; the rules:
//!
//! * an agent-inferred claim starts as a `candidate`, whatever status it asked for;
//! * a structured claim (`payload.subject` and `payload.predicate`) that repeats one in an
//!   overlapping scope (same kind, subject, predicate and value) is refused: nothing changes;
//! * the same subject and predicate with another value marks both `contested`;
//! * an unstructured item similar to others (words of title and summary) is written, and the
//!   reply lists them as `possible_duplicates`;
//! * evidence must exist (`obs:<id>` names a stored observation, `src:<id>` with a `segment_id`
//!   a stored document chunk) and, with a `hash`, still hold the text it had;
//! * promote, supersede, contest, archive and a work item's done / drop / reopen need a reason,
//!   and are recorded in `knowledge_audit`; promote and supersede clear the possibly-stale flag.
//!
//! The flag itself is raised by triggers, in the same transaction as its cause: the edit of a
//! file that an active item's evidence names (migration 010), or the deletion of a cited document
//! chunk, which is how a re-ingest replaces a chunk whose text changed (migration 012); saved
//! memories become notes by trigger too.

use crate::app::App;
use crate::query::bounds::{check_len, check_scope};
use crate::query::QueryError;
use crate::store::writer::WriteError;
use crate::sync::envelope::{KnowledgeEvent, KnowledgeItem};
use nmem_proto::knowledge::{
    Action, AuditEntry, Class, EvidenceRef, HitRef, Item, KnowledgeKind, LifecycleReply,
    LifecycleRequest, ListReply, ListRequest, MemorySource, PossibleDuplicate, RememberRequest,
    Remembered, Status, WorkKind, SCOPE_GLOBAL, SCOPE_PROJECT,
};
use nmem_proto::query::{Observation, SearchHit};
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::BTreeSet;

pub const MAX_TITLE: usize = 300;
pub const MAX_TEXT: usize = 16 * 1024;
pub const MAX_EVIDENCE: usize = 50;
/// Jaccard similarity of title and summary words past which an item is a possible duplicate.
const SIMILAR: f64 = 0.5;

/// `POST /v1/knowledge`.
pub async fn remember(app: &App, mut req: RememberRequest) -> Result<Remembered, QueryError> {
    let project = project(app, req.project.as_deref(), &req.cwd)?;
    let v = validate(&req)?;
    // Redacted like everything else nmem stores.
    let r = &app.ingest.redactor;
    r.redact(&mut req.title);
    r.redact(&mut req.summary);
    r.redact(&mut req.reason);
    let mut payload = req
        .payload
        .clone()
        .map(|p| serde_json::to_value(p).unwrap_or_default());
    if let Some(p) = payload.as_mut() {
        r.redact_payload(p);
    }
    let now = nmem_proto::now_ms();
    Ok(app
        .writer
        .exec(move |c| write_item(c, &req, &v, payload, &project, now))
        .await?)
}

/// `POST /v1/knowledge/lifecycle`.
pub async fn lifecycle(app: &App, req: LifecycleRequest) -> Result<LifecycleReply, QueryError> {
    let reason = req.reason.trim().to_string();
    if reason.is_empty() {
        return Err(QueryError::BadRequest(format!(
            "`reason` must not be empty: say why the item is {}",
            past(req.action)
        )));
    }
    check_len("reason", &reason, MAX_TEXT)?;
    let mut reason = reason;
    app.ingest.redactor.redact(&mut reason);
    let now = nmem_proto::now_ms();
    Ok(app
        .writer
        .exec(move |c| change(c, &req, &reason, now))
        .await?)
}

/// `POST /v1/pin` with `knowledge: true`: pin or unpin an item (an audit row says so). A pinned
/// knowledge item comes first in its project's digest while it is current.
pub async fn pin(app: &App, id: i64, pinned: bool) -> Result<(), QueryError> {
    let now = nmem_proto::now_ms();
    Ok(app
        .writer
        .exec(move |c| {
            let tx = c.transaction()?;
            if !set_pin(&tx, id, pinned, now)? {
                return Err(WriteError::NotFound(format!(
                    "no knowledge or work item has id {id} (k{id})"
                )));
            }
            let action = if pinned { "pin" } else { "unpin" };
            log_change(&tx, id, action, action, None)?;
            tx.commit()?;
            Ok(())
        })
        .await?)
}

/// Pin or unpin item `id` (an audit row when it changes); false when there is no such item.
fn set_pin(c: &Connection, id: i64, pinned: bool, now: i64) -> rusqlite::Result<bool> {
    let Some(was) = c
        .query_row(
            "SELECT is_pinned, status FROM knowledge WHERE id = ?1",
            [id],
            |r| Ok((r.get::<_, i64>(0)? != 0, r.get::<_, String>(1)?)),
        )
        .optional()?
    else {
        return Ok(false);
    };
    if was.0 != pinned {
        c.execute(
            "UPDATE knowledge SET is_pinned = ?2 WHERE id = ?1",
            params![id, pinned as i64],
        )?;
        let status = Status::parse(&was.1);
        let action = if pinned { "pinned" } else { "unpinned" };
        audit(c, id, now, action, status, status, action, None)?;
    }
    Ok(true)
}

/// `POST /v1/knowledge/list`.
pub async fn list(app: &App, req: ListRequest) -> Result<ListReply, QueryError> {
    let project = if req.ids.is_empty() {
        Some(project(app, req.project.as_deref(), &req.cwd)?)
    } else {
        None
    };
    if req.ids.len() > 500 {
        return Err(QueryError::BadRequest(format!(
            "at most 500 ids per request, got {}",
            req.ids.len()
        )));
    }
    if let Some(k) = &req.kind {
        check_len("kind", k, 64)?;
    }
    Ok(app
        .readers
        .run(move |c| read_list(c, &req, project.as_deref()))
        .await?)
}

fn past(a: Action) -> &'static str {
    match a {
        Action::Promote => "promoted",
        Action::Supersede => "superseded",
        Action::Contest => "contested",
        Action::Archive => "archived",
        Action::Done => "done",
        Action::Drop => "dropped",
        Action::Reopen => "reopened",
    }
}

/// The project a request names, else the project of its cwd (an empty name counts as none).
fn project(app: &App, project: Option<&str>, cwd: &Option<String>) -> Result<String, QueryError> {
    let project = project
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| Some(p.to_string()));
    check_scope(&project, cwd)?;
    crate::query::project_of(app, &project, cwd).ok_or_else(|| {
        QueryError::BadRequest("knowledge belongs to a project: give `project` or `cwd`".into())
    })
}

/// What validation settled: the status to store and the structured claim, if any.
#[derive(Debug, Clone)]
pub struct Valid {
    status: Status,
    global: bool,
    claim: Option<(String, String, String)>,
    notes: Vec<String>,
}

/// Check a write before it reaches the writer: every field named in the error, nothing stored.
pub fn validate(req: &RememberRequest) -> Result<Valid, QueryError> {
    let bad = |m: String| Err(QueryError::BadRequest(m));
    let kind = req.kind.trim();
    match req.class {
        Class::Knowledge if KnowledgeKind::parse(kind).is_none() => {
            return bad(format!(
                "`kind` {kind:?} is not a knowledge kind: use {}",
                KnowledgeKind::names()
            ))
        }
        Class::WorkItem if WorkKind::parse(kind).is_none() => {
            return bad(format!(
                "`kind` {kind:?} is not a work item kind: use {}",
                WorkKind::names()
            ))
        }
        _ => {}
    }
    if req.title.trim().is_empty() {
        return bad("`title` must not be empty: name what this is".into());
    }
    if req.reason.trim().is_empty() {
        return bad("`reason` must not be empty: say why this should be remembered".into());
    }
    check_len("title", &req.title, MAX_TITLE)?;
    check_len("summary", &req.summary, MAX_TEXT)?;
    check_len("reason", &req.reason, MAX_TEXT)?;
    let mut global = false;
    for s in &req.scope_refs {
        match s.as_str() {
            SCOPE_PROJECT => {}
            SCOPE_GLOBAL => global = true,
            other => {
                return bad(format!(
                "scope_refs: {other:?} is not a scope: use {SCOPE_PROJECT:?} or {SCOPE_GLOBAL:?}"
            ))
            }
        }
    }
    if let Some(c) = req.confidence {
        if !(0.0..=1.0).contains(&c) {
            return bad(format!("`confidence` is {c}: give a number from 0 to 1"));
        }
    }
    if req.evidence_refs.len() > MAX_EVIDENCE {
        return bad(format!(
            "{} evidence refs; at most {MAX_EVIDENCE} are accepted",
            req.evidence_refs.len()
        ));
    }
    let mut notes = Vec::new();
    let status = match (req.class, req.status) {
        (class, Some(s)) if !s.fits(class) => {
            let allowed: Vec<&str> = Status::ALL
                .iter()
                .filter(|x| x.fits(class))
                .map(|x| x.as_str())
                .collect();
            return bad(format!(
                "`status` {s} is not one of a {class}'s: use {}",
                allowed.join(", ")
            ));
        }
        (Class::Knowledge, Some(Status::Superseded)) => {
            return bad(
                "a new item cannot start superseded: write it, then supersede the old one".into(),
            )
        }
        (Class::Knowledge, s) if req.memory_source == MemorySource::AgentInferred => {
            if matches!(s, Some(Status::Active)) {
                notes.push(
                    "an agent-inferred claim starts as a candidate: promote it once reviewed"
                        .into(),
                );
            }
            match s {
                Some(Status::Archived) | Some(Status::Contested) => s.unwrap_or(Status::Candidate),
                _ => Status::Candidate,
            }
        }
        (Class::Knowledge, s) => s.unwrap_or(Status::Active),
        (Class::WorkItem, s) => s.unwrap_or(Status::Open),
    };
    let claim =
        match &req.payload {
            Some(p) => {
                let subject = p
                    .subject
                    .as_deref()
                    .map(str::trim)
                    .filter(|s| !s.is_empty());
                let predicate = p
                    .predicate
                    .as_deref()
                    .map(str::trim)
                    .filter(|s| !s.is_empty());
                match (subject, predicate) {
                    (Some(s), Some(pr)) => {
                        let value = p.value.as_ref().or(p.object.as_ref());
                        // serde_json's maps are ordered by key: equal values print the same.
                        let v = value
                            .map(|v| v.to_string())
                            .unwrap_or_else(|| "null".into());
                        check_len("payload", &v, MAX_TEXT)?;
                        Some((s.to_string(), pr.to_string(), v))
                    }
                    (None, None) => None,
                    _ => return bad(
                        "a structured payload needs both `subject` and `predicate` (or neither, \
                         for an unstructured item)"
                            .into(),
                    ),
                }
            }
            None => None,
        };
    Ok(Valid {
        status,
        global,
        claim,
        notes,
    })
}

fn write_item(
    c: &mut Connection,
    req: &RememberRequest,
    v: &Valid,
    payload: Option<serde_json::Value>,
    project: &str,
    now: i64,
) -> Result<Remembered, WriteError> {
    let tx = c.transaction()?;
    let evidence = check_evidence(&tx, &req.evidence_refs)?;
    let mut status = v.status;
    let mut contested = Vec::new();
    let scope = if v.global { "global" } else { "project" };
    if let Some((subject, predicate, value)) = &v.claim {
        // Items whose scope overlaps this one's: the same project, or either side global.
        let mut stmt = tx.prepare(
            "SELECT id, value, status FROM knowledge
              WHERE class = 'knowledge' AND kind = ?1 AND subject = ?2 AND predicate = ?3
                AND status NOT IN ('superseded', 'archived')
                AND (project = ?4 OR scope = 'global' OR ?5 = 'global')",
        )?;
        let same: Vec<(i64, Option<String>, String)> = stmt
            .query_map(
                params![req.kind.trim(), subject, predicate, project, scope],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )?
            .collect::<Result<_, _>>()?;
        drop(stmt);
        if let Some((id, _, st)) = same
            .iter()
            .find(|(_, val, _)| val.as_deref() == Some(value))
        {
            return Err(WriteError::Conflict(format!(
                "#{id} ({st}) already says {subject} {predicate} {value}: nothing was written. \
                 Cite more evidence on it, or promote it"
            )));
        }
        if !same.is_empty() && status != Status::Archived {
            status = Status::Contested;
            contested = same.iter().map(|(id, _, _)| *id).collect();
        }
    }
    let possible = if v.claim.is_none() && req.class == Class::Knowledge {
        possible_duplicates(&tx, project, &req.title, &req.summary)?
    } else {
        Vec::new()
    };
    let (subject, predicate, value) = match &v.claim {
        Some((s, p, val)) => (Some(s.as_str()), Some(p.as_str()), Some(val.as_str())),
        None => (None, None, None),
    };
    let uid = crate::sync::log::random_id("k")?;
    tx.execute(
        "INSERT INTO knowledge (class, kind, project, scope, title, summary, reason, memory_source,
                                status, confidence, subject, predicate, value, payload,
                                created_at, updated_at, uid)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?15, ?16)",
        params![
            req.class.as_str(),
            req.kind.trim(),
            project,
            scope,
            req.title.trim(),
            req.summary.trim(),
            req.reason.trim(),
            req.memory_source.as_str(),
            status.as_str(),
            req.confidence,
            subject,
            predicate,
            value,
            payload
                .filter(|p| p.as_object().is_some_and(|o| !o.is_empty()))
                .map(|p| p.to_string()),
            now,
            uid,
        ],
    )?;
    let id = tx.last_insert_rowid();
    for (i, e) in evidence.iter().enumerate() {
        tx.execute(
            "INSERT INTO knowledge_evidence (knowledge_id, ord, obs_id, source_id, segment_id, hash, file_path)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![id, i as i64, e.0, e.1.source_id, e.1.segment_id, e.1.hash, e.1.file_path],
        )?;
    }
    audit(
        &tx,
        id,
        now,
        "created",
        None,
        Some(status),
        req.reason.trim(),
        None,
    )?;
    for other in &contested {
        let before: String =
            tx.query_row("SELECT status FROM knowledge WHERE id = ?1", [other], |r| {
                r.get(0)
            })?;
        tx.execute(
            "UPDATE knowledge SET status = 'contested', updated_at = ?2 WHERE id = ?1",
            params![other, now],
        )?;
        let why = format!("#{id} says otherwise about the same subject and predicate");
        audit(
            &tx,
            *other,
            now,
            "contested",
            Status::parse(&before),
            Some(Status::Contested),
            &why,
            Some(id),
        )?;
        audit(
            &tx,
            id,
            now,
            "contested",
            Some(status),
            Some(status),
            &format!("#{other} says otherwise"),
            Some(*other),
        )?;
    }
    log_item(&tx, id)?;
    for other in &contested {
        let why = format!(
            "{} says otherwise about the same subject and predicate",
            req.title.trim()
        );
        log_change(&tx, *other, "contest", &why, None)?;
    }
    let item =
        read_item(&tx, id)?.ok_or_else(|| WriteError::Storage("written item vanished".into()))?;
    tx.commit()?;
    let mut notes = v.notes.clone();
    if !contested.is_empty() {
        notes.push(format!(
            "contested: {} said another value for the same subject and predicate; supersede the \
             wrong one, or promote the right one, with a reason",
            contested
                .iter()
                .map(|i| format!("#{i}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Remembered {
        item,
        possible_duplicates: possible,
        contested_with: contested,
        notes,
    })
}

/// Resolve each evidence ref: the observation id it cites and the file that observation names.
fn check_evidence(
    c: &Connection,
    refs: &[EvidenceRef],
) -> Result<Vec<(Option<i64>, EvidenceRef)>, WriteError> {
    let mut out = Vec::with_capacity(refs.len());
    for e in refs {
        let sid = e.source_id.trim();
        if sid.starts_with("src:") || sid.starts_with("doc:") {
            out.push((None, chunk_evidence(c, e)?));
            continue;
        }
        let Some(n) = sid.strip_prefix("obs:") else {
            return Err(WriteError::Invalid(format!(
                "evidence {sid:?}: cite an observation as {{\"source_id\": \"obs:<id>\"}}, or a \
                 document chunk as {{\"source_id\": \"src:<id>\", \"segment_id\": \"<chunk id>\"}}"
            )));
        };
        let id: i64 = n.parse().map_err(|_| {
            WriteError::Invalid(format!(
                "evidence {sid:?}: `obs:` must be followed by an observation id"
            ))
        })?;
        let row: Option<(String, Option<String>)> = c
            .query_row(
                "SELECT content, file_path FROM observations WHERE id = ?1",
                [id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?;
        let Some((content, file)) = row else {
            return Err(WriteError::Invalid(format!(
                "evidence obs:{id}: no observation has this id (it may have been swept or purged)"
            )));
        };
        if let Some(h) = e.hash.as_deref().map(str::trim).filter(|h| !h.is_empty()) {
            let actual = crate::sha256_hex(content.as_bytes());
            let h = h.to_ascii_lowercase();
            if h.len() < 8 || !actual.starts_with(&h) {
                return Err(WriteError::Invalid(format!(
                    "evidence obs:{id}: the hash {h:?} does not match the observation's text \
                     (SHA-256 {actual}): it changed since it was read, or the hash is wrong"
                )));
            }
        }
        out.push((
            Some(id),
            EvidenceRef {
                source_id: format!("obs:{id}"),
                segment_id: None,
                hash: e.hash.clone(),
                file_path: file,
            },
        ));
    }
    Ok(out)
}

/// Resolve a document chunk's citation: `{"source_id": "src:<source>", "segment_id": "<chunk>"}`
/// (the chunk also as `doc:<chunk>` or `d<chunk>`), or `{"source_id": "doc:<chunk>"}`. The
/// chunk must exist (in that source) and, with a `hash`, hold the text it had. Stored with the
/// chunk's own hash and, when the source is a file, its path: re-ingesting the source with that
/// chunk changed, or a later edit of the file, flags the item possibly stale.
fn chunk_evidence(c: &Connection, e: &EvidenceRef) -> Result<EvidenceRef, WriteError> {
    let sid = e.source_id.trim();
    let bad = |m: String| WriteError::Invalid(format!("evidence {sid:?}: {m}"));
    let number = |s: &str| -> Option<i64> {
        let s = s.trim();
        let s = s
            .strip_prefix("doc:")
            .or_else(|| s.strip_prefix('d'))
            .unwrap_or(s);
        s.parse::<i64>().ok().filter(|n| *n > 0)
    };
    let (source, chunk) = match sid.strip_prefix("src:") {
        Some(src) => {
            let src = src.trim().parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                bad("`src:` must be followed by a source id (as memory_ingest or a search's doc \
                     result gives it)"
                    .into())
            })?;
            let seg = e
                .segment_id
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .ok_or_else(|| {
                    bad("cite a chunk of the source: give `segment_id` (a doc result's id)".into())
                })?;
            let chunk = number(seg).ok_or_else(|| {
                bad(format!(
                    "segment_id {seg:?} is not a chunk id (digits, or doc:<id>)"
                ))
            })?;
            (Some(src), chunk)
        }
        None => (
            None,
            number(sid).ok_or_else(|| bad("`doc:` must be followed by a chunk id".into()))?,
        ),
    };
    let row: Option<(i64, String, String, String)> = c
        .query_row(
            "SELECT d.source_id, d.content, d.hash, s.locator
               FROM doc_chunks d JOIN doc_sources s ON s.id = d.source_id WHERE d.id = ?1",
            [chunk],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    let Some((src, content, hash, locator)) = row.filter(|r| source.is_none_or(|s| s == r.0))
    else {
        return Err(bad(format!(
            "no chunk {chunk}{} (it may have changed on a re-ingest, or been purged): search \
             again for its current id",
            source
                .map(|s| format!(" in source src:{s}"))
                .unwrap_or_default()
        )));
    };
    if let Some(h) = e.hash.as_deref().map(str::trim).filter(|h| !h.is_empty()) {
        let h = h.to_ascii_lowercase();
        let actual = crate::sha256_hex(content.as_bytes());
        if h.len() < 8 || !actual.starts_with(&h) {
            return Err(bad(format!(
                "the hash {h:?} does not match chunk {chunk}'s text (SHA-256 {actual}): it \
                 changed since it was read, or the hash is wrong"
            )));
        }
    }
    Ok(EvidenceRef {
        source_id: format!("src:{src}"),
        segment_id: Some(chunk.to_string()),
        hash: Some(hash),
        file_path: locator.starts_with('/').then_some(locator),
    })
}

/// The words that say what an item is about: lower case, three letters or more.
fn words(s: &str) -> BTreeSet<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| w.to_lowercase())
        .collect()
}

fn jaccard(a: &BTreeSet<String>, b: &BTreeSet<String>) -> f64 {
    let inter = a.intersection(b).count();
    let union = a.len() + b.len() - inter;
    if union == 0 {
        0.0
    } else {
        inter as f64 / union as f64
    }
}

fn possible_duplicates(
    c: &Connection,
    project: &str,
    title: &str,
    summary: &str,
) -> Result<Vec<PossibleDuplicate>, WriteError> {
    let (t, s) = (words(title), words(summary));
    let all: BTreeSet<String> = t.union(&s).cloned().collect();
    let mut stmt = c.prepare(
        "SELECT id, title, summary, kind, status FROM knowledge
          WHERE class = 'knowledge' AND subject IS NULL AND status NOT IN ('superseded', 'archived')
            AND (project = ?1 OR scope = 'global')
          ORDER BY id DESC LIMIT 5000",
    )?;
    let mut out: Vec<PossibleDuplicate> = stmt
        .query_map([project], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?
        .filter_map(Result::ok)
        .filter_map(|(id, ot, os, kind, status)| {
            let (wt, ws) = (words(&ot), words(&os));
            let both: BTreeSet<String> = wt.union(&ws).cloned().collect();
            let score = jaccard(&all, &both);
            let mut reasons = Vec::new();
            if !t.is_empty() && jaccard(&t, &wt) >= SIMILAR {
                reasons.push("similar title".to_string());
            }
            if !s.is_empty() && jaccard(&s, &ws) >= SIMILAR {
                reasons.push("similar summary".to_string());
            }
            (score >= SIMILAR || !reasons.is_empty()).then(|| PossibleDuplicate {
                object_id: id,
                score: (score * 1000.0).round() / 1000.0,
                reasons,
                title: ot,
                kind,
                status: Status::parse(&status).unwrap_or(Status::Active),
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(b.object_id.cmp(&a.object_id))
    });
    out.truncate(5);
    Ok(out)
}

#[allow(clippy::too_many_arguments)]
fn audit(
    c: &Connection,
    id: i64,
    at: i64,
    action: &str,
    from: Option<Status>,
    to: Option<Status>,
    reason: &str,
    other: Option<i64>,
) -> rusqlite::Result<()> {
    c.execute(
        "INSERT INTO knowledge_audit (knowledge_id, at, action, from_status, to_status, reason, other_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![id, at, action, from.map(|s| s.as_str()), to.map(|s| s.as_str()), reason, other],
    )?;
    Ok(())
}

fn change(
    c: &mut Connection,
    req: &LifecycleRequest,
    reason: &str,
    now: i64,
) -> Result<LifecycleReply, WriteError> {
    let tx = c.transaction()?;
    let touched = change_in(&tx, req, reason, now)?;
    log_change(&tx, req.id, req.action.as_str(), reason, req.new_id)?;
    let items = touched
        .iter()
        .map(|id| read_item(&tx, *id))
        .collect::<rusqlite::Result<Vec<_>>>()?
        .into_iter()
        .flatten()
        .collect();
    tx.commit()?;
    Ok(LifecycleReply { items })
}

/// A lifecycle change under the rules, in the caller's transaction: the ids of the items it
/// touched.
fn change_in(
    tx: &Connection,
    req: &LifecycleRequest,
    reason: &str,
    now: i64,
) -> Result<Vec<i64>, WriteError> {
    let item = read_item(tx, req.id)?.ok_or_else(|| {
        WriteError::NotFound(format!("no knowledge or work item has id {}", req.id))
    })?;
    let want_class = match req.action {
        Action::Done | Action::Drop | Action::Reopen => Class::WorkItem,
        _ => Class::Knowledge,
    };
    if item.class != want_class {
        return Err(WriteError::Invalid(format!(
            "#{} is a {}: `{}` applies to a {}",
            item.id, item.class, req.action, want_class
        )));
    }
    let set = |tx: &Connection, id: i64, to: Status, clear_stale: bool| {
        tx.execute(
            "UPDATE knowledge SET status = ?2, updated_at = ?3,
                    stale_obs_id = CASE WHEN ?4 THEN NULL ELSE stale_obs_id END,
                    stale_doc_id = CASE WHEN ?4 THEN NULL ELSE stale_doc_id END
              WHERE id = ?1",
            params![id, to.as_str(), now, clear_stale],
        )
    };
    let from = item.status;
    let refuse = |allowed: &[Status]| -> Result<(), WriteError> {
        if allowed.contains(&from) {
            Ok(())
        } else {
            Err(WriteError::Invalid(format!(
                "#{} is {from}: `{}` applies to an item that is {}",
                item.id,
                req.action,
                allowed
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )))
        }
    };
    let mut touched = vec![item.id];
    match req.action {
        Action::Promote => {
            // An active item is promoted again to clear its possibly-stale flag once reviewed.
            refuse(&[Status::Candidate, Status::Contested, Status::Active])?;
            if from == Status::Active && !item.possibly_stale {
                return Err(WriteError::Invalid(format!(
                    "#{} is already active and not flagged stale: nothing to promote",
                    item.id
                )));
            }
            set(tx, item.id, Status::Active, true)?;
            audit(
                tx,
                item.id,
                now,
                "promoted",
                Some(from),
                Some(Status::Active),
                reason,
                None,
            )?;
        }
        Action::Supersede => {
            refuse(&[Status::Candidate, Status::Active, Status::Contested])?;
            let new_id = req.new_id.ok_or_else(|| {
                WriteError::Invalid("`supersede` needs `new_id`: the item that replaces it".into())
            })?;
            if new_id == item.id {
                return Err(WriteError::Invalid(
                    "an item cannot supersede itself".into(),
                ));
            }
            let new = read_item(tx, new_id)?.ok_or_else(|| {
                WriteError::NotFound(format!("no knowledge item has id {new_id} (`new_id`)"))
            })?;
            if new.class != Class::Knowledge
                || matches!(new.status, Status::Superseded | Status::Archived)
            {
                return Err(WriteError::Invalid(format!(
                    "#{new_id} is {} {}: only a current knowledge item can supersede another",
                    new.class, new.status
                )));
            }
            tx.execute(
                "UPDATE knowledge SET status = 'superseded', superseded_by = ?2, updated_at = ?3,
                        stale_obs_id = NULL, stale_doc_id = NULL WHERE id = ?1",
                params![item.id, new_id, now],
            )?;
            audit(
                tx,
                item.id,
                now,
                "superseded",
                Some(from),
                Some(Status::Superseded),
                reason,
                Some(new_id),
            )?;
            // The replacement is the reviewed one: it becomes active.
            set(tx, new_id, Status::Active, true)?;
            audit(
                tx,
                new_id,
                now,
                "supersedes",
                Some(new.status),
                Some(Status::Active),
                reason,
                Some(item.id),
            )?;
            touched.push(new_id);
        }
        Action::Contest => {
            refuse(&[Status::Candidate, Status::Active])?;
            set(tx, item.id, Status::Contested, false)?;
            audit(
                tx,
                item.id,
                now,
                "contested",
                Some(from),
                Some(Status::Contested),
                reason,
                None,
            )?;
        }
        Action::Archive => {
            refuse(&[Status::Candidate, Status::Active, Status::Contested])?;
            set(tx, item.id, Status::Archived, false)?;
            audit(
                tx,
                item.id,
                now,
                "archived",
                Some(from),
                Some(Status::Archived),
                reason,
                None,
            )?;
        }
        Action::Done | Action::Drop => {
            refuse(&[Status::Open])?;
            let to = if req.action == Action::Done {
                Status::Done
            } else {
                Status::Dropped
            };
            set(tx, item.id, to, false)?;
            audit(
                tx,
                item.id,
                now,
                "status",
                Some(from),
                Some(to),
                reason,
                None,
            )?;
        }
        Action::Reopen => {
            refuse(&[Status::Done, Status::Dropped])?;
            set(tx, item.id, Status::Open, false)?;
            audit(
                tx,
                item.id,
                now,
                "status",
                Some(from),
                Some(Status::Open),
                reason,
                None,
            )?;
        }
    }
    Ok(touched)
}

const ITEM_COLUMNS: &str = "id, class, kind, project, scope, title, summary, reason, memory_source, \
     status, confidence, payload, obs_id, superseded_by, stale_obs_id, is_pinned, created_at, updated_at, \
     stale_doc_id";

fn item_row(r: &Row) -> rusqlite::Result<Item> {
    let text = |i: usize| r.get::<_, String>(i);
    let payload: Option<String> = r.get(11)?;
    let stale: Option<i64> = r.get(14)?;
    let stale_doc: Option<i64> = r.get(18)?;
    Ok(Item {
        id: r.get(0)?,
        class: Class::parse(&text(1)?).unwrap_or(Class::Knowledge),
        kind: text(2)?,
        project: text(3)?,
        scope: format!("scope:{}", text(4)?),
        title: text(5)?,
        summary: text(6)?,
        reason: text(7)?,
        memory_source: MemorySource::parse(&text(8)?).unwrap_or(MemorySource::Imported),
        status: Status::parse(&text(9)?).unwrap_or(Status::Active),
        confidence: r.get(10)?,
        payload: payload.and_then(|p| serde_json::from_str(&p).ok()),
        obs_id: r.get(12)?,
        superseded_by: r.get(13)?,
        possibly_stale: stale.is_some() || stale_doc.is_some(),
        stale_obs_id: stale,
        stale_doc_id: stale_doc,
        evidence: Vec::new(),
        is_pinned: r.get::<_, i64>(15)? != 0,
        created_at: r.get(16)?,
        updated_at: r.get(17)?,
    })
}

fn evidence_of(c: &Connection, id: i64) -> rusqlite::Result<Vec<EvidenceRef>> {
    let mut stmt = c.prepare_cached(
        "SELECT source_id, segment_id, hash, file_path FROM knowledge_evidence
          WHERE knowledge_id = ?1 ORDER BY ord",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok(EvidenceRef {
            source_id: r.get(0)?,
            segment_id: r.get(1)?,
            hash: r.get(2)?,
            file_path: r.get(3)?,
        })
    })?;
    rows.collect()
}

pub fn read_item(c: &Connection, id: i64) -> rusqlite::Result<Option<Item>> {
    let item = c
        .query_row(
            &format!("SELECT {ITEM_COLUMNS} FROM knowledge WHERE id = ?1"),
            [id],
            item_row,
        )
        .optional()?;
    match item {
        Some(mut i) => {
            i.evidence = evidence_of(c, i.id)?;
            Ok(Some(i))
        }
        None => Ok(None),
    }
}

fn read_list(
    c: &Connection,
    req: &ListRequest,
    project: Option<&str>,
) -> rusqlite::Result<ListReply> {
    let mut items = Vec::new();
    if !req.ids.is_empty() {
        for id in &req.ids {
            if let Some(i) = read_item(c, *id)? {
                items.push(i);
            }
        }
    } else {
        let mut sql = format!(
            "SELECT {ITEM_COLUMNS} FROM knowledge WHERE (project = ?1 OR scope = 'global')"
        );
        let mut args: Vec<rusqlite::types::Value> =
            vec![project.unwrap_or_default().to_string().into()];
        if let Some(class) = req.class {
            args.push(class.as_str().to_string().into());
            sql.push_str(&format!(" AND class = ?{}", args.len()));
        }
        if !req.status.is_empty() {
            let mut marks = Vec::new();
            for s in &req.status {
                args.push(s.as_str().to_string().into());
                marks.push(format!("?{}", args.len()));
            }
            sql.push_str(&format!(" AND status IN ({})", marks.join(", ")));
        }
        if let Some(k) = &req.kind {
            args.push(k.trim().to_string().into());
            sql.push_str(&format!(" AND kind = ?{}", args.len()));
        }
        if req.stale {
            sql.push_str(" AND (stale_obs_id IS NOT NULL OR stale_doc_id IS NOT NULL)");
        }
        args.push(crate::query::clamp(req.limit, 50, 500).into());
        sql.push_str(&format!(
            " ORDER BY updated_at DESC, id DESC LIMIT ?{}",
            args.len()
        ));
        let mut stmt = c.prepare(&sql)?;
        let rows: Vec<Item> = stmt
            .query_map(rusqlite::params_from_iter(args), item_row)?
            .collect::<Result<_, _>>()?;
        for mut i in rows {
            i.evidence = evidence_of(c, i.id)?;
            items.push(i);
        }
    }
    let mut audit = Vec::new();
    if req.audit {
        let mut stmt = c.prepare_cached(
            "SELECT knowledge_id, at, action, from_status, to_status, reason, other_id
               FROM knowledge_audit WHERE knowledge_id = ?1 ORDER BY id",
        )?;
        for i in &items {
            let rows = stmt.query_map([i.id], |r| {
                Ok(AuditEntry {
                    knowledge_id: r.get(0)?,
                    at: r.get(1)?,
                    action: r.get(2)?,
                    from_status: r.get(3)?,
                    to_status: r.get(4)?,
                    reason: r.get(5)?,
                    other_id: r.get(6)?,
                })
            })?;
            for a in rows {
                audit.push(a?);
            }
        }
    }
    Ok(ListReply { items, audit })
}

/// The open work items of `project`, newest first, for the SessionStart digest.
pub fn open_work(
    c: &Connection,
    project: &str,
    n: usize,
) -> rusqlite::Result<Vec<(i64, String, String)>> {
    let mut stmt = c.prepare_cached(
        "SELECT id, kind, title FROM knowledge
          WHERE project = ?1 AND class = 'work_item' AND status = 'open'
          ORDER BY updated_at DESC, id DESC LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![project, n as i64], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?))
    })?;
    rows.collect()
}

/// Which knowledge and work items a search takes (`include_knowledge`, `knowledge_status`, and
/// the `obs_type` filter: `knowledge`, `work`, or an item kind).
#[derive(Debug, Clone, Default)]
pub struct SearchScope {
    /// Knowledge is searched at all.
    pub wanted: bool,
    /// Only knowledge is searched (every type named selects items, none observations).
    pub only: bool,
    statuses: Vec<String>,
    types: Vec<String>,
}

/// Whether an `obs_type` value selects knowledge or work items.
fn selects_items(t: &str) -> bool {
    matches!(t, "knowledge" | "work" | "work_item")
        || KnowledgeKind::parse(t).is_some()
        || WorkKind::parse(t).is_some()
}

impl SearchScope {
    /// `types`: the request's type filter; `files`: whether it filters by file (an item has no
    /// file of its own, so a file filter leaves items out).
    pub fn new(
        types: &[String],
        files: bool,
        include: Option<bool>,
        statuses: Option<nmem_proto::query::OneOrMany>,
    ) -> Result<SearchScope, QueryError> {
        let statuses = statuses.map(|s| s.into_vec()).unwrap_or_default();
        for s in &statuses {
            if Status::parse(s).is_none() {
                return Err(QueryError::BadRequest(format!(
                    "knowledge_status: {s:?} is not a status: use {}",
                    Status::ALL
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let statuses = if statuses.is_empty() {
            Status::ALL
                .iter()
                .filter(|s| !matches!(s, Status::Superseded | Status::Archived))
                .map(|s| s.as_str().to_string())
                .collect()
        } else {
            statuses
        };
        let only = !types.is_empty() && types.iter().all(|t| selects_items(t));
        let wanted = include.unwrap_or(true)
            && !files
            && (types.is_empty() || types.iter().any(|t| selects_items(t)));
        Ok(SearchScope {
            wanted,
            only: only && wanted,
            statuses,
            types: types.iter().filter(|t| selects_items(t)).cloned().collect(),
        })
    }
}

/// One tier of a knowledge search: its name, FTS5 query, and what a hit at rank r scores
/// (`weight / (rrf_k + r) + bonus`, as an observation's lexical rank does in the fusion).
#[derive(Debug, Clone)]
pub struct Tier {
    pub name: &'static str,
    pub fts: String,
    pub weight: f64,
    pub rrf_k: f64,
    pub bonus: f64,
}

/// The columns of a knowledge search hit.
const HIT_COLUMNS: &str = "k.id, k.class, k.kind, k.project, k.title, k.summary, k.status, \
     k.memory_source, COALESCE(k.stale_obs_id, k.stale_doc_id), k.is_pinned, k.updated_at";

fn hit_row(r: &Row) -> rusqlite::Result<SearchHit> {
    let class: String = r.get(1)?;
    let title: String = r.get(4)?;
    let summary: String = r.get(5)?;
    let kind: String = r.get(2)?;
    let preview = if summary.trim().is_empty() || summary.trim() == title.trim() {
        title.clone()
    } else {
        format!("{title}: {summary}")
    };
    Ok(SearchHit {
        kind: if class == "work_item" {
            "work"
        } else {
            "knowledge"
        }
        .into(),
        id: r.get(0)?,
        timestamp: r.get(10)?,
        obs_type: Some(kind.clone()),
        content_preview: nmem_proto::text::one_line(&preview, 200),
        project: r.get(3)?,
        knowledge: Some(HitRef {
            class,
            kind,
            status: r.get(6)?,
            title,
            memory_source: r.get(7)?,
            possibly_stale: r.get::<_, Option<i64>>(8)?.is_some(),
            is_pinned: r.get::<_, i64>(9)? != 0,
        }),
        ..SearchHit::default()
    })
}

/// Knowledge and work items matching a search: the first of `queries` (the strict query, then
/// the looser tiers, as for observations) that finds any, by BM25 (title counted double), at
/// most `limit` from `offset`. Each hit's `retrieval_sources` says its tier and rank, and its
/// `score` is what the same rank in the same tier gives an observation in the fusion
/// ([`crate::query`]'s weights), so the two lists can be merged by score.
///
/// `project`: its items and global ones (`None`: every project's). A note that mirrors a saved
/// memory is left out unless `notes` (the memory is an observation found by the observations'
/// search already).
#[allow(clippy::too_many_arguments)]
pub fn search(
    c: &Connection,
    scope: &SearchScope,
    queries: &[Tier],
    project: Option<&str>,
    (from, to): (Option<i64>, Option<i64>),
    notes: bool,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<Vec<SearchHit>> {
    if limit <= 0 || !scope.wanted {
        return Ok(Vec::new());
    }
    let mut stmt = c.prepare_cached(&format!(
        "SELECT {HIT_COLUMNS}
           FROM knowledge_fts f JOIN knowledge k ON k.id = f.rowid
          WHERE knowledge_fts MATCH ?1
            AND (?2 IS NULL OR k.project = ?2 OR k.scope = 'global')
            AND k.status IN (SELECT value FROM json_each(?3))
            AND (?4 = '[]' OR EXISTS (SELECT 1 FROM json_each(?4) t
                  WHERE t.value = k.kind
                     OR (t.value = 'knowledge' AND k.class = 'knowledge')
                     OR (t.value IN ('work', 'work_item') AND k.class = 'work_item')))
            AND (?5 IS NULL OR k.updated_at >= ?5) AND (?6 IS NULL OR k.updated_at <= ?6)
            AND (?7 OR k.obs_id IS NULL)
          ORDER BY bm25(knowledge_fts, 2.0, 1.0, 1.0, 1.0, 1.0), k.id DESC
          LIMIT ?8 OFFSET ?9"
    ))?;
    let statuses = serde_json::to_string(&scope.statuses).unwrap_or_default();
    let types = serde_json::to_string(&scope.types).unwrap_or_default();
    for Tier {
        name: tier,
        fts: q,
        weight,
        rrf_k,
        bonus,
    } in queries
    {
        if q.is_empty() || *weight <= 0.0 {
            continue;
        }
        let rows = stmt.query_map(
            params![q, project, statuses, types, from, to, notes, limit, offset],
            hit_row,
        );
        let hits: Vec<SearchHit> = match rows.and_then(|r| r.collect()) {
            Ok(h) => h,
            // A query FTS5 cannot parse in this table finds nothing here: the next tier.
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::Unknown => {
                continue
            }
            Err(e) => return Err(e),
        };
        if !hits.is_empty() {
            return Ok(hits
                .into_iter()
                .enumerate()
                .map(|(i, mut h)| {
                    let rank = offset as u32 + i as u32 + 1;
                    h.score = weight / (rrf_k + rank as f64) + bonus;
                    h.retrieval_sources = vec![nmem_proto::query::RetrievalSource {
                        source: "lexical".into(),
                        rank,
                        tier: Some(tier.to_string()),
                        similarity: None,
                        prompt_id: None,
                    }];
                    h
                })
                .collect());
        }
    }
    Ok(Vec::new())
}

/// Items by id, as observations of type `knowledge` or `work` (`get` with `knowledge_ids`): the
/// title and summary as the text, the whole item (status, evidence, pin) as the metadata.
pub fn get(c: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<Observation>> {
    let mut out = Vec::new();
    for id in ids {
        if let Some(i) = read_item(c, *id)? {
            let content = if i.summary.trim().is_empty() {
                i.title.clone()
            } else {
                format!("{}\n\n{}", i.title, i.summary)
            };
            out.push(Observation {
                id: i.id,
                timestamp: i.updated_at,
                project: i.project.clone(),
                obs_type: match i.class {
                    Class::Knowledge => "knowledge",
                    Class::WorkItem => "work",
                }
                .into(),
                source_event: "knowledge".into(),
                content,
                is_pinned: i.is_pinned,
                metadata: serde_json::to_value(&i).ok(),
                ..Observation::default()
            });
        }
    }
    Ok(out)
}

// Sync (docs/sync.md, "Knowledge items"): an item written here and every change of one (a
// lifecycle action, a pin) is logged as a knowledge event for the spaces its project goes to
// (`sync::log::append_knowledge`, nothing while sync is off), and a received one is applied
// here (`apply_event`). Items are named across devices by `uid` (migration 018), a saved
// memory's note by its memory's event id. Evidence stays on the device that cited it: its ids
// are that device's rows.

/// The name item `id` travels under: its uid, or `memory:<event id>` for a saved memory's note;
/// None for an item written before items had uids (it never left this device).
fn sync_name(c: &Connection, id: i64) -> rusqlite::Result<Option<String>> {
    Ok(c.query_row(
        "SELECT COALESCE(k.uid, 'memory:' || o.event_id)
           FROM knowledge k LEFT JOIN observations o ON o.id = k.obs_id WHERE k.id = ?1",
        [id],
        |r| r.get::<_, Option<String>>(0),
    )
    .optional()?
    .flatten())
}

/// The local id of the item a knowledge event names.
pub(crate) fn resolve(c: &Connection, name: &str) -> rusqlite::Result<Option<i64>> {
    match name.strip_prefix("memory:") {
        Some(event_id) => c
            .query_row(
                "SELECT k.id FROM knowledge k JOIN observations o ON o.id = k.obs_id
                  WHERE o.event_id = ?1",
                [event_id],
                |r| r.get(0),
            )
            .optional(),
        None => c
            .query_row("SELECT id FROM knowledge WHERE uid = ?1", [name], |r| {
                r.get(0)
            })
            .optional(),
    }
}

fn project_of(c: &Connection, id: i64) -> rusqlite::Result<String> {
    c.query_row("SELECT project FROM knowledge WHERE id = ?1", [id], |r| {
        r.get(0)
    })
}

/// Item `id` as it travels (its project, and the item with its current text and state); None
/// for an item without a uid (a saved memory's note, or one written before items had uids).
pub(crate) fn item_of(
    c: &Connection,
    id: i64,
) -> rusqlite::Result<Option<(String, KnowledgeItem)>> {
    c.query_row(
        "SELECT project, uid, class, kind, scope, title, summary, reason, memory_source, status,
                confidence, subject, predicate, value, payload, is_pinned, created_at
           FROM knowledge WHERE id = ?1 AND uid IS NOT NULL",
        [id],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                KnowledgeItem {
                    uid: r.get(1)?,
                    class: r.get(2)?,
                    item_kind: r.get(3)?,
                    scope: r.get(4)?,
                    title: r.get(5)?,
                    summary: r.get(6)?,
                    reason: r.get(7)?,
                    memory_source: r.get(8)?,
                    status: r.get(9)?,
                    confidence: r.get(10)?,
                    subject: r.get(11)?,
                    predicate: r.get(12)?,
                    value: r.get(13)?,
                    payload: r.get(14)?,
                    is_pinned: r.get::<_, i64>(15)? != 0,
                    created_at: r.get(16)?,
                },
            ))
        },
    )
    .optional()
}

/// Log item `id` (just written, or its text rewritten by `redact --apply`) as a knowledge
/// event: the whole item as it is now.
pub(crate) fn log_item(c: &Connection, id: i64) -> rusqlite::Result<()> {
    if !crate::sync::log::ENABLED.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    let Some((project, item)) = item_of(c, id)? else {
        return Ok(());
    };
    crate::sync::log::append_knowledge(c, &project, KnowledgeEvent::Item(Box::new(item)))
}

/// Item `id` received again with other text (`redact --apply` on another device): its text
/// fields become the received ones (already through this device's redactor); its state stays.
/// Whether anything changed.
pub(crate) fn rewrite_text(
    c: &Connection,
    id: i64,
    it: &KnowledgeItem,
    now: i64,
) -> rusqlite::Result<bool> {
    let n = c.execute(
        "UPDATE knowledge SET title = ?2, summary = ?3, reason = ?4, subject = ?5, value = ?6,
                payload = ?7, updated_at = ?8
          WHERE id = ?1 AND (title IS NOT ?2 OR summary IS NOT ?3 OR reason IS NOT ?4
                OR subject IS NOT ?5 OR value IS NOT ?6 OR payload IS NOT ?7)",
        params![id, it.title, it.summary, it.reason, it.subject, it.value, it.payload, now],
    )?;
    Ok(n > 0)
}

/// Log a change (`action`: a lifecycle action's name, `pin` or `unpin`) of item `id`.
fn log_change(
    c: &Connection,
    id: i64,
    action: &str,
    reason: &str,
    new_id: Option<i64>,
) -> rusqlite::Result<()> {
    if !crate::sync::log::ENABLED.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(());
    }
    let Some(target) = sync_name(c, id)? else {
        return Ok(());
    };
    let new_target = match new_id {
        Some(n) => match sync_name(c, n)? {
            Some(name) => Some(name),
            // Superseded by an item the other devices do not have: nothing they can apply.
            None => return Ok(()),
        },
        None => None,
    };
    let ev = KnowledgeEvent::Change {
        target,
        action: action.to_string(),
        reason: reason.to_string(),
        new_target,
    };
    crate::sync::log::append_knowledge(c, &project_of(c, id)?, ev)
}

/// Apply a knowledge event received from another device, in the pull's transaction: an item
/// not held yet is stored as its device wrote it (its status decided by the rules there); a
/// change goes through the same rules as here and is skipped when they refuse it (already
/// applied, or its item is not here). Never logged again: it belongs to its origin's stream.
/// Returns whether anything changed.
pub fn apply_event(
    c: &Connection,
    project: &str,
    ev: &KnowledgeEvent,
    now: i64,
) -> rusqlite::Result<bool> {
    match ev {
        KnowledgeEvent::Item(it) => {
            let class = Class::parse(&it.class);
            let status = Status::parse(&it.status);
            let fits = class.zip(status).is_some_and(|(c, s)| s.fits(c))
                && MemorySource::parse(&it.memory_source).is_some()
                && matches!(it.scope.as_str(), "project" | "global")
                && !it.item_kind.is_empty()
                && !project.is_empty();
            // Held already, or forgotten here (purged: a late copy is not stored again).
            if !fits
                || resolve(c, &it.uid)?.is_some()
                || crate::sync::tombstone::is_forgotten(c, &it.uid)?
            {
                if !fits {
                    tracing::warn!(
                        "sync: knowledge item {} is not one this nmem can store; skipped",
                        it.uid
                    );
                }
                return Ok(false);
            }
            c.execute(
                "INSERT INTO knowledge (class, kind, project, scope, title, summary, reason,
                                        memory_source, status, confidence, subject, predicate,
                                        value, payload, is_pinned, created_at, updated_at, uid)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                         ?16, ?17)",
                params![
                    it.class,
                    it.item_kind,
                    project,
                    it.scope,
                    it.title,
                    it.summary,
                    it.reason,
                    it.memory_source,
                    it.status,
                    it.confidence,
                    it.subject,
                    it.predicate,
                    it.value,
                    it.payload,
                    it.is_pinned as i64,
                    it.created_at,
                    it.uid
                ],
            )?;
            let id = c.last_insert_rowid();
            audit(c, id, now, "created", None, status, &it.reason, None)?;
            Ok(true)
        }
        KnowledgeEvent::Change {
            target,
            action,
            reason,
            new_target,
        } => {
            let Some(id) = resolve(c, target)? else {
                return Ok(false);
            };
            if let Some(pinned) = match action.as_str() {
                "pin" => Some(true),
                "unpin" => Some(false),
                _ => None,
            } {
                return set_pin(c, id, pinned, now);
            }
            let Some(action) = Action::parse(action) else {
                tracing::warn!("sync: knowledge change `{action}` is unknown here; skipped");
                return Ok(false);
            };
            let new_id = match new_target {
                Some(t) => match resolve(c, t)? {
                    Some(n) => Some(n),
                    None => return Ok(false),
                },
                None => None,
            };
            let req = LifecycleRequest {
                action,
                id,
                new_id,
                reason: reason.clone(),
            };
            match change_in(c, &req, reason, now) {
                Ok(_) => Ok(true),
                Err(WriteError::Invalid(_) | WriteError::NotFound(_) | WriteError::Conflict(_)) => {
                    Ok(false)
                }
                Err(e) => Err(rusqlite::Error::ToSqlConversionFailure(Box::new(
                    std::io::Error::other(e.to_string()),
                ))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nmem_proto::knowledge::Payload;
    use serde_json::json;

    const T0: i64 = 1_780_000_000_000;

    /// A database with one session of `acme-api`: a read of `src/retry.ts` (obs 1), a command
    /// (obs 2).
    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        c.execute_batch(&format!(
            "INSERT INTO sessions (id, harness, project, project_root, started_at)
                  VALUES ('s1', 'claude-code', 'acme-api', '/p/acme-api', {T0});
             INSERT INTO observations (id, session_id, timestamp, obs_type, source_event, file_path, content, project, harness) VALUES
               (1, 's1', {T0}, 'file_read', 'PostToolUse', '/p/acme-api/src/retry.ts', 'src/retry.ts: const MAX_RETRIES = 5', 'acme-api', 'claude-code'),
               (2, 's1', {T0} + 1, 'command', 'PostToolUse', NULL, 'npm test', 'acme-api', 'claude-code');"
        ))
        .unwrap();
        (dir, c)
    }

    fn req(kind: &str, title: &str, source: MemorySource) -> RememberRequest {
        RememberRequest {
            class: Class::Knowledge,
            kind: kind.into(),
            title: title.into(),
            summary: String::new(),
            reason: "it changes how we work here".into(),
            memory_source: source,
            scope_refs: vec![SCOPE_PROJECT.into()],
            status: None,
            confidence: None,
            payload: None,
            evidence_refs: Vec::new(),
            project: Some("acme-api".into()),
            cwd: None,
        }
    }

    fn claim(subject: &str, predicate: &str, value: serde_json::Value) -> Option<Payload> {
        Some(Payload {
            subject: Some(subject.into()),
            predicate: Some(predicate.into()),
            value: Some(value),
            ..Payload::default()
        })
    }

    fn write(c: &mut Connection, r: &RememberRequest) -> Result<Remembered, WriteError> {
        let v = validate(r).map_err(|e| WriteError::Invalid(e.to_string()))?;
        let payload = r.payload.clone().map(|p| serde_json::to_value(p).unwrap());
        write_item(c, r, &v, payload, "acme-api", T0 + 100)
    }

    fn act(
        c: &mut Connection,
        action: Action,
        id: i64,
        new_id: Option<i64>,
    ) -> Result<LifecycleReply, WriteError> {
        let r = LifecycleRequest {
            action,
            id,
            new_id,
            reason: "reviewed the code".into(),
        };
        change(c, &r, "reviewed the code", T0 + 200)
    }

    fn count(c: &Connection, sql: &str) -> i64 {
        c.query_row(sql, [], |r| r.get(0)).unwrap()
    }

    #[test]
    fn agent_inferred_claims_start_as_candidates_and_others_active() {
        let (_d, mut c) = db();
        let mut r = req(
            "fact",
            "Retries are capped at 5",
            MemorySource::AgentInferred,
        );
        r.status = Some(Status::Active);
        let out = write(&mut c, &r).unwrap();
        assert_eq!(out.item.status, Status::Candidate);
        assert!(out.notes[0].contains("candidate"), "{:?}", out.notes);
        let out = write(
            &mut c,
            &req(
                "decision",
                "Use Postgres advisory locks",
                MemorySource::UserDeclared,
            ),
        )
        .unwrap();
        assert_eq!(out.item.status, Status::Active);
        assert!(out.notes.is_empty());
    }

    #[test]
    fn an_exact_structured_duplicate_is_refused_and_changes_nothing() {
        let (_d, mut c) = db();
        let mut r = req("fact", "API port", MemorySource::UserDeclared);
        r.payload = claim("api", "port", json!(8080));
        write(&mut c, &r).unwrap();
        let before = (
            count(&c, "SELECT COUNT(*) FROM knowledge"),
            count(&c, "SELECT COUNT(*) FROM knowledge_audit"),
        );
        r.title = "The API listens on 8080".into();
        match write(&mut c, &r) {
            Err(WriteError::Conflict(m)) => {
                assert!(m.contains("#1") && m.contains("nothing was written"), "{m}")
            }
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(
            before,
            (
                count(&c, "SELECT COUNT(*) FROM knowledge"),
                count(&c, "SELECT COUNT(*) FROM knowledge_audit")
            )
        );
        // Another kind, or another project's non-global item, is not the same claim.
        r.kind = "convention".into();
        assert!(write(&mut c, &r).is_ok());
    }

    #[test]
    fn the_same_subject_and_predicate_with_another_value_contests_both() {
        let (_d, mut c) = db();
        let mut r = req("fact", "API port", MemorySource::UserDeclared);
        r.payload = claim("api", "port", json!(8080));
        let first = write(&mut c, &r).unwrap().item.id;
        r.payload = claim("api", "port", json!(9090));
        let out = write(&mut c, &r).unwrap();
        assert_eq!(out.item.status, Status::Contested);
        assert_eq!(out.contested_with, vec![first]);
        let old = read_item(&c, first).unwrap().unwrap();
        assert_eq!(old.status, Status::Contested);
        assert_eq!(
            count(&c, &format!("SELECT COUNT(*) FROM knowledge_audit WHERE action = 'contested' AND knowledge_id = {first} AND other_id = {}", out.item.id)),
            1
        );
        // Promoting the right one settles it; the wrong one is superseded by it.
        act(&mut c, Action::Supersede, first, Some(out.item.id)).unwrap();
        let (old, new) = (
            read_item(&c, first).unwrap().unwrap(),
            read_item(&c, out.item.id).unwrap().unwrap(),
        );
        assert_eq!(
            (old.status, old.superseded_by),
            (Status::Superseded, Some(new.id))
        );
        assert_eq!(new.status, Status::Active);
    }

    #[test]
    fn similar_unstructured_items_are_written_and_reported() {
        let (_d, mut c) = db();
        let mut r = req(
            "decision",
            "Deduplicate webhook events by event id",
            MemorySource::UserDeclared,
        );
        r.summary = "Stripe redelivers events; store the event id with a unique index".into();
        let first = write(&mut c, &r).unwrap().item.id;
        r.title = "Deduplicate webhook events by their event id".into();
        let out = write(&mut c, &r).unwrap();
        assert_ne!(out.item.id, first);
        assert_eq!(out.possible_duplicates.len(), 1);
        let d = &out.possible_duplicates[0];
        assert_eq!(d.object_id, first);
        assert!(
            d.score >= SIMILAR && d.reasons.contains(&"similar title".to_string()),
            "{d:?}"
        );
        let other = write(
            &mut c,
            &req("fact", "Node 20 is required", MemorySource::UserDeclared),
        )
        .unwrap();
        assert!(other.possible_duplicates.is_empty());
    }

    #[test]
    fn evidence_must_exist_and_hold_the_text_it_had() {
        let (_d, mut c) = db();
        let mut r = req(
            "fact",
            "Retries are capped at 5",
            MemorySource::UserDeclared,
        );
        r.evidence_refs = vec![EvidenceRef {
            source_id: "obs:99".into(),
            segment_id: None,
            hash: None,
            file_path: None,
        }];
        assert!(matches!(write(&mut c, &r), Err(WriteError::Invalid(m)) if m.contains("obs:99")));
        r.evidence_refs[0].source_id = "src:readme".into();
        assert!(
            matches!(write(&mut c, &r), Err(WriteError::Invalid(m)) if m.contains("source id"))
        );
        r.evidence_refs[0].source_id = "readme".into();
        assert!(matches!(write(&mut c, &r), Err(WriteError::Invalid(m)) if m.contains("obs:<id>")));
        r.evidence_refs[0] = EvidenceRef {
            source_id: "obs:1".into(),
            segment_id: None,
            hash: Some("deadbeef".into()),
            file_path: None,
        };
        assert!(
            matches!(write(&mut c, &r), Err(WriteError::Invalid(m)) if m.contains("does not match"))
        );
        assert_eq!(count(&c, "SELECT COUNT(*) FROM knowledge"), 0);
        let h = crate::sha256_hex(b"src/retry.ts: const MAX_RETRIES = 5");
        r.evidence_refs[0].hash = Some(h[..12].to_uppercase());
        let out = write(&mut c, &r).unwrap();
        assert_eq!(
            out.item.evidence[0].file_path.as_deref(),
            Some("/p/acme-api/src/retry.ts")
        );
    }

    #[test]
    fn a_later_edit_of_a_cited_file_flags_the_item_and_review_clears_it() {
        let (_d, mut c) = db();
        let mut r = req(
            "fact",
            "Retries are capped at 5",
            MemorySource::UserDeclared,
        );
        r.evidence_refs = vec![EvidenceRef {
            source_id: "obs:1".into(),
            segment_id: None,
            hash: None,
            file_path: None,
        }];
        let id = write(&mut c, &r).unwrap().item.id;
        let edit = |c: &Connection, obs: i64, path: &str, ty: &str| {
            c.execute(
                "INSERT INTO observations (id, session_id, timestamp, obs_type, source_event, file_path, content, project, harness)
                 VALUES (?1, 's1', ?2, ?3, 'PostToolUse', ?4, 'edit', 'acme-api', 'claude-code')",
                params![obs, T0 + 300 + obs, ty, path],
            )
            .unwrap();
            // What the writer does after each insert (store::follow).
            crate::store::follow::inserted_by_sql(c, obs).unwrap();
        };
        // Another file, or a read of this one, does not.
        edit(&c, 10, "/p/acme-api/src/other.ts", "file_edit");
        edit(&c, 11, "/p/acme-api/src/retry.ts", "file_read");
        assert!(!read_item(&c, id).unwrap().unwrap().possibly_stale);
        edit(&c, 12, "/p/acme-api/src/retry.ts", "file_edit");
        let item = read_item(&c, id).unwrap().unwrap();
        assert_eq!((item.possibly_stale, item.stale_obs_id), (true, Some(12)));
        assert_eq!(count(&c, &format!("SELECT COUNT(*) FROM knowledge_audit WHERE knowledge_id = {id} AND action = 'stale' AND other_id = 12")), 1);
        // Flagged once: a second edit keeps the first cause.
        edit(&c, 13, "/p/acme-api/src/retry.ts", "file_write");
        assert_eq!(read_item(&c, id).unwrap().unwrap().stale_obs_id, Some(12));
        act(&mut c, Action::Promote, id, None).unwrap();
        assert!(!read_item(&c, id).unwrap().unwrap().possibly_stale);
        // Promoting an active item that is not flagged has nothing to do.
        assert!(matches!(
            act(&mut c, Action::Promote, id, None),
            Err(WriteError::Invalid(_))
        ));
    }

    #[test]
    fn a_saved_memory_is_a_note_that_follows_its_row() {
        let (_d, mut c) = db();
        c.execute_batch(&format!(
            "INSERT INTO observations (id, session_id, timestamp, obs_type, source_event, content, metadata, project, harness)
             VALUES (20, 's1', {T0} + 50, 'memory', 'save_memory', 'Rate limits\nper org, never per user', '{{\"title\":\"Rate limits\"}}', 'acme-api', 'nmem');"
        ))
        .unwrap();
        crate::store::follow::inserted_by_sql(&c, 20).unwrap();
        let id: i64 = c
            .query_row("SELECT id FROM knowledge WHERE obs_id = 20", [], |r| {
                r.get(0)
            })
            .unwrap();
        let note = read_item(&c, id).unwrap().unwrap();
        assert_eq!(
            (note.kind.as_str(), note.status, note.memory_source),
            ("note", Status::Active, MemorySource::UserDeclared)
        );
        assert_eq!(note.title, "Rate limits");
        act(&mut c, Action::Contest, id, None).unwrap();
        c.execute(
            "UPDATE observations SET content = '[REDACTED]' WHERE id = 20",
            [],
        )
        .unwrap();
        assert_eq!(read_item(&c, id).unwrap().unwrap().summary, "[REDACTED]");
        c.execute("DELETE FROM observations WHERE id = 20", [])
            .unwrap();
        assert!(read_item(&c, id).unwrap().is_none());
        assert_eq!(
            count(&c, "SELECT COUNT(*) FROM knowledge_audit"),
            0,
            "the audit goes with the item"
        );
    }

    #[test]
    fn lifecycle_changes_follow_the_status_rules() {
        let (_d, mut c) = db();
        let k = write(&mut c, &req("fact", "Node 20", MemorySource::UserDeclared))
            .unwrap()
            .item
            .id;
        let mut w = req("task", "Remove the v1 export", MemorySource::UserDeclared);
        w.class = Class::WorkItem;
        let t = write(&mut c, &w).unwrap().item;
        assert_eq!(t.status, Status::Open);
        assert!(
            matches!(act(&mut c, Action::Done, k, None), Err(WriteError::Invalid(m)) if m.contains("work_item"))
        );
        assert!(matches!(
            act(&mut c, Action::Promote, t.id, None),
            Err(WriteError::Invalid(_))
        ));
        assert!(matches!(
            act(&mut c, Action::Supersede, k, Some(k)),
            Err(WriteError::Invalid(_))
        ));
        assert!(matches!(
            act(&mut c, Action::Supersede, k, None),
            Err(WriteError::Invalid(_))
        ));
        assert!(matches!(
            act(&mut c, Action::Supersede, k, Some(77)),
            Err(WriteError::NotFound(_))
        ));
        assert!(matches!(
            act(&mut c, Action::Contest, 77, None),
            Err(WriteError::NotFound(_))
        ));
        act(&mut c, Action::Done, t.id, None).unwrap();
        assert!(
            matches!(act(&mut c, Action::Done, t.id, None), Err(WriteError::Invalid(m)) if m.contains("is done"))
        );
        act(&mut c, Action::Reopen, t.id, None).unwrap();
        act(&mut c, Action::Archive, k, None).unwrap();
        assert!(matches!(
            act(&mut c, Action::Contest, k, None),
            Err(WriteError::Invalid(_))
        ));
        let trail: Vec<String> = c
            .prepare("SELECT action || ':' || COALESCE(to_status, '') FROM knowledge_audit WHERE knowledge_id = ?1 ORDER BY id")
            .unwrap()
            .query_map([t.id], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(trail, ["created:open", "status:done", "status:open"]);
    }

    #[test]
    fn validation_names_the_field_to_fix() {
        let r = req("rumour", "x", MemorySource::UserDeclared);
        assert!(validate(&r)
            .unwrap_err()
            .to_string()
            .contains("fact, decision"));
        let mut r = req("fact", "x", MemorySource::UserDeclared);
        r.scope_refs = vec!["scope:team".into()];
        assert!(validate(&r)
            .unwrap_err()
            .to_string()
            .contains("scope:global"));
        let mut r = req("fact", "x", MemorySource::UserDeclared);
        r.status = Some(Status::Open);
        assert!(validate(&r)
            .unwrap_err()
            .to_string()
            .contains("candidate, active"));
        let mut r = req("fact", "x", MemorySource::UserDeclared);
        r.reason = "  ".into();
        assert!(validate(&r).unwrap_err().to_string().contains("reason"));
        let mut r = req("fact", "x", MemorySource::UserDeclared);
        r.payload = Some(Payload {
            subject: Some("api".into()),
            ..Payload::default()
        });
        assert!(validate(&r).unwrap_err().to_string().contains("predicate"));
        let mut r = req("fact", "x", MemorySource::UserDeclared);
        r.confidence = Some(1.5);
        assert!(validate(&r).unwrap_err().to_string().contains("confidence"));
    }

    #[test]
    fn open_work_items_are_in_the_digest_until_done() {
        let (_d, mut c) = db();
        let mut w = req(
            "bug",
            "Nightly export drops the last page",
            MemorySource::UserDeclared,
        );
        w.class = Class::WorkItem;
        let id = write(&mut c, &w).unwrap().item.id;
        let project = crate::ingest::Project {
            name: "acme-api".into(),
            root: "/p/acme-api".into(),
            ..Default::default()
        };
        let digest = |c: &Connection| {
            crate::context::digest(
                c,
                &project,
                "s2",
                "startup",
                crate::context::DigestLimits::default(),
                T0 + 1000,
            )
            .unwrap()
            .unwrap_or_default()
        };
        let gen = crate::context::generation(&c, "acme-api").unwrap();
        let text = digest(&c);
        assert!(
            text.contains(&format!(
                "## Open work\n- bug k{id}: Nightly export drops the last page"
            )),
            "{text}"
        );
        act(&mut c, Action::Done, id, None).unwrap();
        assert_ne!(
            gen,
            crate::context::generation(&c, "acme-api").unwrap(),
            "the cached digest is invalidated"
        );
        assert!(!digest(&c).contains("Open work"));
    }
}
