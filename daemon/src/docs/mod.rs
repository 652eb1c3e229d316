//! Documents: sources ingested by `nmem ingest` (`POST /v1/docs/ingest`), their chunks, and the
//! chunks as search results of kind `doc`.
//!
//! The client reads the sources and sends their text (it runs as the user, where the files are;
//! the daemon never opens a path a request names, so no request can make it follow a symlink or
//! block on a FIFO). Here each text is cleaned of terminal control sequences and redacted whole
//! (a secret cut in two by chunking would no longer be recognised), hashed, and chunked
//! ([`chunk`]) on a blocking thread; then one writer job compares it with what is stored:
//!
//! * the same source hash: `noop`, nothing written;
//! * otherwise each chunk is matched by its hash: an unchanged chunk keeps its row and id (its
//!   ordinal, heading and lines are updated), a new one is inserted, one gone is deleted; a chunk
//!   whose text another source of the project already holds, or that repeats one earlier in the
//!   same source, is counted `duplicate` and not stored again.
//!
//! Chunks have their own full-text table (migration 009) and their own vectors (migration 014,
//! made by the embedding backfill after the observations' and prompts'), searched after the
//! observations' sources: see [`search`].

pub mod chunk;

use crate::app::App;
use crate::query::{project_of, QueryError};
use nmem_proto::docs::{
    ChunkCounts, DocRef, IngestReply, IngestRequest, SourceKind, SourceOutcome, SourceStatus,
    SourceText,
};
use nmem_proto::query::{Observation, RetrievalSource, SearchHit};
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// The largest source text taken (16 MiB): a bigger file is rarely documentation, and one
/// request's body is bounded anyway (`[limits] max_body_mb`).
pub const MAX_SOURCE_BYTES: usize = 16 << 20;
/// The longest locator (a path or URL).
pub const MAX_LOCATOR: usize = 4096;
/// Sources per request: the client sends a large repository in several requests.
pub const MAX_SOURCES: usize = 5_000;

/// A source ready to store: redacted, hashed, chunked.
struct Prepared {
    locator: String,
    kind: SourceKind,
    hash: String,
    size: usize,
    chunks: Vec<(chunk::Chunk, String)>,
}

fn sha256_hex(s: &str) -> String {
    crate::sha256_hex(s.as_bytes())
}

/// Why a source cannot be taken, or `None`.
fn refusal(s: &SourceText) -> Option<String> {
    if s.locator.trim().is_empty() {
        return Some("the source has no locator: give its path, URL or name".into());
    }
    if s.locator.len() > MAX_LOCATOR {
        return Some(format!("the locator is over {MAX_LOCATOR} bytes"));
    }
    if s.text.len() > MAX_SOURCE_BYTES {
        return Some(format!(
            "{} MiB of text, over the {} MiB a source may have",
            s.text.len() >> 20,
            MAX_SOURCE_BYTES >> 20
        ));
    }
    if s.text.contains('\0') {
        return Some("binary content (a NUL byte): only text is ingested".into());
    }
    None
}

fn is_markdown(s: &SourceText) -> bool {
    let l = s.locator.to_ascii_lowercase();
    s.markdown
        || matches!(s.kind, SourceKind::Markdown | SourceKind::Conversation)
        || l.ends_with(".md")
        || l.ends_with(".markdown")
        || l.ends_with(".mdx")
}

fn prepare(app: &App, s: SourceText) -> Prepared {
    let markdown = is_markdown(&s);
    let mut text = s.text;
    crate::ingest::clean::string(&mut text);
    app.ingest.redactor.redact(&mut text);
    let chunks = if markdown {
        chunk::markdown(&text)
    } else {
        chunk::plain(&text)
    };
    Prepared {
        locator: s.locator,
        kind: s.kind,
        hash: sha256_hex(&text),
        size: text.len(),
        chunks: chunks
            .into_iter()
            .map(|c| {
                let h = sha256_hex(&c.text);
                (c, h)
            })
            .collect(),
    }
}

/// `POST /v1/docs/ingest`.
pub async fn ingest(app: Arc<App>, req: IngestRequest) -> Result<IngestReply, QueryError> {
    crate::query::bounds::check_scope(&req.project, &req.cwd)?;
    if req.sources.is_empty() {
        return Err(QueryError::BadRequest(
            "`sources` is empty: give at least one source to ingest".into(),
        ));
    }
    if req.sources.len() > MAX_SOURCES {
        return Err(QueryError::BadRequest(format!(
            "{} sources in one request, at most {MAX_SOURCES}: send them in several",
            req.sources.len()
        )));
    }
    let project = project_of(&app, &req.project, &req.cwd).ok_or_else(|| {
        QueryError::BadRequest(
            "documents belong to a project: give `project` or `cwd` (`nmem ingest --project P`)"
                .into(),
        )
    })?;
    let mut outcomes: Vec<Option<SourceOutcome>> = Vec::new();
    let mut todo = Vec::new();
    for s in req.sources {
        match refusal(&s) {
            Some(reason) => outcomes.push(Some(SourceOutcome {
                locator: s.locator.chars().take(200).collect(),
                kind: s.kind,
                status: SourceStatus::Skipped,
                reason: Some(reason),
                source_id: None,
                chunks: ChunkCounts::default(),
            })),
            None => {
                outcomes.push(None);
                todo.push(s);
            }
        }
    }
    let prepared = {
        let app = app.clone();
        tokio::task::spawn_blocking(move || {
            todo.into_iter()
                .map(|s| prepare(&app, s))
                .collect::<Vec<_>>()
        })
        .await
        .map_err(|e| QueryError::Read(format!("preparing documents failed: {e}")))?
    };
    let p = project.clone();
    let stored = app
        .writer
        .exec(move |c| Ok(store(c, &p, prepared, nmem_proto::now_ms())?))
        .await?;
    let mut stored = stored.into_iter();
    let mut reply = IngestReply {
        project,
        sources: outcomes
            .into_iter()
            .filter_map(|o| o.or_else(|| stored.next()))
            .collect(),
        ..IngestReply::default()
    };
    reply.total();
    Ok(reply)
}

/// Store prepared sources in one transaction; an outcome per source, in order.
fn store(
    c: &mut Connection,
    project: &str,
    sources: Vec<Prepared>,
    now: i64,
) -> rusqlite::Result<Vec<SourceOutcome>> {
    let tx = c.transaction()?;
    let mut out = Vec::with_capacity(sources.len());
    for s in sources {
        out.push(store_one(&tx, project, s, now)?);
    }
    tx.commit()?;
    Ok(out)
}

fn store_one(
    tx: &rusqlite::Transaction,
    project: &str,
    s: Prepared,
    now: i64,
) -> rusqlite::Result<SourceOutcome> {
    let existing: Option<(i64, String)> = tx
        .query_row(
            "SELECT id, hash FROM doc_sources WHERE project = ?1 AND locator = ?2",
            params![project, s.locator],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let mut counts = ChunkCounts::default();
    let (id, status) = match existing {
        Some((id, hash)) if hash == s.hash => {
            counts.kept = tx.query_row(
                "SELECT COUNT(*) FROM doc_chunks WHERE source_id = ?1",
                [id],
                |r| r.get::<_, i64>(0),
            )? as u64;
            return Ok(SourceOutcome {
                locator: s.locator,
                kind: s.kind,
                status: SourceStatus::Noop,
                reason: None,
                source_id: Some(id),
                chunks: counts,
            });
        }
        Some((id, _)) => {
            tx.execute(
                "UPDATE doc_sources SET kind = ?2, hash = ?3, byte_size = ?4, updated_at = ?5 WHERE id = ?1",
                params![id, s.kind.name(), s.hash, s.size as i64, now],
            )?;
            (id, SourceStatus::Updated)
        }
        None => {
            tx.execute(
                "INSERT INTO doc_sources (project, locator, kind, hash, byte_size, ingested_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
                params![project, s.locator, s.kind.name(), s.hash, s.size as i64, now],
            )?;
            (tx.last_insert_rowid(), SourceStatus::Ingested)
        }
    };
    let mut old: HashMap<String, Vec<i64>> = HashMap::new();
    {
        let mut stmt = tx.prepare("SELECT id, hash FROM doc_chunks WHERE source_id = ?1")?;
        let rows = stmt.query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?;
        for r in rows {
            let (cid, h) = r?;
            old.entry(h).or_default().push(cid);
        }
    }
    let mut seen = HashSet::new();
    let mut elsewhere = tx.prepare(
        "SELECT 1 FROM doc_chunks c JOIN doc_sources s ON s.id = c.source_id
          WHERE c.hash = ?1 AND s.project = ?2 AND c.source_id != ?3 LIMIT 1",
    )?;
    let mut keep = tx.prepare(
        "UPDATE doc_chunks SET ordinal = ?2, heading = ?3, line_start = ?4, line_end = ?5
          WHERE id = ?1 AND (ordinal, heading, line_start, line_end) IS NOT (?2, ?3, ?4, ?5)",
    )?;
    let mut insert = tx.prepare(
        "INSERT INTO doc_chunks (source_id, ordinal, heading, line_start, line_end, content, hash)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    for (ordinal, (ch, hash)) in s.chunks.iter().enumerate() {
        let at = (
            ordinal as i64,
            &ch.heading,
            ch.line_start as i64,
            ch.line_end as i64,
        );
        if !seen.insert(hash.as_str()) {
            counts.duplicate += 1;
        } else if let Some(cid) = old.get_mut(hash).and_then(|v| v.pop()) {
            keep.execute(params![cid, at.0, at.1, at.2, at.3])?;
            counts.kept += 1;
        } else if elsewhere.exists(params![hash, project, id])? {
            counts.duplicate += 1;
        } else {
            insert.execute(params![id, at.0, at.1, at.2, at.3, ch.text, hash])?;
            counts.added += 1;
        }
    }
    for cid in old.values().flatten() {
        tx.execute("DELETE FROM doc_chunks WHERE id = ?1", [cid])?;
        counts.removed += 1;
    }
    Ok(SourceOutcome {
        locator: s.locator,
        kind: s.kind,
        status,
        reason: None,
        source_id: Some(id),
        chunks: counts,
    })
}

/// How [`search`] weighs its two sources (from `[search]`, as the observations' fusion does).
pub struct Fusion<'a> {
    pub cfg: &'a crate::config::SearchConfig,
}

impl Fusion<'_> {
    fn lexical_weight(&self, tier: &str) -> f64 {
        match tier {
            crate::query::fts_query::ALL_WORDS => self.cfg.weight_all_words,
            crate::query::fts_query::MEANINGFUL_WORDS => self.cfg.weight_meaningful_words,
            crate::query::fts_query::MOST_WORDS => self.cfg.weight_most_words,
            _ => self.cfg.weight_any_word,
        }
    }
}

/// Document chunks matching the query, best first: search results of kind `doc`.
///
/// Two sources, fused by weighted reciprocal rank like the observations' (same `[search]`
/// weights, and a chunk matching every word stays above one found by meaning alone):
/// * lexical: `queries` are tried in order (the strict query, then looser tiers) until one
///   finds something; a query FTS5 refuses is skipped (the observations' search reports it);
/// * semantic: `near`, the chunks nearest to the query's vector ([`nearest`]), best first.
#[allow(clippy::too_many_arguments)]
pub fn search(
    c: &Connection,
    queries: &[(&'static str, String)],
    near: &[(i64, f32)],
    fusion: &Fusion,
    project: Option<&str>,
    limit: i64,
    offset: i64,
) -> rusqlite::Result<Vec<SearchHit>> {
    if limit <= 0 {
        return Ok(Vec::new());
    }
    let want = limit + offset;
    let (tier, lexical) = lexical(c, queries, project, want)?;
    let k = fusion.cfg.rrf_k.max(1.0);
    let bonus = if fusion.cfg.all_words_first {
        fusion.cfg.weight_semantic / (k + 1.0)
    } else {
        0.0
    };
    let mut hits: Vec<SearchHit> = Vec::with_capacity(lexical.len() + near.len());
    for (i, mut h) in lexical.into_iter().enumerate() {
        let tier = tier.unwrap_or_default();
        h.score = fusion.lexical_weight(tier) / (k + i as f64 + 1.0)
            + if tier == crate::query::fts_query::ALL_WORDS {
                bonus
            } else {
                0.0
            };
        h.retrieval_sources = vec![RetrievalSource {
            source: "lexical".into(),
            rank: i as u32 + 1,
            tier: Some(tier.to_string()),
            similarity: None,
            prompt_id: None,
        }];
        hits.push(h);
    }
    let ids: Vec<i64> = near.iter().take(want as usize).map(|(id, _)| *id).collect();
    let mut found: HashMap<i64, SearchHit> = hits_by_id(c, &ids)?
        .into_iter()
        .map(|h| (h.id, h))
        .collect();
    let mut rank = 0u32;
    for (id, sim) in near.iter().take(want as usize) {
        // A chunk whose project is not the one searched has no vector here (`nearest` filters
        // by project); one deleted since is simply missing.
        let add = fusion.cfg.weight_semantic / (k + rank as f64 + 1.0);
        let source = RetrievalSource {
            source: "semantic".into(),
            rank: rank + 1,
            tier: None,
            similarity: Some(*sim),
            prompt_id: None,
        };
        if let Some(h) = hits.iter_mut().find(|h| h.id == *id) {
            h.score += add;
            h.retrieval_sources.push(source);
        } else if let Some(mut h) = found.remove(id) {
            h.score = add;
            h.retrieval_sources = vec![source];
            hits.push(h);
        } else {
            continue;
        }
        rank += 1;
    }
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(b.id.cmp(&a.id)));
    Ok(hits
        .into_iter()
        .skip(offset as usize)
        .take(limit as usize)
        .collect())
}

/// The first of `queries` that finds chunks: its tier and its best `want` chunks.
fn lexical(
    c: &Connection,
    queries: &[(&'static str, String)],
    project: Option<&str>,
    want: i64,
) -> rusqlite::Result<(Option<&'static str>, Vec<SearchHit>)> {
    let mut stmt = c.prepare_cached(
        "SELECT d.id, s.updated_at, s.project, d.content, s.id, s.locator, s.kind, d.heading,
                d.line_start, d.line_end
           FROM doc_chunks_fts f
           JOIN doc_chunks d ON d.id = f.rowid
           JOIN doc_sources s ON s.id = d.source_id
          WHERE doc_chunks_fts MATCH ?1 AND (?2 IS NULL OR s.project = ?2)
          ORDER BY bm25(doc_chunks_fts, 1.0, 0.5)
          LIMIT ?3",
    )?;
    for (tier, q) in queries {
        if q.is_empty() {
            continue;
        }
        let rows = stmt.query_map(params![q, project, want], doc_hit);
        let hits: Vec<SearchHit> = match rows.and_then(|r| r.collect()) {
            Ok(h) => h,
            Err(rusqlite::Error::SqliteFailure(e, _)) if e.code == rusqlite::ErrorCode::Unknown => {
                continue
            }
            Err(e) => return Err(e),
        };
        if !hits.is_empty() {
            return Ok((Some(tier), hits));
        }
    }
    Ok((None, Vec::new()))
}

/// A search hit of kind `doc` from the columns of the search and get queries.
fn doc_hit(r: &rusqlite::Row) -> rusqlite::Result<SearchHit> {
    let content: String = r.get(3)?;
    let doc = doc_ref(r)?;
    Ok(SearchHit {
        kind: "doc".into(),
        id: r.get(0)?,
        timestamp: r.get(1)?,
        obs_type: Some("doc".into()),
        content_preview: nmem_proto::text::one_line(&content, 200),
        file_path: Some(doc.locator.clone()),
        project: r.get(2)?,
        doc: Some(doc),
        ..SearchHit::default()
    })
}

/// Chunks by id as search hits (those that still exist).
fn hits_by_id(c: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<SearchHit>> {
    let mut stmt = c.prepare_cached(
        "SELECT d.id, s.updated_at, s.project, d.content, s.id, s.locator, s.kind, d.heading,
                d.line_start, d.line_end
           FROM doc_chunks d JOIN doc_sources s ON s.id = d.source_id WHERE d.id = ?1",
    )?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.extend(stmt.query_row([id], doc_hit).optional()?);
    }
    Ok(out)
}

/// The `n` chunks of `project` (every project: `None`) nearest to the query vector `q`, by the
/// cosine of their int8 vectors of model `model` (`embed_models.id`), best first.
///
/// An exact scan, not the observations' cache of binary codes: a project's chunks are read
/// only when a search wants documents (the first page had room, or `doc` was asked), and they
/// number thousands where observations number up to a million (ARCHITECTURE.md, "Document
/// chunks by meaning").
pub fn nearest(
    c: &Connection,
    model: i64,
    project: Option<&str>,
    q: &[f32],
    n: usize,
) -> rusqlite::Result<Vec<(i64, f32)>> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let mut stmt = c.prepare_cached(
        "SELECT v.id, v.vec, v.scale FROM doc_vectors v
           JOIN doc_chunks d ON d.id = v.id JOIN doc_sources s ON s.id = d.source_id
          WHERE v.model = ?1 AND (?2 IS NULL OR s.project = ?2)",
    )?;
    let mut rows = stmt.query(params![model, project])?;
    let mut all: Vec<(i64, f32)> = Vec::new();
    while let Some(r) = rows.next()? {
        let blob = r.get_ref(1)?.as_blob()?;
        if blob.len() != q.len() {
            continue;
        }
        let scale: f64 = r.get(2)?;
        let dot: f32 = blob.iter().zip(q).map(|(&x, &y)| x as i8 as f32 * y).sum();
        all.push((r.get(0)?, dot * scale as f32));
    }
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    all.truncate(n);
    Ok(all)
}

/// A chunk's origin, from columns 4 to 9 of the search and get queries (source id, locator,
/// source kind, heading, first and last line).
fn doc_ref(r: &rusqlite::Row) -> rusqlite::Result<DocRef> {
    Ok(DocRef {
        source_id: r.get(4)?,
        locator: r.get(5)?,
        source_kind: r.get(6)?,
        heading: r.get(7)?,
        line_start: r.get(8)?,
        line_end: r.get(9)?,
    })
}

/// Chunks by id, as observations of type `doc` (`get` with `doc_ids`): the text, and in the
/// metadata where it came from.
pub fn get(c: &Connection, ids: &[i64]) -> rusqlite::Result<Vec<Observation>> {
    let mut stmt = c.prepare_cached(
        "SELECT d.id, s.updated_at, s.project, d.content, s.id, s.locator, s.kind, d.heading,
                d.line_start, d.line_end
           FROM doc_chunks d JOIN doc_sources s ON s.id = d.source_id WHERE d.id = ?1",
    )?;
    let mut out = Vec::new();
    for id in ids {
        let row = stmt
            .query_row([id], |r| {
                let doc = doc_ref(r)?;
                Ok(Observation {
                    id: r.get(0)?,
                    timestamp: r.get(1)?,
                    project: r.get(2)?,
                    obs_type: "doc".into(),
                    source_event: "ingest".into(),
                    content: r.get(3)?,
                    file_path: Some(doc.locator.clone()),
                    metadata: serde_json::to_value(&doc).ok(),
                    ..Observation::default()
                })
            })
            .optional()?;
        out.extend(row);
    }
    Ok(out)
}

/// The chunks around chunk `id` in its source, in order (`timeline` of a document chunk): at most
/// `before` before it and `after` after it.
pub fn timeline(
    c: &Connection,
    id: i64,
    before: i64,
    after: i64,
) -> rusqlite::Result<Option<nmem_proto::query::Timeline>> {
    let Some((source, ordinal)) = c
        .query_row(
            "SELECT source_id, ordinal FROM doc_chunks WHERE id = ?1",
            [id],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )
        .optional()?
    else {
        return Ok(None);
    };
    let ids = |sql: &str, n: i64| -> rusqlite::Result<Vec<i64>> {
        let mut stmt = c.prepare_cached(sql)?;
        let rows = stmt.query_map(params![source, ordinal, n], |r| r.get(0))?;
        rows.collect()
    };
    let mut b = ids(
        "SELECT id FROM doc_chunks WHERE source_id = ?1 AND ordinal < ?2 ORDER BY ordinal DESC LIMIT ?3",
        before,
    )?;
    b.reverse();
    let a = ids(
        "SELECT id FROM doc_chunks WHERE source_id = ?1 AND ordinal > ?2 ORDER BY ordinal LIMIT ?3",
        after,
    )?;
    let Some(anchor) = get(c, &[id])?.pop() else {
        return Ok(None);
    };
    Ok(Some(nmem_proto::query::Timeline {
        anchor,
        before: get(c, &b)?,
        after: get(c, &a)?,
    }))
}

/// Delete a project's sources and their chunks (a purge by project); returns the chunks
/// deleted.
pub fn purge_project(tx: &rusqlite::Transaction, project: &str) -> rusqlite::Result<u64> {
    let n = tx.execute(
        "DELETE FROM doc_chunks WHERE source_id IN (SELECT id FROM doc_sources WHERE project = ?1)",
        [project],
    )?;
    tx.execute("DELETE FROM doc_sources WHERE project = ?1", [project])?;
    Ok(n as u64)
}

/// How many chunks a project has (a purge's dry run).
pub fn count_project(c: &Connection, project: &str) -> rusqlite::Result<u64> {
    c.query_row(
        "SELECT COUNT(*) FROM doc_chunks d JOIN doc_sources s ON s.id = d.source_id WHERE s.project = ?1",
        [project],
        |r| r.get::<_, i64>(0),
    )
    .map(|n| n as u64)
}
