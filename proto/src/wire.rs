//! The daemon's HTTP/JSON API, version 1.
//!
//! Every reply carries [`H_VERSION`] and [`H_PROTOCOL`] headers; errors are
//! `{"code": …, "message": …}` with a proper HTTP status.
//!
//! | method and path | body | reply |
//! |---|---|---|
//! | `POST /v1/events` | the raw hook payload; headers [`H_EVENT_ID`], [`H_RECEIVED_AT`], [`H_HARNESS`] | [`RecordReply`], sent after the commit |
//! | `POST /v1/events/batch` | [`BatchEvent`] lines (JSON lines, one event each, in order) | [`BatchReply`], sent after every commit |
//! | `GET /v1/health` | | [`Health`] |
//! | `GET /v1/status` | | [`Status`] |
//! | `POST /v1/search` | [`crate::query::SearchRequest`] | [`crate::query::SearchReply`] |
//! | `POST /v1/observations` | [`crate::query::GetRequest`] | `[Observation]` |
//! | `POST /v1/timeline` | [`crate::query::TimelineRequest`] | [`crate::query::Timeline`] |
//! | `POST /v1/recent` | [`crate::query::RecentRequest`] | `[Observation]` |
//! | `POST /v1/memories` | [`crate::query::SaveRequest`] | [`crate::query::Saved`] |
//! | `POST /v1/docs/ingest` | [`crate::docs::IngestRequest`] | [`crate::docs::IngestReply`] |
//! | `POST /v1/maintain` | [`crate::admin::Empty`] | [`crate::admin::MaintainReport`] |
//! | `POST /v1/pin` | [`PinRequest`] | [`PinRequest`] (what was done) |
//! | `POST /v1/retention` | [`crate::admin::RetentionRequest`] | [`crate::admin::DeletionReport`] |
//! | `POST /v1/purge` | [`crate::admin::PurgeRequest`] | [`crate::admin::DeletionReport`] |
//! | `POST /v1/redact` | [`crate::admin::RedactRequest`] | [`crate::admin::RedactReport`] |
//! | `POST /v1/knowledge` | [`crate::knowledge::RememberRequest`] | [`crate::knowledge::Remembered`] (409 `conflict`: an exact duplicate claim) |
//! | `POST /v1/knowledge/lifecycle` | [`crate::knowledge::LifecycleRequest`] | [`crate::knowledge::LifecycleReply`] |
//! | `POST /v1/knowledge/list` | [`crate::knowledge::ListRequest`] | [`crate::knowledge::ListReply`] |
//! | `POST /v1/model/reload` | [`crate::admin::Empty`] | [`Embedding`] (after `nmemctl model import|remove`) |
//! | `POST /v1/sync/enable` | [`crate::sync::EnableRequest`] | [`crate::sync::Enabled`] (with the recovery phrase, shown once) |
//! | `POST /v1/sync/join` | [`crate::sync::JoinRequest`] | [`crate::sync::Enabled`] |
//! | `POST /v1/sync/now` | [`crate::admin::Empty`] | [`crate::sync::SyncStatus`] (after one push and pull) |
//! | `POST /v1/sync/status` | [`crate::admin::Empty`] | [`crate::sync::SyncStatus`] |
//! | `POST /v1/sync/disable` | [`crate::admin::Empty`] | [`crate::sync::SyncStatus`] |
//! | `POST /v1/sync/identity` | [`crate::admin::Empty`] | [`crate::sync::Identity`] (this device's public key, made on first use) |
//! | `POST /v1/sync/share` | [`crate::sync::ShareRequest`] | [`crate::sync::Routing`] |
//! | `POST /v1/sync/exclude` | [`crate::sync::ExcludeRequest`] | [`crate::sync::Routing`] |
//! | `POST /v1/team/create` | [`crate::sync::TeamRequest`] | [`crate::sync::TeamStatus`] |
//! | `POST /v1/team/add` | [`crate::sync::TeamRequest`] | [`crate::sync::TeamStatus`] |
//! | `POST /v1/team/remove` | [`crate::sync::TeamRequest`] | [`crate::sync::TeamStatus`] (the key rotated) |
//! | `POST /v1/team/join` | [`crate::sync::TeamRequest`] | [`crate::sync::TeamStatus`] |
//! | `POST /v1/sync/quarantine` | [`crate::sync::QuarantineRequest`] | [`crate::sync::Quarantined`] |
//! | `POST /v1/sync/verify` | [`crate::admin::Empty`] | [`crate::sync::Verified`] |
//! | `POST /v1/rebuild` | [`crate::admin::Empty`] | [`crate::sync::Rebuilt`] |
//! | `POST /v1/sync/leave` | [`crate::admin::Empty`] | [`crate::sync::SyncStatus`] (this device left its personal space) |
//! | `POST /v1/team/leave` | [`crate::sync::TeamLeaveRequest`] | [`crate::sync::TeamLeft`] |
//! | `POST /v1/rebuild/progress` | [`crate::admin::Empty`] | [`crate::sync::RebuildProgress`] (a running rebuild's phase and counts) |
//! | `POST /v1/ui` | [`UiRequest`] | [`UiReply`] (the web viewer's listener: start, stop, rotate its token, or ask) |
//!
//! The web viewer's `/api/*` routes (CodexMem's worker API, adapted) are served on this socket
//! too, without a token; on its TCP listener they need one (see the daemon's `web` module).

use serde::{Deserialize, Serialize};

pub const PATH_EVENTS: &str = "/v1/events";
pub const PATH_EVENTS_BATCH: &str = "/v1/events/batch";
pub const PATH_HEALTH: &str = "/v1/health";
pub const PATH_STATUS: &str = "/v1/status";
pub const PATH_SEARCH: &str = "/v1/search";
pub const PATH_OBSERVATIONS: &str = "/v1/observations";
pub const PATH_TIMELINE: &str = "/v1/timeline";
pub const PATH_RECENT: &str = "/v1/recent";
pub const PATH_MEMORIES: &str = "/v1/memories";
pub const PATH_DOCS_INGEST: &str = "/v1/docs/ingest";
pub const PATH_MAINTAIN: &str = "/v1/maintain";
pub const PATH_PIN: &str = "/v1/pin";
pub const PATH_RETENTION: &str = "/v1/retention";
pub const PATH_PURGE: &str = "/v1/purge";
pub const PATH_REDACT: &str = "/v1/redact";
pub const PATH_MODEL_RELOAD: &str = "/v1/model/reload";
pub const PATH_KNOWLEDGE: &str = "/v1/knowledge";
pub const PATH_KNOWLEDGE_LIFECYCLE: &str = "/v1/knowledge/lifecycle";
pub const PATH_KNOWLEDGE_LIST: &str = "/v1/knowledge/list";
pub const PATH_UI: &str = "/v1/ui";
pub const PATH_SYNC_ENABLE: &str = "/v1/sync/enable";
pub const PATH_SYNC_JOIN: &str = "/v1/sync/join";
pub const PATH_SYNC_NOW: &str = "/v1/sync/now";
pub const PATH_SYNC_STATUS: &str = "/v1/sync/status";
pub const PATH_SYNC_DISABLE: &str = "/v1/sync/disable";
pub const PATH_SYNC_IDENTITY: &str = "/v1/sync/identity";
pub const PATH_SYNC_SHARE: &str = "/v1/sync/share";
pub const PATH_SYNC_EXCLUDE: &str = "/v1/sync/exclude";
pub const PATH_TEAM_CREATE: &str = "/v1/team/create";
pub const PATH_TEAM_ADD: &str = "/v1/team/add";
pub const PATH_TEAM_REMOVE: &str = "/v1/team/remove";
pub const PATH_TEAM_JOIN: &str = "/v1/team/join";
pub const PATH_SYNC_QUARANTINE: &str = "/v1/sync/quarantine";
pub const PATH_SYNC_VERIFY: &str = "/v1/sync/verify";
pub const PATH_REBUILD: &str = "/v1/rebuild";
pub const PATH_SYNC_LEAVE: &str = "/v1/sync/leave";
pub const PATH_TEAM_LEAVE: &str = "/v1/team/leave";
pub const PATH_REBUILD_PROGRESS: &str = "/v1/rebuild/progress";

/// Unique per `nmem record` invocation; makes a replay from the spool idempotent.
pub const H_EVENT_ID: &str = "x-nmem-event-id";
/// When the shim received the event, in Unix milliseconds; becomes the observation's time.
pub const H_RECEIVED_AT: &str = "x-nmem-received-at";
/// The harness the payload comes from (see [`crate::harness::Harness`]).
pub const H_HARNESS: &str = "x-nmem-harness";
/// The daemon's version, on every reply.
pub const H_VERSION: &str = "x-nmem-version";
/// The daemon's protocol number, on every reply.
pub const H_PROTOCOL: &str = "x-nmem-protocol";

/// What happened to a recorded event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordOutcome {
    /// Committed as a new observation or prompt (or a session change).
    Stored,
    /// This event id (or tool call) was stored before: nothing changed.
    Duplicate,
    /// A repeat of a recent read or search: counted, not stored again.
    Deduplicated,
    /// Valid, but nmem stores nothing for it.
    Ignored,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordReply {
    pub outcome: RecordOutcome,
    /// `observation` or `prompt` when something was stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// What the shim prints on stdout for the harness (the SessionStart digest, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
}

/// One line of a `POST /v1/events/batch` body: what [`PATH_EVENTS`] takes in its headers and body,
/// as one JSON object. Used by `nmem import`, which sends thousands of events at a time.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchEvent<P> {
    pub event_id: String,
    /// Unix milliseconds; becomes the observation's time.
    pub received_at: i64,
    pub harness: String,
    /// The hook payload, as the harness would have sent it.
    pub payload: P,
}

/// What happened to a batch, counted by outcome; `rejected` lists the lines nmem could not use
/// (their 0-based index and why), the others were stored or skipped as usual.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BatchReply {
    pub stored: u64,
    pub duplicates: u64,
    pub ignored: u64,
    #[serde(default)]
    pub rejected: Vec<BatchRejected>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatchRejected {
    pub index: usize,
    pub message: String,
}

/// `POST /v1/pin`: pin (or unpin) an observation; pinned rows are never swept and show in the digest.
/// With `knowledge: true`, `id` is a knowledge item's: pinned, it shows first in the digest.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PinRequest {
    pub id: i64,
    pub pinned: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub knowledge: bool,
}

/// `POST /v1/ui`: what to do with the web viewer's listener (`nmem ui`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields, tag = "action")]
pub enum UiRequest {
    /// Listen (if not already) and reply with the URL.
    Start,
    /// Stop listening; open pages lose their connection.
    Stop,
    /// Replace the token: every open page and script must use the new URL or token.
    Rotate,
    /// Only say whether it listens.
    Status,
}

/// The web viewer's listener, as `nmem ui` and `nmemctl status` show it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct UiReply {
    pub listening: bool,
    /// `127.0.0.1:37777` when listening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The URL to open, with the token (only in the reply to `start` and `rotate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Why it is not where config asked (the port was taken), or that it listens beyond
    /// loopback.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct ErrorBody {
    pub code: String,
    pub message: String,
}

/// Error codes of the API.
pub mod code {
    pub const BAD_REQUEST: &str = "bad_request";
    pub const INVALID_PAYLOAD: &str = "invalid_payload";
    pub const NOT_FOUND: &str = "not_found";
    /// A write that repeats what is stored (an exact duplicate knowledge claim).
    pub const CONFLICT: &str = "conflict";
    /// A search query FTS5 rejected; the message carries SQLite's.
    pub const BAD_QUERY: &str = "bad_query";
    pub const SHUTTING_DOWN: &str = "shutting_down";
    pub const STORE_FAILED: &str = "store_failed";
    pub const INTERNAL: &str = "internal";
    /// A query spent its time budget (`[limits] query_timeout_ms`) and was stopped.
    pub const QUERY_TIMEOUT: &str = "query_timeout";
    /// The viewer's API without its token (TCP only).
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// The viewer's API refused the request's Host or Origin.
    pub const FORBIDDEN: &str = "forbidden";
    /// A CodexMem route about its LLM, which nmem does not have.
    pub const NOT_IMPLEMENTED: &str = "not_implemented";
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    pub ok: bool,
    pub version: String,
    pub protocol: u32,
    pub pid: u32,
    pub uptime_s: u64,
}

/// `nmemctl status --json`: the daemon's own view, or (when it is down) what the files say.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
pub struct Status {
    pub running: bool,
    pub version: Option<String>,
    pub protocol: Option<u32>,
    pub pid: Option<u32>,
    pub uptime_s: Option<u64>,
    pub socket: String,
    pub db_path: String,
    pub db_bytes: u64,
    pub wal_bytes: u64,
    pub queue_depth: u64,
    pub queue_capacity: u64,
    pub spool_backlog: u64,
    pub spool_oldest_age_s: Option<u64>,
    pub spool_drained: u64,
    pub spool_corrupt: u64,
    pub spool_dropped: u64,
    pub sessions: u64,
    pub prompts: u64,
    pub observations: u64,
    pub events_recorded: u64,
    /// Group commits so far, the events they carried, and the writer's time in them.
    #[serde(default)]
    pub commits: u64,
    #[serde(default)]
    pub events_written: u64,
    #[serde(default)]
    pub commit_micros: u64,
    pub duplicates: u64,
    pub dedup_hits: u64,
    pub redactions: u64,
    pub schema_version: Option<u32>,
    /// When the writer last committed and maintenance last ran (Unix ms).
    #[serde(default)]
    pub last_write_ms: Option<u64>,
    #[serde(default)]
    pub last_maintenance_ms: Option<u64>,
    /// Events stored per second over the last minute.
    #[serde(default)]
    pub ingest_per_s: f64,
    /// Recording is paused (`nmemctl pause`).
    #[serde(default)]
    pub paused: bool,
    pub last_error: Option<String>,
    /// Problems that need a person, each saying what to do. Empty when healthy.
    #[serde(default)]
    pub degraded: Vec<String>,
    /// The embedding model and its progress; absent when none is installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<Embedding>,
    /// Log lines the daemon could not write (stderr full or closed): counted and dropped.
    #[serde(default)]
    pub log_write_failures: u64,
    /// The web viewer's listener (`nmem ui`), when it listens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ui: Option<UiReply>,
    /// SessionStart digests computed off the hook's path (after writes settle), and those a
    /// SessionStart computed itself because none was current (issue 15).
    #[serde(default)]
    pub digests_precomputed: u64,
    #[serde(default)]
    pub digests_on_demand: u64,
}

/// Semantic search's state: the model, how many rows have a vector, how many wait.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Embedding {
    /// The active model's id (`all-MiniLM-L6-v2`), or null when none is installed.
    pub model: Option<String>,
    /// Rows (observations, prompts and document chunks) with a vector of that model.
    pub embedded: u64,
    /// Rows waiting to be embedded.
    pub pending: u64,
    /// Why the model cannot be used, when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The embedder's process id while it runs (it stops when idle).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedder_pid: Option<u32>,
    /// The engine that embeds (`onnx` or `candle`) once one has started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The ONNX graph the `onnx` engine runs: `model.fp32.onnx` (preferred) or `model.int8.onnx`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onnx_graph: Option<String>,
    /// Why the configured engine is not the one in use (e.g. ONNX Runtime missing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_fallback: Option<String>,
}

#[cfg(test)]
mod tests {
    /// The table at the top of this file lists every route, with its request and reply types.
    #[test]
    fn the_route_table_lists_every_route() {
        let src = include_str!("wire.rs");
        let table: Vec<&str> = src.lines().filter(|l| l.starts_with("//! | `")).collect();
        let mut paths = 0;
        for line in src.lines() {
            let Some(rest) = line.strip_prefix("pub const PATH_") else {
                continue;
            };
            let path = rest.split('"').nth(1).expect("a path literal");
            paths += 1;
            assert!(
                table.iter().any(|row| row.contains(&format!(" {path}` |"))),
                "{path} is missing from the route table"
            );
        }
        assert!(paths >= 15, "found {paths} routes");
    }
}
