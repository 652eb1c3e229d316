//! CodexMem's worker API (`/api/*`, seed §3), adapted to an LLM-free daemon, and the viewer's
//! own routes. Every handler is a thin layer over the `/v1` code: queries go through `query`
//! (search, get, timeline, save), hook entry points through `server::record_event` (the same
//! ingest as `nmem record`), pins and purges through the same writer jobs. The lists the viewer
//! pages through are single indexed queries (`LIMIT`/`OFFSET` over an index's order).
//!
//! Errors follow seed §4 (400 bad parameters, 404 missing, 503 starting, 500 internal) with
//! the seed's messages where it gives them; LLM routes say what nmem does instead (501).

use super::feed::Item;
use super::ops;
use crate::app::App;
use crate::query::{self, observation, QueryError, OBS_COLUMNS};
use crate::server::{body, ApiError};
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use nmem_proto::query::{GetRequest, Observation, SaveRequest, SearchRequest, TimelineRequest};
use nmem_proto::wire::{code, RecordOutcome};
use rusqlite::OptionalExtension;
use serde::de::DeserializeOwned;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

type R = Result<Response, ApiError>;

pub fn routes() -> Router<Arc<App>> {
    Router::new()
        .route("/api/health", get(health))
        .route("/api/readiness", get(readiness))
        .route("/api/version", get(version))
        .route("/api/sessions/init", post(session_init))
        .route("/api/sessions/observations", post(session_observation))
        .route("/api/sessions/summarize", post(session_summarize))
        .route("/api/sessions/complete", post(session_complete))
        .route("/api/search", get(search))
        .route("/api/timeline", get(timeline))
        .route("/api/observations/batch", post(batch))
        .route("/api/observation/{id}", get(one))
        .route("/api/observations", get(observations))
        .route("/api/summaries", get(summaries))
        .route("/api/prompts", get(prompts))
        .route("/api/projects", get(projects))
        .route("/api/sessions", get(sessions))
        .route("/api/session/{id}", get(session))
        .route("/api/stats", get(stats))
        .route("/api/processing-status", get(processing))
        .route("/api/memory/save", post(save))
        .route("/api/pin", post(crate::server::pin))
        .route("/api/purge", post(purge))
        .route("/api/export", get(export))
        .route("/api/events", get(events))
        .route("/api/ops/index-status", get(index_status))
        .route("/api/ops/search-traces", get(search_traces))
        .route("/api/ops/search-traces/export", get(search_traces_export))
        .route("/api/ops/session-timings", get(session_timings))
        .route(
            "/api/ops/session-timings/export",
            get(session_timings_export),
        )
        .route("/api/ops/failure-summary", get(failure_summary))
        .route(
            "/api/ops/failure-summary/export",
            get(failure_summary_export),
        )
        .route("/api/ops/trends", get(trends))
        .route("/api/ops/agent-metrics", get(agent_metrics))
        .route("/api/ops/agent-metrics/reset", post(agent_metrics))
        .route("/api/ops/backfill/chroma", post(backfill_chroma))
        .route("/api/ops/retry-failed", post(retry_failed))
}

fn ok(v: Value) -> R {
    Ok(Json(v).into_response())
}

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, code::BAD_REQUEST, m)
}

/// Query parameters whose values are numbers or booleans; every other one is a string (so a
/// search for `42` stays text).
const NUMERIC: &[&str] = &[
    "limit",
    "offset",
    "before",
    "after",
    "anchor",
    "id",
    "observation_id",
    "depth_before",
    "depth_after",
    "windowSec",
    "bucketSec",
    "sessionDbId",
];
const BOOLEAN: &[&str] = &[
    "include_prompts",
    "include_docs",
    "all",
    "include_bookkeeping",
    "success",
];

/// The query string as a JSON object, for the same request types (and aliases) the `/v1`
/// routes take as bodies: a repeated key becomes a list.
fn params(uri: &Uri) -> Result<Map<String, Value>, ApiError> {
    let mut m = Map::new();
    let Some(q) = uri.query() else {
        return Ok(m);
    };
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(&s.replace('+', " "))
            .decode_utf8()
            .map(|c| c.into_owned())
            .map_err(|_| bad("a query parameter is not UTF-8 once decoded"))
    };
    for kv in q.split('&').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        let (k, v) = (decode(k)?, decode(v)?);
        let value = if NUMERIC.contains(&k.as_str()) {
            match v.trim().parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => return Err(bad(format!("`{k}` must be an integer, not `{v}`"))),
            }
        } else if BOOLEAN.contains(&k.as_str()) {
            match v.trim() {
                "true" | "1" | "" => Value::Bool(true),
                "false" | "0" => Value::Bool(false),
                _ => return Err(bad(format!("`{k}` must be true or false, not `{v}`"))),
            }
        } else {
            Value::String(v)
        };
        match m.get_mut(&k) {
            Some(Value::Array(a)) => a.push(value),
            Some(prev) => {
                let first = prev.take();
                *prev = Value::Array(vec![first, value]);
            }
            None => {
                m.insert(k, value);
            }
        }
    }
    Ok(m)
}

fn typed<T: DeserializeOwned>(m: Map<String, Value>) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(m)).map_err(|e| bad(format!("bad query parameters: {e}")))
}

fn int(m: &Map<String, Value>, k: &str) -> Option<i64> {
    m.get(k).and_then(Value::as_i64)
}

fn text<'a>(m: &'a Map<String, Value>, k: &str) -> Option<&'a str> {
    m.get(k).and_then(Value::as_str).filter(|s| !s.is_empty())
}

/// `limit` (default 20, at most 100) and `offset` (at least 0).
fn page(m: &Map<String, Value>) -> (i64, i64) {
    (
        int(m, "limit").unwrap_or(20).clamp(1, 100),
        int(m, "offset").unwrap_or(0).max(0),
    )
}

/// A page of rows: one more than asked is read to say whether there are more.
fn paged(mut items: Vec<Value>, limit: i64, offset: i64) -> Value {
    let has_more = items.len() as i64 > limit;
    items.truncate(limit as usize);
    json!({"items": items, "hasMore": has_more, "offset": offset, "limit": limit})
}

// ---- health ----

async fn health(State(app): State<Arc<App>>) -> R {
    ok(json!({
        "status": "ok",
        "version": nmem_proto::VERSION,
        "initialized": app.web.ready.load(Ordering::Relaxed),
        // The MCP server is `nmem serve`, a process per client: always ready to start.
        "mcpReady": true,
        "pid": std::process::id(),
        "uptime": app.started.elapsed().as_secs(),
    }))
}

async fn readiness(State(app): State<Arc<App>>) -> Response {
    if app.web.ready.load(Ordering::Relaxed) {
        Json(json!({"status": "ready"})).into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "initializing"})),
        )
            .into_response()
    }
}

async fn version() -> R {
    ok(json!({"version": nmem_proto::VERSION}))
}

// ---- hook entry points (seed §3.2) ----

fn session_id(v: &Value) -> Result<String, ApiError> {
    v.get("contentSessionId")
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(str::to_string)
        .ok_or_else(|| bad("contentSessionId is required and must be a non-empty string"))
}

/// The working folder an entry point's event is recorded under: `cwd`, else a folder named
/// after `project` (nmem names a project after its folder).
fn cwd_of(v: &Value) -> String {
    match (
        v.get("cwd").and_then(Value::as_str),
        v.get("project").and_then(Value::as_str),
    ) {
        (Some(c), _) if !c.is_empty() => c.to_string(),
        (_, Some(p)) if !p.is_empty() => format!("/{}", p.replace('/', "-")),
        _ => "/".to_string(),
    }
}

/// Record a Claude Code hook payload through the ingest `nmem record` uses.
async fn record(app: &Arc<App>, payload: Value) -> Result<nmem_proto::wire::RecordReply, ApiError> {
    let raw = crate::ingest::RawEvent::new(
        nmem_proto::client::new_event_id(),
        nmem_proto::now_ms(),
        nmem_proto::harness::Harness::ClaudeCode.as_str(),
        serde_json::to_vec(&payload).unwrap_or_default(),
    )
    .map_err(bad)?;
    crate::server::record_event(app, raw).await
}

/// The session's row number (CodexMem's `sessionDbId`) and user prompts so far.
async fn session_numbers(app: &App, id: String) -> Result<(Option<i64>, i64), ApiError> {
    Ok(app
        .readers
        .run(move |c| {
            let row: Option<i64> = c
                .query_row("SELECT rowid FROM sessions WHERE id = ?1", [&id], |r| {
                    r.get(0)
                })
                .ok();
            let prompts: i64 = c.query_row(
                "SELECT COUNT(*) FROM prompts WHERE session_id = ?1 AND source = 'user'",
                [&id],
                |r| r.get(0),
            )?;
            Ok((row, prompts))
        })
        .await
        .map_err(QueryError::from)?)
}

fn is_private(app: &App, session: &str) -> bool {
    app.ingest
        .private_turns
        .lock()
        .map(|t| t.contains(session))
        .unwrap_or(false)
}

async fn session_init(State(app): State<Arc<App>>, b: Bytes) -> R {
    let v: Value = body(&b)?;
    let sid = session_id(&v)?;
    let prompt = v.get("prompt").and_then(Value::as_str).unwrap_or("");
    let r = record(
        &app,
        json!({"session_id": sid, "hook_event_name": "UserPromptSubmit", "prompt": prompt, "cwd": cwd_of(&v)}),
    )
    .await?;
    let (row, n) = session_numbers(&app, sid).await?;
    let mut out = json!({"sessionDbId": row, "promptNumber": n, "skipped": false});
    if r.outcome == RecordOutcome::Ignored {
        out["skipped"] = json!(true);
        out["reason"] = json!("private");
    }
    ok(out)
}

fn status_of(app: &App, sid: &str, outcome: RecordOutcome, skipped: &str) -> Value {
    match outcome {
        RecordOutcome::Stored => json!({"status": "queued"}),
        RecordOutcome::Duplicate | RecordOutcome::Deduplicated => json!({"status": "deduped"}),
        RecordOutcome::Ignored => {
            let reason = if is_private(app, sid) {
                "private"
            } else {
                skipped
            };
            json!({"status": "skipped", "reason": reason})
        }
    }
}

async fn session_observation(State(app): State<Arc<App>>, b: Bytes) -> R {
    let v: Value = body(&b)?;
    let sid = session_id(&v)?;
    let tool = v
        .get("tool_name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| bad("tool_name is required"))?;
    let mut payload = json!({
        "session_id": sid, "hook_event_name": "PostToolUse", "tool_name": tool,
        "tool_input": v.get("tool_input").cloned().unwrap_or(json!({})),
        "tool_response": v.get("tool_response").cloned().unwrap_or(json!({})),
        "cwd": cwd_of(&v),
    });
    if let Some(id) = v.get("tool_use_id") {
        payload["tool_use_id"] = id.clone();
    }
    let r = record(&app, payload).await?;
    ok(status_of(&app, &sid, r.outcome, "tool_excluded"))
}

async fn session_summarize(State(app): State<Arc<App>>, b: Bytes) -> R {
    let v: Value = body(&b)?;
    let sid = session_id(&v)?;
    let msg = v
        .get("last_assistant_message")
        .and_then(Value::as_str)
        .unwrap_or("");
    let r = record(
        &app,
        json!({"session_id": sid, "hook_event_name": "Stop", "last_assistant_message": msg, "cwd": cwd_of(&v)}),
    )
    .await?;
    ok(status_of(&app, &sid, r.outcome, "private"))
}

async fn session_complete(State(app): State<Arc<App>>, b: Bytes) -> R {
    let v: Value = body(&b)?;
    let sid = session_id(&v)?;
    let id = sid.clone();
    let active: Option<(i64, String)> = app
        .readers
        .run(move |c| {
            Ok(c.query_row(
                "SELECT rowid, COALESCE(cwd, '/') FROM sessions WHERE id = ?1 AND ended_at IS NULL",
                [&id],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .ok())
        })
        .await
        .map_err(QueryError::from)?;
    let Some((row, cwd)) = active else {
        return ok(json!({"status": "skipped", "reason": "not_active"}));
    };
    record(
        &app,
        json!({"session_id": sid, "hook_event_name": "SessionEnd", "reason": "other", "cwd": cwd}),
    )
    .await?;
    ok(json!({"status": "completed", "sessionDbId": row}))
}

// ---- reading (seed §3.3) ----

async fn search(State(app): State<Arc<App>>, uri: Uri) -> R {
    let mut m = params(&uri)?;
    // CodexMem's clients send `q`; ours `query`.
    if let Some(q) = m.remove("q") {
        m.entry("query").or_insert(q);
    }
    let req: SearchRequest = typed(m)?;
    let reply = ops::traced_search(&app, req).await?;
    Ok(Json(reply).into_response())
}

async fn timeline(State(app): State<Arc<App>>, uri: Uri) -> R {
    let req: TimelineRequest = typed(params(&uri)?)?;
    Ok(Json(query::timeline(&app, req).await?).into_response())
}

/// Observations by id, in `query::get`'s chunks of 50.
async fn by_ids(app: &App, ids: Vec<i64>) -> Result<Vec<Observation>, ApiError> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(50) {
        out.extend(
            query::get(
                app,
                GetRequest {
                    ids: chunk.to_vec(),
                    doc_ids: vec![],
                    knowledge_ids: vec![],
                    format: None,
                },
            )
            .await?,
        );
    }
    Ok(out)
}

/// `POST /api/observations/batch` with the seed's two 400 messages.
async fn batch(State(app): State<Arc<App>>, b: Bytes) -> R {
    let v: Value = body(&b)?;
    let Some(ids) = v.get("ids").and_then(Value::as_array) else {
        return Err(bad("ids must be an array of numbers"));
    };
    if ids.iter().any(|i| !i.is_number()) {
        return Err(bad("ids must be an array of numbers"));
    }
    let ids: Vec<i64> = ids
        .iter()
        .map(Value::as_i64)
        .collect::<Option<_>>()
        .ok_or_else(|| bad("All ids must be integers"))?;
    if ids.len() > 1000 {
        return Err(bad(format!(
            "at most 1000 ids per batch, got {}: ask in several batches",
            ids.len()
        )));
    }
    let mut found = by_ids(&app, ids).await?;
    if let Some(p) = v.get("project").and_then(Value::as_str) {
        found.retain(|o| o.project == p);
    }
    match v.get("orderBy").and_then(Value::as_str) {
        Some("date_asc") => found.sort_by_key(|o| (o.timestamp, o.id)),
        Some("date_desc") | None => found.sort_by_key(|o| std::cmp::Reverse((o.timestamp, o.id))),
        Some(other) => {
            return Err(bad(format!(
                "orderBy must be date_desc or date_asc, not `{other}`"
            )))
        }
    }
    if let Some(l) = v.get("limit").and_then(Value::as_u64) {
        found.truncate(l as usize);
    }
    Ok(Json(found).into_response())
}

async fn one(State(app): State<Arc<App>>, Path(id): Path<String>) -> R {
    let n: i64 = id
        .parse()
        .map_err(|_| bad(format!("Observation id must be an integer, not `{id}`")))?;
    match by_ids(&app, vec![n]).await?.pop() {
        Some(o) => Ok(Json(o).into_response()),
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            code::NOT_FOUND,
            format!("Observation #{n} not found"),
        )),
    }
}

/// Newest first by time, paged: the (project, type, time), (project, time) or (time) index.
async fn observations(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    let (limit, offset) = page(&m);
    let project = text(&m, "project").map(str::to_string);
    let kind = text(&m, "type").map(str::to_string);
    let rows = app
        .readers
        .run(move |c| {
            let mut sql = format!("SELECT {OBS_COLUMNS} FROM observations WHERE 1");
            let mut args: Vec<rusqlite::types::Value> = vec![];
            if let Some(p) = project {
                sql.push_str(" AND project = ?");
                args.push(p.into());
            }
            if let Some(t) = kind {
                sql.push_str(" AND obs_type = ?");
                args.push(t.into());
            }
            sql.push_str(" ORDER BY timestamp DESC, id DESC LIMIT ? OFFSET ?");
            args.push((limit + 1).into());
            args.push(offset.into());
            let rows = c
                .prepare_cached(&sql)?
                .query_map(rusqlite::params_from_iter(args), observation)?
                .collect::<Result<Vec<_>, _>>()?;
            Ok(rows)
        })
        .await
        .map_err(QueryError::from)?;
    let items = rows.into_iter().map(|o| json!(o)).collect();
    ok(paged(items, limit, offset))
}

async fn summaries(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    let (limit, offset) = page(&m);
    let project = text(&m, "project").map(str::to_string);
    let rows = app
        .readers
        .run(move |c| {
            c.prepare_cached(
                "SELECT rowid, id, project, started_at, ended_at, summary FROM sessions
                 WHERE summary IS NOT NULL AND (?1 IS NULL OR project = ?1)
                 ORDER BY started_at DESC LIMIT ?2 OFFSET ?3",
            )?
            .query_map(rusqlite::params![project, limit + 1, offset], |r| {
                Ok(json!({
                    "sessionDbId": r.get::<_, i64>(0)?, "contentSessionId": r.get::<_, String>(1)?,
                    "project": r.get::<_, String>(2)?, "startedAt": r.get::<_, i64>(3)?,
                    "endedAt": r.get::<_, Option<i64>>(4)?, "summary": r.get::<_, String>(5)?,
                }))
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(QueryError::from)?;
    ok(paged(rows, limit, offset))
}

async fn prompts(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    let (limit, offset) = page(&m);
    let project = text(&m, "project").map(str::to_string);
    let rows = app
        .readers
        .run(move |c| {
            let sql = match project {
                Some(_) => {
                    "SELECT id, session_id, timestamp, source, content, project FROM prompts
                            WHERE project = ?1 ORDER BY timestamp DESC, id DESC LIMIT ?2 OFFSET ?3"
                }
                None => {
                    "SELECT id, session_id, timestamp, source, content, project FROM prompts
                         WHERE ?1 IS NULL ORDER BY timestamp DESC, id DESC LIMIT ?2 OFFSET ?3"
                }
            };
            c.prepare_cached(sql)?
                .query_map(rusqlite::params![project, limit + 1, offset], prompt_json)?
                .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(QueryError::from)?;
    ok(paged(rows, limit, offset))
}

fn prompt_json(r: &rusqlite::Row) -> rusqlite::Result<Value> {
    Ok(json!({
        "kind": "prompt", "id": r.get::<_, i64>(0)?, "session_id": r.get::<_, String>(1)?,
        "timestamp": r.get::<_, i64>(2)?, "source": r.get::<_, String>(3)?,
        "content": r.get::<_, String>(4)?, "project": r.get::<_, String>(5)?,
    }))
}

/// Projects by their latest session (the sessions' (project, started_at) index).
async fn projects(State(app): State<Arc<App>>) -> R {
    let rows = app
        .readers
        .run(|c| {
            c.prepare_cached(
                "SELECT project, MAX(started_at) AS last, COUNT(*) FROM sessions
                 GROUP BY project ORDER BY last DESC LIMIT 1000",
            )?
            .query_map([], |r| {
                Ok(
                    json!({"name": r.get::<_, String>(0)?, "lastSessionAt": r.get::<_, i64>(1)?,
                          "sessions": r.get::<_, i64>(2)?}),
                )
            })?
            .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(QueryError::from)?;
    let names: Vec<Value> = rows.iter().map(|r| r["name"].clone()).collect();
    ok(json!({"projects": names, "details": rows}))
}

const SESSION_COLUMNS: &str = "s.rowid, s.id, s.project, s.harness, s.started_at, s.ended_at, \
     s.start_source, s.compactions, s.signature, s.title, s.end_reason, \
     (SELECT COUNT(*) FROM prompts p WHERE p.session_id = s.id AND p.source = 'user')";

fn session_json(r: &rusqlite::Row) -> rusqlite::Result<Value> {
    let signature: Option<String> = r.get(8)?;
    let (started, ended): (i64, Option<i64>) = (r.get(4)?, r.get(5)?);
    Ok(json!({
        "sessionDbId": r.get::<_, i64>(0)?, "id": r.get::<_, String>(1)?,
        "project": r.get::<_, String>(2)?, "harness": r.get::<_, String>(3)?,
        "startedAt": started, "endedAt": ended,
        "durationMs": ended.map(|e| e - started),
        "startSource": r.get::<_, Option<String>>(6)?, "compactions": r.get::<_, i64>(7)?,
        "signature": signature.and_then(|s| serde_json::from_str::<Value>(&s).ok()),
        "title": r.get::<_, Option<String>>(9)?, "endReason": r.get::<_, Option<String>>(10)?,
        "prompts": r.get::<_, i64>(11)?,
    }))
}

/// Sessions newest first: of a project by start (its (project, started_at) index); of every
/// project by row, newest created first (the rowid order: there is no index on `started_at`
/// alone, and a sort computed the prompt count of every session first, 160 ms for 12,036
/// sessions at 1M observations; in rowid order only the page's 51 rows are read, 0.3 ms).
async fn sessions(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    let (limit, offset) = page(&m);
    let project = text(&m, "project").map(str::to_string);
    let rows = app
        .readers
        .run(move |c| {
            let (filter, order) = if project.is_some() {
                ("s.project = ?1", "s.started_at DESC")
            } else {
                ("?1 IS NULL", "s.rowid DESC")
            };
            c.prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions s WHERE {filter}
                 ORDER BY {order} LIMIT ?2 OFFSET ?3"
            ))?
            .query_map(rusqlite::params![project, limit + 1, offset], session_json)?
            .collect::<Result<Vec<_>, _>>()
        })
        .await
        .map_err(QueryError::from)?;
    ok(paged(rows, limit, offset))
}

/// One session read in order: its observations and prompts merged by time, paged.
async fn session(State(app): State<Arc<App>>, Path(id): Path<String>, uri: Uri) -> R {
    let m = params(&uri)?;
    let limit = int(&m, "limit").unwrap_or(100).clamp(1, 500);
    let offset = int(&m, "offset").unwrap_or(0).clamp(0, 100_000);
    let sid = id.clone();
    let found = app
        .readers
        .run(move |c| {
            let head = c
                .prepare_cached(&format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?1"
                ))?
                .query_row([&sid], session_json)
                .ok();
            let Some(head) = head else {
                return Ok(None);
            };
            let n = limit + offset + 1;
            let obs: Vec<Observation> = c
                .prepare_cached(&format!(
                    "SELECT {OBS_COLUMNS} FROM observations WHERE session_id = ?1
                     ORDER BY timestamp, id LIMIT ?2"
                ))?
                .query_map(rusqlite::params![sid, n], observation)?
                .collect::<Result<_, _>>()?;
            let prompts: Vec<Value> = c
                .prepare_cached(
                    "SELECT id, session_id, timestamp, source, content, project FROM prompts
                     WHERE session_id = ?1 ORDER BY timestamp, id LIMIT ?2",
                )?
                .query_map(rusqlite::params![sid, n], prompt_json)?
                .collect::<Result<_, _>>()?;
            let mut all: Vec<(i64, Value)> = obs
                .into_iter()
                .map(|o| {
                    let t = o.timestamp;
                    let mut v = json!(o);
                    v["kind"] = json!("observation");
                    (t, v)
                })
                .chain(
                    prompts
                        .into_iter()
                        .map(|p| (p["timestamp"].as_i64().unwrap_or(0), p)),
                )
                .collect();
            all.sort_by_key(|(t, _)| *t);
            let items: Vec<Value> = all
                .into_iter()
                .skip(offset as usize)
                .map(|(_, v)| v)
                .collect();
            Ok(Some((head, items)))
        })
        .await
        .map_err(QueryError::from)?;
    match found {
        Some((head, items)) => {
            let mut p = paged(items, limit, offset);
            p["session"] = head;
            ok(p)
        }
        None => Err(ApiError::new(
            StatusCode::NOT_FOUND,
            code::NOT_FOUND,
            format!("Session {id} not found"),
        )),
    }
}

async fn stats(State(app): State<Arc<App>>) -> R {
    let s = crate::app::status(&app)
        .await
        .map_err(|e| ApiError::internal("the status report", e))?;
    ok(json!({
        "worker": {"version": s.version, "uptime": s.uptime_s, "pid": s.pid},
        "database": {"path": s.db_path, "size": s.db_bytes, "observations": s.observations,
                     "prompts": s.prompts, "sessions": s.sessions},
        "status": s,
    }))
}

async fn processing(State(app): State<Arc<App>>) -> R {
    let depth = app.writer.depth();
    ok(json!({"isProcessing": depth > 0, "queueDepth": depth,
              "spoolBacklog": nmem_proto::status::from_files(&app.paths).spool_backlog}))
}

// ---- writing ----

/// `POST /api/memory/save` with the seed's 400.
async fn save(State(app): State<Arc<App>>, b: Bytes) -> R {
    let v: Value = body(&b)?;
    let text = v.get("text").and_then(Value::as_str).unwrap_or("");
    if text.trim().is_empty() {
        return Err(bad("text is required and must be non-empty"));
    }
    let title = v.get("title").and_then(Value::as_str).map(str::to_string);
    let req = SaveRequest {
        text: text.to_string(),
        title: title.clone(),
        project: v
            .get("project")
            .and_then(Value::as_str)
            .map(|p| Some(p.to_string())),
        cwd: None,
        metadata: None,
    };
    let saved = query::save(&app, req).await?;
    ok(json!({
        "success": true, "id": saved.id, "title": title, "project": saved.project,
        "message": format!("Memory saved as observation #{}", saved.id),
    }))
}

/// `POST /api/purge`: a dry run (the count) unless `apply: true`.
async fn purge(State(app): State<Arc<App>>, b: Bytes) -> R {
    let req: nmem_proto::admin::PurgeRequest = body(&b)?;
    Ok(Json(crate::retention::purge(&app, req).await?).into_response())
}

/// `GET /api/export?project=P`: a project's observations as JSON lines, oldest first, read in
/// pages of 1,000 by id (the (id, project) index) and streamed: nothing is held whole.
async fn export(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    let project = text(&m, "project")
        .ok_or_else(|| bad("say which project to export: ?project=NAME"))?
        .to_string();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(4);
    let name = project.clone();
    tokio::spawn(async move {
        let mut after = 0i64;
        loop {
            let p = project.clone();
            let rows = app
                .readers
                .run(move |c| {
                    c.prepare_cached(&format!(
                        "SELECT {OBS_COLUMNS} FROM observations WHERE id > ?1 AND project = ?2
                         ORDER BY id LIMIT 1000"
                    ))?
                    .query_map(rusqlite::params![after, p], observation)?
                    .collect::<Result<Vec<_>, _>>()
                })
                .await;
            let Ok(rows) = rows else { break };
            if rows.is_empty() {
                break;
            }
            after = rows.last().map(|o| o.id).unwrap_or(after);
            let mut buf = Vec::new();
            for o in rows {
                let _ = serde_json::to_writer(&mut buf, &o);
                buf.push(b'\n');
            }
            if tx.send(Bytes::from(buf)).await.is_err() {
                break;
            }
        }
    });
    let file = format!(
        "attachment; filename=\"nmem-{}.ndjson\"",
        name.replace(|c: char| !c.is_ascii_alphanumeric() && c != '-', "_")
    );
    Ok(Response::builder()
        .header(header::CONTENT_TYPE, "application/x-ndjson")
        .header(header::CONTENT_DISPOSITION, file)
        .body(Body::new(Stream(rx)))
        .unwrap_or_default())
}

// ---- the live stream ----

/// A body fed by a channel: each message is a chunk; the body ends when the sender does.
struct Stream(tokio::sync::mpsc::Receiver<Bytes>);

impl hyper::body::Body for Stream {
    type Data = Bytes;
    type Error = std::convert::Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|o| o.map(|b| Ok(hyper::body::Frame::data(b))))
    }
}

fn sse(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

/// How often the queue depth is looked at (sent when it changed) and a keep-alive sent.
const TICK: std::time::Duration = std::time::Duration::from_secs(2);

/// What the stream says of a stored row: the feed's item and the row itself (one indexed read).
async fn stored_row(app: &App, item: &Item) -> Value {
    let mut v = json!(item);
    if let Item::Stored { kind, id, .. } = item {
        let (kind, id) = (kind.clone(), *id);
        let row = app
            .readers
            .run(move |c| {
                if kind == "prompt" {
                    c.query_row(
                        "SELECT id, session_id, timestamp, source, content, project FROM prompts WHERE id = ?1",
                        [id],
                        prompt_json,
                    )
                } else {
                    c.query_row(
                        &format!("SELECT {OBS_COLUMNS} FROM observations WHERE id = ?1"),
                        [id],
                        |r| observation(r).map(|o| json!(o)),
                    )
                }
            })
            .await;
        if let Ok(row) = row {
            v["row"] = row;
        }
    }
    v
}

/// `GET /api/events`: Server-Sent Events. `observation.stored` per stored row (observations and
/// prompts, with the row), `session.status`, `queue.failed`, and `queue.depth` when it changes.
async fn events(State(app): State<Arc<App>>) -> Response {
    let mut feed = app.stats.feed.subscribe();
    let mut closing = app.web.closing.subscribe();
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(TICK);
        let mut depth = None;
        if tx
            .send(Bytes::from_static(b"retry: 2000\n\n"))
            .await
            .is_err()
        {
            return;
        }
        loop {
            let frame = tokio::select! {
                r = feed.recv() => match r {
                    Ok(item) => sse(item.name(), &stored_row(&app, &item).await),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        sse("stream.lagged", &json!({"missed": n}))
                    }
                    Err(_) => break,
                },
                _ = tick.tick() => {
                    let d = app.writer.depth();
                    if depth == Some(d) {
                        Bytes::from_static(b": keep-alive\n\n")
                    } else {
                        depth = Some(d);
                        sse("queue.depth", &json!({"depth": d, "capacity": app.writer.capacity()}))
                    }
                }
                _ = closing.changed() => break,
                _ = tx.closed() => break,
            };
            if tx.send(frame).await.is_err() {
                break;
            }
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::new(Stream(rx)))
        .unwrap_or_default()
}

// ---- ops (seed §3.5) ----

async fn index_status(State(app): State<Arc<App>>) -> R {
    let e = crate::app::embedding(&app).await;
    ok(json!({
        "vectorBackend": "sqlite",
        "chroma": {"configured": false, "reason": "nmem keeps its vectors in its own SQLite file"},
        "embedding": e,
    }))
}

/// `from`/`to` (epoch seconds, milliseconds or an ISO date) and `limit` (default 100, at most
/// the ring).
struct Window {
    from: i64,
    to: i64,
    limit: usize,
}

fn window(m: &Map<String, Value>) -> Result<Window, ApiError> {
    let when = |k: &str, end: bool| -> Result<Option<i64>, ApiError> {
        match m.get(k) {
            None => Ok(None),
            Some(v) => {
                let s = v
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or_else(|| v.to_string());
                Ok(Some(query::millis(&nmem_proto::query::When::Text(s), end)?))
            }
        }
    };
    Ok(Window {
        from: when("from", false)?.unwrap_or(i64::MIN),
        to: when("to", true)?.unwrap_or(i64::MAX),
        limit: int(m, "limit").unwrap_or(100).clamp(1, ops::RING as i64) as usize,
    })
}

fn traces(m: &Map<String, Value>, app: &App) -> Result<Vec<ops::SearchTrace>, ApiError> {
    let w = window(m)?;
    let q = text(m, "query").map(str::to_lowercase);
    let project = text(m, "project");
    let mode = match text(m, "mode") {
        None => None,
        Some("lexical-only" | "lexical") => Some("lexical"),
        Some("hybrid") => Some("hybrid"),
        Some(other) => {
            return Err(bad(format!(
                "mode must be lexical-only or hybrid, not `{other}`"
            )))
        }
    };
    let mut v: Vec<_> = app
        .stats
        .ops
        .searches()
        .into_iter()
        .rev()
        .filter(|t| t.at_ms >= w.from && t.at_ms <= w.to)
        .filter(|t| {
            q.as_ref()
                .is_none_or(|q| t.query.to_lowercase().contains(q))
        })
        .filter(|t| project.is_none_or(|p| t.project.as_deref() == Some(p)))
        .filter(|t| mode.is_none_or(|md| t.mode.starts_with(md)))
        .collect();
    v.truncate(w.limit);
    Ok(v)
}

async fn search_traces(State(app): State<Arc<App>>, uri: Uri) -> R {
    let t = traces(&params(&uri)?, &app)?;
    ok(json!({"traces": t, "count": t.len()}))
}

/// Per-event timings, newest first, filtered by window, session (`sessionDbId`, the session's
/// row number, or `sessionId`), `messageType` (`observation` | `summarize`) and `success`.
async fn timings(m: &Map<String, Value>, app: &App) -> Result<Vec<ops::EventTiming>, ApiError> {
    let w = window(m)?;
    let message_type = match text(m, "messageType") {
        None => None,
        Some(t @ ("observation" | "summarize")) => Some(t.to_string()),
        Some(t) => {
            return Err(bad(format!(
                "messageType must be observation or summarize, not {t}"
            )))
        }
    };
    let success = m.get("success").and_then(Value::as_bool);
    let session = match (int(m, "sessionDbId"), text(m, "sessionId")) {
        (Some(row), _) => {
            let id = app
                .readers
                .run(move |c| {
                    c.query_row("SELECT id FROM sessions WHERE rowid = ?1", [row], |r| {
                        r.get::<_, String>(0)
                    })
                    .optional()
                })
                .await
                .map_err(QueryError::from)?;
            // An unknown session has no timings (not an error: it may not be stored yet).
            Some(id.unwrap_or_default())
        }
        (None, Some(id)) => Some(id.to_string()),
        (None, None) => None,
    };
    let mut v: Vec<_> = app
        .stats
        .ops
        .event_timings()
        .into_iter()
        .rev()
        .filter(|t| t.at_ms >= w.from && t.at_ms <= w.to)
        .filter(|t| session.as_ref().is_none_or(|s| &t.session_id == s))
        .filter(|t| message_type.as_ref().is_none_or(|k| t.message_type == k))
        .filter(|t| success.is_none_or(|b| t.success == b))
        .collect();
    v.truncate(w.limit);
    Ok(v)
}

async fn session_timings(State(app): State<Arc<App>>, uri: Uri) -> R {
    let t = timings(&params(&uri)?, &app).await?;
    let avg = |xs: Vec<f64>| {
        if xs.is_empty() {
            0.0
        } else {
            xs.iter().sum::<f64>() / xs.len() as f64
        }
    };
    let commits = app.stats.ops.commits();
    ok(json!({
        "timings": t,
        "averages": {
            "queueWaitMs": avg(t.iter().filter_map(|e| e.queue_wait_ms).collect()),
            "commitMs": avg(t.iter().map(|e| e.commit_ms).collect()),
            "indexMs": 0.0,
            "totalMs": avg(t.iter().filter_map(|e| e.total_ms).collect()),
            "eventsPerCommit": avg(commits.iter().map(|c| c.events as f64).collect()),
        },
        "note": "nmem has no model step: an event waits in the writer's queue (queueWaitMs), is \
                 stored in a group commit (commitMs) and acknowledged (totalMs); full-text \
                 indexing runs after the acknowledgement, off the event's path (indexMs 0)",
    }))
}

fn failures(m: &Map<String, Value>, app: &App) -> Result<Vec<ops::Failure>, ApiError> {
    let w = window(m)?;
    let class = text(m, "errorClass");
    let mut v: Vec<_> = app
        .stats
        .ops
        .failures()
        .into_iter()
        .rev()
        .filter(|f| f.at_ms >= w.from && f.at_ms <= w.to)
        .filter(|f| class.is_none_or(|c| f.error_class == c))
        .collect();
    v.truncate(w.limit);
    Ok(v)
}

async fn failure_summary(State(app): State<Arc<App>>, uri: Uri) -> R {
    let f = failures(&params(&uri)?, &app)?;
    let mut by: std::collections::BTreeMap<&str, u64> = Default::default();
    for x in &f {
        *by.entry(x.error_class.as_str()).or_default() += 1;
    }
    ok(json!({"byClass": by, "recent": f, "total": f.len()}))
}

/// CSV (default) or JSON lines of `rows`.
fn export_rows<T: serde::Serialize>(m: &Map<String, Value>, name: &str, rows: &[T]) -> R {
    let format = text(m, "format").unwrap_or("csv");
    let (body, ctype) = match format {
        "ndjson" => {
            let mut out = String::new();
            for r in rows {
                out.push_str(&serde_json::to_string(r).unwrap_or_default());
                out.push('\n');
            }
            (out, "application/x-ndjson")
        }
        "csv" => {
            let values: Vec<Map<String, Value>> = rows
                .iter()
                .filter_map(|r| match serde_json::to_value(r) {
                    Ok(Value::Object(o)) => Some(o),
                    _ => None,
                })
                .collect();
            let cols: Vec<String> = values
                .first()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default();
            let cell = |v: Option<&Value>| -> String {
                let s = match v {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                };
                // Quoted, and a leading formula character neutralised (spreadsheet injection).
                let s = if s.starts_with(['=', '+', '-', '@']) && s.parse::<f64>().is_err() {
                    format!("'{s}")
                } else {
                    s
                };
                format!("\"{}\"", s.replace('"', "\"\""))
            };
            let mut out = cols.join(",");
            out.push('\n');
            for o in &values {
                let line: Vec<String> = cols.iter().map(|c| cell(o.get(c))).collect();
                out.push_str(&line.join(","));
                out.push('\n');
            }
            (out, "text/csv; charset=utf-8")
        }
        other => return Err(bad(format!("format must be csv or ndjson, not `{other}`"))),
    };
    Ok((
        [
            (header::CONTENT_TYPE, ctype.to_string()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"{name}.{format}\""),
            ),
        ],
        body,
    )
        .into_response())
}

async fn search_traces_export(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    export_rows(&m, "search-traces", &traces(&m, &app)?)
}

async fn session_timings_export(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    export_rows(&m, "session-timings", &timings(&m, &app).await?)
}

async fn failure_summary_export(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    export_rows(&m, "failure-summary", &failures(&m, &app)?)
}

/// `windowSec` 60–86400 (default 3600), `bucketSec` 10–3600 (default 60).
async fn trends(State(app): State<Arc<App>>, uri: Uri) -> R {
    let m = params(&uri)?;
    let window = int(&m, "windowSec").unwrap_or(3600);
    let bucket = int(&m, "bucketSec").unwrap_or(60);
    if !(60..=86_400).contains(&window) {
        return Err(bad(format!("windowSec must be 60 to 86400, not {window}")));
    }
    if !(10..=3600).contains(&bucket) {
        return Err(bad(format!("bucketSec must be 10 to 3600, not {bucket}")));
    }
    let o = &app.stats.ops;
    let b = ops::trends(
        nmem_proto::now_ms(),
        window * 1000,
        bucket * 1000,
        &o.searches(),
        &o.commits(),
        &o.failures(),
    );
    ok(json!({"windowSec": window, "bucketSec": bucket, "buckets": b}))
}

fn not_implemented(m: &str) -> ApiError {
    ApiError::new(StatusCode::NOT_IMPLEMENTED, code::NOT_IMPLEMENTED, m)
}

async fn agent_metrics() -> ApiError {
    not_implemented(
        "nmem runs no LLM agent, so there are no parse/schema/repair counters: every event is \
         stored as recorded; rejected payloads are in /api/ops/failure-summary",
    )
}

async fn backfill_chroma() -> ApiError {
    not_implemented(
        "nmem has no Chroma: nmemd embeds what has no vector by itself (progress in \
         /api/ops/index-status)",
    )
}

/// `POST /api/ops/retry-failed`: the LLM-free equivalent, the quarantined spool files
/// (`spool/corrupt/`) moved back into the spool to be drained again (a file still unreadable
/// is quarantined again).
async fn retry_failed(State(app): State<Arc<App>>) -> R {
    let (from, to) = (app.paths.spool_corrupt(), app.paths.spool.clone());
    let retried = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
        let mut n = 0;
        let entries = match std::fs::read_dir(&from) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
            Err(e) => return Err(e),
        };
        for e in entries.flatten() {
            // Only regular files of the spool's own naming: never a symlink or a folder.
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_file() && nmem_proto::paths::check_own_file(&e.path()).is_ok() {
                std::fs::rename(e.path(), to.join(e.file_name()))?;
                n += 1;
            }
        }
        Ok(n)
    })
    .await
    .map_err(|e| ApiError::internal("retrying quarantined spool files", e))?
    .map_err(|e| ApiError::internal("retrying quarantined spool files", e))?;
    ok(json!({"success": true, "retried": retried}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn uri(q: &str) -> Uri {
        format!("/api/search?{q}").parse().unwrap()
    }

    #[test]
    fn query_strings_become_the_v1_request_types() {
        let m = params(&uri(
            "query=foo+bar&type=command&type=file_edit&limit=5&orderBy=date_desc",
        ))
        .unwrap();
        let r: SearchRequest = typed(m).unwrap();
        assert_eq!(r.query, "foo bar");
        assert_eq!(r.limit, Some(5));
        assert_eq!(
            r.obs_type.unwrap().into_vec(),
            vec!["command".to_string(), "file_edit".to_string()]
        );
        // A number in a text field stays text.
        let r: SearchRequest = typed(params(&uri("query=42")).unwrap()).unwrap();
        assert_eq!(r.query, "42");
    }

    #[test]
    fn a_bad_number_says_which_parameter() {
        let e = params(&uri("limit=ten")).unwrap_err();
        assert!(
            e.message.contains("`limit` must be an integer"),
            "{}",
            e.message
        );
    }

    proptest! {
        /// Whatever the query string, parsing returns (a value or a 400), never panics.
        #[test]
        fn any_query_string_is_answered(q in "[ -~]{0,200}") {
            if let Ok(u) = format!("/api/search?{q}").parse::<Uri>() {
                let _ = params(&u).map(typed::<SearchRequest>);
            }
        }
    }
}
