//! The HTTP/JSON API on the Unix socket: routes and their handlers.
//!
//! Every reply carries the daemon's version and protocol number (headers); errors are
//! `{code, message}` with a proper status. See `nmem_proto::wire` for the contract.

use crate::app::App;
use crate::ingest::{PrepareError, Prepared, RawEvent};
use crate::query::{self, QueryError};
use crate::store::writer::{Applied, WriteError};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use nmem_proto::harness::{Event, Harness};
use nmem_proto::query as query_types;
use nmem_proto::wire::{self, code, ErrorBody, RecordOutcome, RecordReply};
use std::sync::Arc;

/// The routes, behind [`crate::conn::bound_body`]: every body is read within the limits (time,
/// size, bytes in flight across requests) before a handler sees it.
pub fn router(app: Arc<App>, limits: Arc<crate::conn::Limits>) -> Router {
    Router::new()
        .route(wire::PATH_EVENTS, post(record))
        .route(wire::PATH_EVENTS_BATCH, post(record_batch))
        .route(wire::PATH_HEALTH, get(health))
        .route(wire::PATH_STATUS, get(status))
        .route(wire::PATH_SEARCH, post(search))
        .route(wire::PATH_OBSERVATIONS, post(observations))
        .route(wire::PATH_TIMELINE, post(timeline))
        .route(wire::PATH_RECENT, post(recent))
        .route(wire::PATH_MEMORIES, post(memories))
        .route(wire::PATH_DOCS_INGEST, post(docs_ingest))
        .route(wire::PATH_MAINTAIN, post(maintain))
        .route(wire::PATH_PIN, post(pin))
        .route(wire::PATH_RETENTION, post(retention))
        .route(wire::PATH_PURGE, post(purge))
        .route(wire::PATH_REDACT, post(redact))
        .route(wire::PATH_MODEL_RELOAD, post(model_reload))
        .route(wire::PATH_KNOWLEDGE, post(knowledge_remember))
        .route(wire::PATH_KNOWLEDGE_LIFECYCLE, post(knowledge_lifecycle))
        .route(wire::PATH_KNOWLEDGE_LIST, post(knowledge_list))
        .route(wire::PATH_UI, post(crate::web::control))
        .route(wire::PATH_SYNC_ENABLE, post(sync_enable))
        .route(wire::PATH_SYNC_JOIN, post(sync_join))
        .route(wire::PATH_SYNC_NOW, post(sync_now))
        .route(wire::PATH_SYNC_STATUS, post(sync_status))
        .route(wire::PATH_SYNC_DISABLE, post(sync_disable))
        .route(wire::PATH_SYNC_IDENTITY, post(sync_identity))
        .route(wire::PATH_SYNC_SHARE, post(sync_share))
        .route(wire::PATH_SYNC_EXCLUDE, post(sync_exclude))
        .route(wire::PATH_TEAM_CREATE, post(team_create))
        .route(wire::PATH_TEAM_ADD, post(team_add))
        .route(wire::PATH_TEAM_REMOVE, post(team_remove))
        .route(wire::PATH_TEAM_JOIN, post(team_join))
        .route(wire::PATH_SYNC_QUARANTINE, post(sync_quarantine))
        .route(wire::PATH_SYNC_VERIFY, post(sync_verify))
        .route(wire::PATH_REBUILD, post(rebuild))
        .route(wire::PATH_SYNC_LEAVE, post(sync_leave))
        .route(wire::PATH_TEAM_LEAVE, post(team_leave))
        .route(wire::PATH_REBUILD_PROGRESS, post(rebuild_progress))
        // The viewer's API without a token: this socket is the owner's alone.
        .merge(crate::web::api::routes())
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limits.max_body))
        .layer(axum::middleware::from_fn_with_state(
            limits,
            crate::conn::bound_body,
        ))
        .layer(axum::middleware::map_response(stamp_version))
        .with_state(app)
}

pub(crate) async fn stamp_version(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(
        wire::H_VERSION,
        HeaderValue::from_static(nmem_proto::VERSION),
    );
    h.insert(wire::H_PROTOCOL, HeaderValue::from(nmem_proto::PROTOCOL));
    res
}

/// An API error: status, code and a message that says what to do.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
}

impl ApiError {
    /// An internal failure of `what`: the detail (which may hold SQL text or paths) goes to the
    /// log, the reply says only where to look.
    pub fn internal(what: &str, detail: impl std::fmt::Display) -> ApiError {
        tracing::error!("{what} failed: {detail}");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            code::INTERNAL,
            format!("{what} failed inside nmemd; the reason is in its log (`nmemctl logs`)"),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            code: self.code.to_string(),
            message: self.message,
        };
        (self.status, Json(body)).into_response()
    }
}

/// The one place a writer error becomes a status: every handler that writes returns
/// [`WriteError`] and lets `?` call this.
impl From<WriteError> for ApiError {
    fn from(e: WriteError) -> ApiError {
        let (status, code) = match &e {
            WriteError::Invalid(_) => (StatusCode::BAD_REQUEST, code::BAD_REQUEST),
            WriteError::NotFound(_) => (StatusCode::NOT_FOUND, code::NOT_FOUND),
            WriteError::Conflict(_) => (StatusCode::CONFLICT, code::CONFLICT),
            WriteError::Closed => (StatusCode::SERVICE_UNAVAILABLE, code::SHUTTING_DOWN),
            WriteError::Storage(_) => {
                // SQLite's message may hold SQL text or paths: logged, not sent.
                tracing::error!("writing failed: {e}");
                return ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    code::STORE_FAILED,
                    "the database write failed inside nmemd; the reason is in its log \
                     (`nmemctl logs`)",
                );
            }
        };
        ApiError::new(status, code, e.to_string())
    }
}

impl From<QueryError> for ApiError {
    fn from(e: QueryError) -> ApiError {
        let (status, code) = match &e {
            QueryError::BadRequest(_) => (StatusCode::BAD_REQUEST, code::BAD_REQUEST),
            QueryError::BadFts(_) => (StatusCode::BAD_REQUEST, code::BAD_QUERY),
            QueryError::NotFound(_) => (StatusCode::NOT_FOUND, code::NOT_FOUND),
            QueryError::Conflict(_) => (StatusCode::CONFLICT, code::CONFLICT),
            QueryError::TimedOut(_) => (StatusCode::SERVICE_UNAVAILABLE, code::QUERY_TIMEOUT),
            QueryError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, code::SHUTTING_DOWN),
            QueryError::Read(detail) => return ApiError::internal("the query", detail),
        };
        ApiError::new(status, code, e.to_string())
    }
}

/// A JSON body, with a clear error when it is not one.
pub fn body<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            code::BAD_REQUEST,
            format!("bad request body: {e}"),
        )
    })
}

async fn search(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<query_types::SearchReply>, ApiError> {
    Ok(Json(crate::web::ops::traced_search(&app, body(&b)?).await?))
}

/// `nmemctl model import|remove` changed the models folder: use what is there now.
async fn model_reload(State(app): State<Arc<App>>) -> Result<Json<wire::Embedding>, ApiError> {
    app.semantic
        .activate(&app.writer)
        .await
        .map_err(|e| ApiError::internal("loading the embedding model", e))?;
    Ok(Json(crate::app::embedding(&app).await.unwrap_or_default()))
}

async fn observations(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<Vec<query_types::Observation>>, ApiError> {
    Ok(Json(query::get(&app, body(&b)?).await?))
}

async fn timeline(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<query_types::Timeline>, ApiError> {
    Ok(Json(query::timeline(&app, body(&b)?).await?))
}

async fn recent(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<Vec<query_types::Observation>>, ApiError> {
    Ok(Json(query::recent(&app, body(&b)?).await?))
}

async fn memories(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<query_types::Saved>, ApiError> {
    Ok(Json(query::save(&app, body(&b)?).await?))
}

async fn knowledge_remember(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::knowledge::Remembered>, ApiError> {
    Ok(Json(crate::knowledge::remember(&app, body(&b)?).await?))
}

async fn knowledge_lifecycle(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::knowledge::LifecycleReply>, ApiError> {
    Ok(Json(crate::knowledge::lifecycle(&app, body(&b)?).await?))
}

async fn knowledge_list(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::knowledge::ListReply>, ApiError> {
    Ok(Json(crate::knowledge::list(&app, body(&b)?).await?))
}

async fn docs_ingest(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::docs::IngestReply>, ApiError> {
    Ok(Json(crate::docs::ingest(app, body(&b)?).await?))
}

async fn maintain(State(app): State<Arc<App>>) -> Result<Json<crate::maintain::Report>, ApiError> {
    Ok(Json(crate::maintain::now(&app).await?))
}

pub async fn pin(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<wire::PinRequest>, ApiError> {
    let req: wire::PinRequest = body(&b)?;
    let (id, pinned) = (req.id, req.pinned);
    if req.knowledge {
        crate::knowledge::pin(&app, id, pinned).await?;
        return Ok(Json(req));
    }
    app.writer
        .exec(move |c| {
            let tx = c.transaction()?;
            let changed = tx.execute(
                "UPDATE observations SET is_pinned = ?2 WHERE id = ?1",
                rusqlite::params![id, pinned as i64],
            )?;
            if changed == 0 {
                return Err(WriteError::NotFound(format!("no observation has id {id}")));
            }
            // Its other devices (and a team it was shared with) pin it too.
            crate::sync::edit::pinned(&tx, id, pinned)?;
            Ok(tx.commit()?)
        })
        .await?;
    Ok(Json(req))
}

async fn sync_enable(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::Enabled>, ApiError> {
    Ok(Json(crate::sync::enable(&app, body(&b)?).await?))
}

async fn sync_join(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::Enabled>, ApiError> {
    Ok(Json(crate::sync::join(&app, body(&b)?).await?))
}

async fn sync_now(
    State(app): State<Arc<App>>,
) -> Result<Json<nmem_proto::sync::SyncStatus>, ApiError> {
    Ok(Json(crate::sync::now(&app).await?))
}

async fn sync_status(
    State(app): State<Arc<App>>,
) -> Result<Json<nmem_proto::sync::SyncStatus>, ApiError> {
    Ok(Json(crate::sync::status(&app).await?))
}

async fn sync_disable(
    State(app): State<Arc<App>>,
) -> Result<Json<nmem_proto::sync::SyncStatus>, ApiError> {
    Ok(Json(crate::sync::disable(&app).await?))
}

async fn sync_leave(
    State(app): State<Arc<App>>,
) -> Result<Json<nmem_proto::sync::SyncStatus>, ApiError> {
    Ok(Json(crate::sync::leave(&app).await?))
}

async fn team_leave(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::TeamLeft>, ApiError> {
    Ok(Json(crate::sync::team::leave(&app, body(&b)?).await?))
}

async fn sync_identity(
    State(app): State<Arc<App>>,
) -> Result<Json<nmem_proto::sync::Identity>, ApiError> {
    Ok(Json(crate::sync::team::identity_of(&app).await?))
}

async fn sync_share(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::Routing>, ApiError> {
    Ok(Json(crate::sync::team::share(&app, body(&b)?).await?))
}

async fn sync_exclude(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::Routing>, ApiError> {
    Ok(Json(crate::sync::team::exclude(&app, body(&b)?).await?))
}

async fn team_create(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::TeamStatus>, ApiError> {
    Ok(Json(crate::sync::team::create(&app, body(&b)?).await?))
}

async fn team_add(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::TeamStatus>, ApiError> {
    Ok(Json(crate::sync::team::add(&app, body(&b)?).await?))
}

async fn team_remove(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::TeamStatus>, ApiError> {
    Ok(Json(crate::sync::team::remove(&app, body(&b)?).await?))
}

async fn team_join(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::TeamStatus>, ApiError> {
    Ok(Json(crate::sync::team::join(&app, body(&b)?).await?))
}

async fn sync_quarantine(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<nmem_proto::sync::Quarantined>, ApiError> {
    Ok(Json(crate::sync::quarantine(app, body(&b)?).await?))
}

async fn sync_verify(
    State(app): State<Arc<App>>,
) -> Result<Json<nmem_proto::sync::Verified>, ApiError> {
    Ok(Json(crate::sync::verify(&app).await?))
}

async fn rebuild(State(app): State<Arc<App>>) -> Result<Json<nmem_proto::sync::Rebuilt>, ApiError> {
    Ok(Json(crate::sync::rebuild(&app).await?))
}

/// Read from counters the rebuild moves: answered while the writer is busy with it.
async fn rebuild_progress(State(app): State<Arc<App>>) -> Json<nmem_proto::sync::RebuildProgress> {
    Json(app.sync.rebuild.read())
}

async fn retention(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<crate::retention::Outcome>, ApiError> {
    Ok(Json(crate::retention::retention(&app, body(&b)?).await?))
}

async fn purge(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<crate::retention::Outcome>, ApiError> {
    Ok(Json(crate::retention::purge(&app, body(&b)?).await?))
}

async fn redact(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<crate::reredact::RedactOutcome>, ApiError> {
    let req: nmem_proto::admin::RedactRequest = body(&b)?;
    Ok(Json(crate::reredact::redact(app, req.apply).await?))
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        code::NOT_FOUND,
        "no such endpoint; this daemon speaks /v1 (see `nmemctl status` for versions)",
    )
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Read the event headers a shim sends with every payload.
pub fn raw_event(headers: &HeaderMap, body: Bytes) -> Result<RawEvent, ApiError> {
    let bad = |m: String| ApiError::new(StatusCode::BAD_REQUEST, code::BAD_REQUEST, m);
    let received_at = match header(headers, wire::H_RECEIVED_AT) {
        None => nmem_proto::now_ms(),
        Some(v) => v
            .parse::<i64>()
            .map_err(|_| format!("must be Unix milliseconds, not `{v}`"))
            .and_then(nmem_proto::time::check_stored_ms)
            .map_err(|e| bad(format!("`{}`: {e}", wire::H_RECEIVED_AT)))?,
    };
    RawEvent::new(
        header(headers, wire::H_EVENT_ID).unwrap_or("").to_string(),
        received_at,
        header(headers, wire::H_HARNESS).unwrap_or(Harness::ClaudeCode.as_str()),
        // No copy: the body was read into a vector of its own.
        Vec::from(body),
    )
    .map_err(bad)
}

/// `POST /v1/events/batch`: many events (JSON lines), prepared off the async workers, queued in
/// order so the writer commits them in large groups, answered once all are committed. A line
/// nmem cannot use is reported and skipped; the rest are stored as if sent one by one.
async fn record_batch(
    State(app): State<Arc<App>>,
    b: Bytes,
) -> Result<Json<wire::BatchReply>, ApiError> {
    let prep_app = app.clone();
    let (prepared, mut reply) = tokio::task::spawn_blocking(move || {
        let mut reply = wire::BatchReply::default();
        let mut prepared = Vec::new();
        let lines = b
            .split(|&c| c == b'\n')
            .filter(|l| !l.iter().all(u8::is_ascii_whitespace));
        for (index, line) in lines.enumerate() {
            let raw =
                serde_json::from_slice::<wire::BatchEvent<&serde_json::value::RawValue>>(line)
                    .map_err(|e| format!("not a batch event: {e}"))
                    .and_then(|e| {
                        RawEvent::new(
                            e.event_id,
                            e.received_at,
                            &e.harness,
                            e.payload.get().as_bytes().to_vec(),
                        )
                    });
            let result = raw.and_then(|raw| {
                prep_app.ingest.prepare(&raw).map_err(|e| {
                    crate::stats::Stats::add(&prep_app.stats.rejected, 1);
                    e.to_string()
                })
            });
            match result {
                Ok(Some(p)) => prepared.push(p),
                Ok(None) => reply.ignored += 1,
                Err(message) => reply.rejected.push(wire::BatchRejected { index, message }),
            }
        }
        (prepared, reply)
    })
    .await
    .map_err(|e| ApiError::internal("preparing the batch", e))?;
    let mut pending = Vec::with_capacity(prepared.len());
    for p in prepared {
        pending.push(app.writer.enqueue_with_session(p).await?);
    }
    let mut failed = None;
    for (session, rx) in pending {
        match rx.await.map_err(|_| WriteError::Closed).and_then(|r| r) {
            Ok(a) => match a.outcome {
                RecordOutcome::Stored => reply.stored += 1,
                RecordOutcome::Ignored => reply.ignored += 1,
                RecordOutcome::Duplicate | RecordOutcome::Deduplicated => reply.duplicates += 1,
            },
            Err(e) => {
                // Not committed: the transcript offset read for it must be read again.
                app.ingest.tailer.forget(&session);
                failed.get_or_insert(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(Json(reply)),
    }
}

/// What the blocking thread learnt of an event before handing it to the writer.
enum Prep {
    Rejected(String),
    Ignored,
    /// Queued to the writer: its session, and what a SessionStart's digest needs.
    Queued {
        session: String,
        start: Option<(crate::ingest::Project, String, String)>,
    },
}

async fn record(
    State(app): State<Arc<App>>,
    arrival: Option<axum::Extension<crate::trace::Arrival>>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Json<RecordReply>, ApiError> {
    record_request(&app, &headers, body, arrival.map(|a| a.0)).await
}

/// `POST /v1/events` from its headers and body: the routed handler above, and the direct path
/// that skips the router (`conn::serve`).
pub(crate) async fn record_request(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: Bytes,
    arrival: Option<crate::trace::Arrival>,
) -> Result<Json<RecordReply>, ApiError> {
    let raw = raw_event(headers, body)?;
    Ok(Json(record_traced(app, raw, arrival).await?))
}

/// The largest payload prepared on the request's async worker: parsing, redacting and
/// extracting a few KB takes tens of microseconds, a large tool output much longer, and an async
/// worker busy with it stalls every request queued on it. Larger ones go to the drainers.
pub const INLINE_MAX: usize = 32 * 1024;

/// Prepare, queue and commit one event: what `POST /v1/events` does, and the web API's hook
/// entry points (`/api/sessions/*`) too, so both feed the same ingest.
pub async fn record_event(app: &Arc<App>, raw: RawEvent) -> Result<RecordReply, ApiError> {
    record_traced(app, raw, None).await
}

/// [`record_event`], with when the request arrived for the opt-in trace ([`crate::trace`]).
async fn record_traced(
    app: &Arc<App>,
    raw: RawEvent,
    arrival: Option<crate::trace::Arrival>,
) -> Result<RecordReply, ApiError> {
    let harness = raw.harness;
    let mut trace = crate::trace::Trace::start(&raw.event_id, arrival);
    // Announced before preparing, so a writer about to commit waits for it (group commit).
    let coming = app.writer.coming();
    let (prep, written) = match inline(&app.ingest, &raw) {
        Route::Here(r) => {
            trace.mark("prepared");
            let (prep, ev) = settle(r);
            let written = match ev {
                Some(ev) => {
                    let (reply, rx) = tokio::sync::oneshot::channel();
                    match lead(app, move || Some((Box::new(ev), reply)), coming) {
                        Ok(()) => trace.mark("led"),
                        Err((f, coming)) => {
                            let (ev, reply) = f().expect("the event just given");
                            // A closed writer drops the reply: answered below as shutting
                            // down.
                            if coming.enqueue_reply(ev, reply).await.is_ok() {
                                trace.mark("queued");
                            }
                        }
                    }
                    rx.await
                }
                None => Ok(Err(WriteError::Closed)),
            };
            (Some(prep), written)
        }
        Route::Drainer(value) => drained(app, raw, value, coming, &mut trace).await,
    };
    trace.mark("woken");
    let (session, start) = match prep {
        Some(Prep::Rejected(message)) => {
            crate::stats::Stats::add(&app.stats.rejected, 1);
            app.stats.ops.failure("rejected_payload", &message);
            app.stats.feed.failed("rejected_payload", &message);
            return Err(ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                code::INVALID_PAYLOAD,
                message,
            ));
        }
        Some(Prep::Ignored) => {
            return Ok(RecordReply {
                outcome: RecordOutcome::Ignored,
                kind: None,
                id: None,
                output: None,
            })
        }
        Some(Prep::Queued { session, start }) => (session, start),
        // The blocking task never ran (the runtime is shutting down).
        None => return Err(WriteError::Closed.into()),
    };
    let applied = written
        .map_err(|_| WriteError::Closed)
        .and_then(|r| r)
        .inspect_err(|_| {
            // Not committed: the transcript offset read for it must be read again.
            app.ingest.tailer.forget(&session);
        })?;
    let output = match start {
        Some((project, session, source)) => {
            crate::context::session_start_output(app, harness, &project, &session, &source).await
        }
        None => None,
    };
    trace.finish();
    Ok(RecordReply {
        outcome: applied.outcome,
        kind: applied.kind.map(str::to_string),
        id: applied.id,
        output,
    })
}

/// Where an event is prepared. Lives on the stack for one request; boxing the large variant
/// would add an allocation per event for nothing.
#[allow(clippy::large_enum_variant)]
enum Route {
    /// On the request's worker, already done: nothing had to be read from disk.
    Here(Result<Option<Prepared>, PrepareError>),
    /// On a drainer (a blocking thread), with the payload parsed if it was.
    Drainer(Option<serde_json::Value>),
}

/// Prepare on the request's own worker when that reads nothing from disk and the payload is
/// small ([`INLINE_MAX`]): no hand-off to a drainer and back (a futex wake-up and a thread
/// switch each way). Everything else goes to the drainers.
fn inline(ingest: &crate::ingest::Ingest, raw: &RawEvent) -> Route {
    if raw.payload.len() > INLINE_MAX {
        return Route::Drainer(None);
    }
    let value = match ingest.parse(raw) {
        Ok(v) => v,
        Err(e) => return Route::Here(Err(e)),
    };
    match ingest.disk_free(raw, &value) {
        Some(free) => Route::Here(ingest.prepare_parsed(raw, &value, Some(free))),
        None => Route::Drainer(Some(value)),
    }
}

/// What preparing gave: how the request answers, and the event for the writer if any.
fn settle(r: Result<Option<Prepared>, PrepareError>) -> (Prep, Option<Prepared>) {
    match r {
        Err(e) => (Prep::Rejected(e.to_string()), None),
        Ok(None) => (Prep::Ignored, None),
        Ok(Some(p)) => {
            let start = (p.event == Event::SessionStart).then(|| {
                let source = match &p.effect {
                    crate::ingest::SessionEffect::Start { source, .. } => source.clone(),
                    _ => String::new(),
                };
                (p.project.clone(), p.session_id.clone(), source)
            });
            let prep = Prep::Queued {
                session: p.session_id.clone(),
                start,
            };
            (prep, Some(p))
        }
    }
}

type Written = Result<Result<Applied, WriteError>, tokio::sync::oneshot::error::RecvError>;

/// Prepare on a drainer, off the async workers: preparing looks up the project's git root on
/// disk and reads the transcript, and a slow file system must not stall other requests. The
/// blocking thread (one of `app.prepare`'s drainers, which take queued events without being
/// woken for each) also queues the event, so this task wakes once, at the commit (or at the
/// refusal): a wake-up between preparing and queueing cost a thread switch per event.
async fn drained(
    app: &Arc<App>,
    raw: RawEvent,
    value: Option<serde_json::Value>,
    coming: crate::store::writer::Coming,
    trace: &mut crate::trace::Trace,
) -> (Option<Prep>, Written) {
    let slot = Arc::new(std::sync::Mutex::new(None::<Prep>));
    let (reply, committed) = tokio::sync::oneshot::channel();
    let (prep_app, prep_slot) = (app.clone(), slot.clone());
    // The preparation, wherever it runs: the event to store and its reply, if it stores one.
    let prepare = move || {
        let r = match value {
            Some(v) => prep_app.ingest.prepare_parsed(&raw, &v, None),
            None => prep_app.ingest.prepare(&raw),
        };
        let (prep, ev) = settle(r);
        // Set before `reply` is dropped or answered, which wakes the request.
        *prep_slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(prep);
        // Dropped unanswered when there is nothing to store.
        ev.map(|ev| (ev, reply))
    };
    let here = move || prepare().map(|(ev, reply)| (Box::new(ev), reply));
    // A lone event is prepared and committed on this request's thread (no hand-off at all);
    // else, when the writer is idle, prepared by the writer itself (one hand-off less);
    // otherwise on a drainer, which queues it (its announcement ending as it is queued, for
    // group commit).
    match lead(app, here, coming) {
        Ok(()) => trace.mark("led"),
        Err((here, coming)) => match app.writer.prepare_here(Box::new(here), coming) {
            Ok(()) => trace.mark("to_writer"),
            Err((here, coming)) => {
                trace.mark("to_drainer");
                app.prepare.push(move || match here() {
                    // A closed writer drops `reply`: answered as shutting down.
                    Some((ev, reply)) => drop(coming.enqueue_blocking(*ev, reply)),
                    None => drop(coming),
                });
            }
        },
    }
    let written = committed.await;
    let prep = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    (prep, written)
}

/// [`crate::store::writer::Writer::lead`] on this request's async worker, which the event's
/// preparation and commit then hold (not `block_in_place`, which handed the worker's other
/// tasks to another thread for every event and cost what leading saved: ARCHITECTURE.md, tenth
/// round); the other worker keeps serving. Only on a multi-threaded runtime, nmemd's: a
/// current-thread one (some tests) has no other worker, and the event is queued as usual.
fn lead<F>(
    app: &App,
    f: F,
    coming: crate::store::writer::Coming,
) -> Result<(), (F, crate::store::writer::Coming)>
where
    F: FnOnce() -> Option<(Box<Prepared>, crate::store::writer::Reply)>,
{
    use tokio::runtime::{Handle, RuntimeFlavor};
    let threaded =
        Handle::try_current().is_ok_and(|h| h.runtime_flavor() == RuntimeFlavor::MultiThread);
    if !threaded {
        return Err((f, coming));
    }
    app.writer.lead(f, coming)
}

async fn health(State(app): State<Arc<App>>) -> Json<wire::Health> {
    Json(wire::Health {
        ok: true,
        version: nmem_proto::VERSION.to_string(),
        protocol: nmem_proto::PROTOCOL,
        pid: std::process::id(),
        uptime_s: app.started.elapsed().as_secs(),
    })
}

async fn status(State(app): State<Arc<App>>) -> Result<Json<wire::Status>, ApiError> {
    let s = crate::app::status(&app)
        .await
        .map_err(|e| ApiError::internal("the status report", e))?;
    Ok(Json(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `POST /v1/events` prepares on its worker only small events that read nothing from disk;
    /// a transcript to tail, an unknown project or a large body goes to the drainers.
    #[test]
    fn only_small_disk_free_events_are_prepared_on_the_worker() {
        use crate::ingest::project::{ProjectResolver, Strategy};
        let ingest = crate::ingest::Ingest::new(
            ProjectResolver::new(Strategy::GitRoot),
            crate::redact::Redactor::new(&[]).0,
            Box::new(|_| 0),
        );
        let event = |stdout: &str, transcript: bool| {
            let mut v = serde_json::json!({
                "session_id": "s-inline", "cwd": "/home/dev/projects/ledger",
                "hook_event_name": "PostToolUse", "tool_name": "Bash",
                "tool_input": {"command": "make check"},
                "tool_response": {"stdout": stdout, "stderr": ""},
            });
            if transcript {
                v["transcript_path"] = "/home/dev/.claude/projects/ledger/s-inline.jsonl".into();
            }
            RawEvent::new(
                "ev-inline".into(),
                1_790_000_000_000,
                "claude-code",
                v.to_string().into_bytes(),
            )
            .unwrap()
        };
        let here = |r: &RawEvent| matches!(inline(&ingest, r), Route::Here(Ok(Some(_))));
        assert!(!here(&event("ok", false)), "the project is not cached yet");
        ingest.projects.resolve("/home/dev/projects/ledger");
        assert!(here(&event("ok", false)));
        assert!(!here(&event("ok", true)), "a transcript to tail");
        let big = "x".repeat(INLINE_MAX);
        assert!(matches!(
            inline(&ingest, &event(&big, false)),
            Route::Drainer(None)
        ));
        // A payload that is not JSON is refused on the worker, with the usual error.
        let bad = RawEvent::new(
            "ev-bad".into(),
            1_790_000_000_000,
            "claude-code",
            b"{".to_vec(),
        )
        .unwrap();
        assert!(matches!(inline(&ingest, &bad), Route::Here(Err(_))));
    }

    /// Every kind of writer error, one of each. The match has no wildcard: a new kind does not
    /// compile here until it is listed, and then the test below asks for its status.
    fn every_write_error() -> Vec<WriteError> {
        let all = vec![
            WriteError::Invalid("max_age_days = -1: an age is 0 days or more".into()),
            WriteError::NotFound("no observation has id 7".into()),
            WriteError::Conflict("#3 already says api port 8080".into()),
            WriteError::Storage("near \"SELEC\": syntax error in /home/u/nmem.db".into()),
            WriteError::Closed,
        ];
        for e in &all {
            match e {
                WriteError::Invalid(_)
                | WriteError::NotFound(_)
                | WriteError::Conflict(_)
                | WriteError::Storage(_)
                | WriteError::Closed => {}
            }
        }
        all
    }

    #[test]
    fn every_writer_error_kind_has_its_status_and_code() {
        let got: Vec<(u16, &str)> = every_write_error()
            .into_iter()
            .map(|e| {
                let a = ApiError::from(e);
                (a.status.as_u16(), a.code)
            })
            .collect();
        assert_eq!(
            got,
            [
                (400, code::BAD_REQUEST),
                (404, code::NOT_FOUND),
                (409, code::CONFLICT),
                (500, code::STORE_FAILED),
                (503, code::SHUTTING_DOWN),
            ]
        );
    }

    /// What the caller can act on is sent as is; SQLite's detail (SQL text, paths) never is.
    #[test]
    fn only_storage_failures_keep_their_detail_in_the_log() {
        for e in every_write_error() {
            let said = e.to_string();
            let a = ApiError::from(e.clone());
            match e {
                WriteError::Storage(_) => {
                    assert!(!a.message.contains("SELEC") && !a.message.contains("/home"));
                    assert!(a.message.contains("nmemctl logs"), "{}", a.message);
                }
                _ => assert_eq!(a.message, said),
            }
        }
    }
}
