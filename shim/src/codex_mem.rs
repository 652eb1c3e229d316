//! `nmem serve --profile codex-mem`: codex-mem's MCP API v1 over nmem's daemon routes.
//!
//! The contract's names, shapes, limits and error codes win: ids are strings (an observation's
//! id in decimal), `search` pages with `limit` (20, at most 100) and `offset` and says `total`,
//! `timeline` takes `anchor_id` and depths of 3 (at most 20), `get_entries` takes 1 to 200 ids
//! (fetched from the daemon 50 at a time), `retention_dry_run` never deletes. Every result's text
//! is the JSON object itself; every error is `{code, message, details}` with a v1 code
//! (`INVALID_ARGUMENT`, `POLICY_BLOCKED`, `ENTRY_NOT_FOUND`, `STORAGE_FAILURE`,
//! `MIGRATION_FAILURE`), and a refused request changes nothing. Unknown input fields are ignored.
//! An omitted `project` is the project of `nmem serve`'s folder.
//!
//! Where v1 leaves things open, nmem's design decides (README, "MCP profiles"): entries are
//! observations (prompts are not entries here), knowledge and work items, whose ids are `k<id>`
//! (`search` merges them in by rank; `get_entries` takes them, the item as the metadata), and
//! ingested document chunks, whose ids are `d<id>` (`search` lists them after the observations,
//! `get_entries` takes them; `timeline` around a chunk gives the chunks before and after it in
//! its document, in order, and refuses a knowledge item, which has neither a session nor a
//! place in a document); `total` counts the matches up to 100 past `offset`;
//! `ingest_docs` reads its `sources` like `nmem ingest` (relative paths from the server's
//! folder; by default the folder's Markdown documentation) into the server's project; its
//! `entry_type` is checked but not stored (a chunk's type is `doc`).

use crate::daemon_client::{post, CallError};
use nmem_proto::admin::{DeletionReport, RetentionRequest};
use nmem_proto::query::{
    GetRequest, Observation, OneOrMany, SaveRequest, Saved, SearchHit, SearchReply, SearchRequest,
    Timeline, TimelineRequest,
};
use nmem_proto::time::format_rfc3339_ms;
use nmem_proto::wire;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, ErrorData, Implementation, ServerCapabilities,
    ServerConfig,
};
use rmcp::{tool, tool_handler, tool_router, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

const INSTRUCTIONS: &str = "Codex memory (codex-mem MCP API v1, served by nmem): `search` \
returns compact ranked entries, `timeline` the entries around one, `get_entries` their full text, \
`save_memory` keeps a decision or fact, `ingest_docs` imports project documents (their entries \
are `d<id>`), `retention_dry_run` says what retention would remove. Ids are strings; errors are \
{code, message, details}.";

/// The documents `ingest_docs` reads when given no `sources`: the folder's top-level Markdown
/// and its `docs/` (session logs, decisions and requirements live there in the projects
/// codex-mem serves).
const DEFAULT_DOCS: &str = "docs";

/// A v1 error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    InvalidArgument,
    PolicyBlocked,
    EntryNotFound,
    StorageFailure,
    MigrationFailure,
}

impl Code {
    pub fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::PolicyBlocked => "POLICY_BLOCKED",
            Code::EntryNotFound => "ENTRY_NOT_FOUND",
            Code::StorageFailure => "STORAGE_FAILURE",
            Code::MigrationFailure => "MIGRATION_FAILURE",
        }
    }
}

/// A v1 error as a tool result.
fn error(code: Code, message: impl Into<String>, details: Value) -> CallToolResult {
    CallToolResult::error(vec![Content::text(
        json!({"code": code.as_str(), "message": message.into(), "details": details}).to_string(),
    )])
}

/// The v1 code of a daemon failure: the request's fault, a missing entry, or the store's.
pub fn code_of(e: &CallError) -> Code {
    match e {
        CallError::Api { code, message, .. } => match code.as_str() {
            wire::code::BAD_REQUEST
            | wire::code::BAD_QUERY
            | wire::code::INVALID_PAYLOAD
            | wire::code::CONFLICT => Code::InvalidArgument,
            wire::code::NOT_FOUND => Code::EntryNotFound,
            _ if message.contains("newer nmem") => Code::MigrationFailure,
            _ => Code::StorageFailure,
        },
        CallError::Down(m) | CallError::Slow(m) if m.contains("newer nmem") => {
            Code::MigrationFailure
        }
        _ => Code::StorageFailure,
    }
}

fn ok(v: &impl Serialize) -> CallToolResult {
    CallToolResult::success(vec![Content::text(
        serde_json::to_string(v).unwrap_or_default(),
    )])
}

/// One daemon call off the async threads.
async fn daemon<B: Serialize + Send + 'static, R: DeserializeOwned + Send + 'static>(
    path: &'static str,
    body: B,
) -> Result<R, Box<CallToolResult>> {
    let res = tokio::task::spawn_blocking(move || post::<B, R>(path, &body))
        .await
        .map_err(|e| Box::new(error(Code::StorageFailure, e.to_string(), Value::Null)))?;
    res.map_err(|e| {
        let details = match &e {
            CallError::Api { code, status, .. } => json!({"nmem_code": code, "status": status}),
            _ => Value::Null,
        };
        Box::new(error(code_of(&e), e.to_string(), details))
    })
}

/// A v1 `EntryIndexItem` (with the additive `snippet`, the matched text up to 200 characters).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EntryIndexItem {
    pub id: String,
    pub title: String,
    pub entry_type: String,
    pub project: String,
    pub created_at: String,
    pub score: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<String>,
}

/// A v1 `EntryDetailItem`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EntryDetailItem {
    pub id: String,
    pub title: String,
    pub body: String,
    pub entry_type: String,
    pub project: String,
    pub session_id: Option<String>,
    pub source_ref: Option<String>,
    pub metadata: Map<String, Value>,
    pub created_at: String,
}

/// An entry's title: the title it was saved with, else its first line, cut at 120 characters.
fn title_of(content: &str, metadata: Option<&Value>) -> String {
    metadata
        .and_then(|m| m.get("title"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| nmem_proto::text::one_line(content.lines().next().unwrap_or(""), 120))
}

fn index_item_of_hit(h: &SearchHit) -> EntryIndexItem {
    let title = match &h.doc {
        Some(d) if !d.heading.is_empty() => d.heading.clone(),
        _ => h.content_preview.lines().next().unwrap_or("").to_string(),
    };
    EntryIndexItem {
        id: match h.kind.as_str() {
            "doc" => format!("d{}", h.id),
            "knowledge" | "work" => format!("k{}", h.id),
            _ => h.id.to_string(),
        },
        title: nmem_proto::text::one_line(&title, 120),
        entry_type: h.obs_type.clone().unwrap_or_else(|| h.kind.clone()),
        project: h.project.clone(),
        created_at: format_rfc3339_ms(h.timestamp),
        score: h.score,
        snippet: Some(
            h.content
                .as_deref()
                .map(|c| nmem_proto::text::one_line(c, 200))
                .unwrap_or_else(|| nmem_proto::text::one_line(&h.content_preview, 200)),
        ),
    }
}

/// A document chunk's heading path ("Runbook > Deploy"), the title search gives it; `None` for
/// anything else or a chunk without headings.
fn doc_heading(o: &Observation) -> Option<String> {
    if o.obs_type != "doc" {
        return None;
    }
    o.metadata
        .as_ref()?
        .get("heading")?
        .as_str()
        .filter(|h| !h.is_empty())
        .map(|h| nmem_proto::text::one_line(h, 120))
}

fn index_item_of_obs(o: &Observation) -> EntryIndexItem {
    EntryIndexItem {
        id: o.id.to_string(),
        title: title_of(&o.content, o.metadata.as_ref()),
        entry_type: o.obs_type.clone(),
        project: o.project.clone(),
        created_at: format_rfc3339_ms(o.timestamp),
        score: 0.0,
        snippet: None,
    }
}

/// An entry's detail; `of` says what the id names (its kind of [`EntryId`]).
fn detail_of(o: Observation, of: fn(i64) -> EntryId) -> EntryDetailItem {
    let metadata = match &o.metadata {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    let (doc, item) = match of(o.id) {
        EntryId::Doc(_) => (true, false),
        EntryId::Knowledge(_) => (false, true),
        EntryId::Obs(_) => (false, false),
    };
    EntryDetailItem {
        id: match of(o.id) {
            EntryId::Doc(n) => format!("d{n}"),
            EntryId::Knowledge(n) => format!("k{n}"),
            EntryId::Obs(n) => n.to_string(),
        },
        title: doc_heading(&o).unwrap_or_else(|| title_of(&o.content, o.metadata.as_ref())),
        source_ref: metadata
            .get(if doc { "locator" } else { "source_ref" })
            .and_then(Value::as_str)
            .map(str::to_string),
        // A knowledge entry's type is its kind (decision, fact, task, …).
        entry_type: metadata
            .get(if item { "kind" } else { "type" })
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| o.obs_type.clone()),
        body: o.content,
        project: o.project,
        session_id: (!doc && !item).then_some(o.session_id),
        metadata,
        created_at: format_rfc3339_ms(o.timestamp),
    }
}

/// An entry id as v1 sends it: an observation's, a string of digits (a number is taken too), or
/// a document chunk's, `d` and digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntryId {
    Obs(i64),
    Doc(i64),
    Knowledge(i64),
}

fn entry_ref(field: &str, v: &Value) -> Result<EntryId, Box<CallToolResult>> {
    let parsed = match v {
        Value::String(s) => {
            let s = s.trim();
            if let Some(d) = s.strip_prefix('d') {
                d.parse::<i64>().ok().map(EntryId::Doc)
            } else if let Some(k) = s.strip_prefix('k') {
                k.parse::<i64>().ok().map(EntryId::Knowledge)
            } else {
                s.parse::<i64>().ok().map(EntryId::Obs)
            }
        }
        Value::Number(n) => n.as_i64().map(EntryId::Obs),
        _ => None,
    };
    parsed
        .filter(|e| matches!(e, EntryId::Obs(n) | EntryId::Doc(n) | EntryId::Knowledge(n) if *n > 0))
        .ok_or_else(|| {
            Box::new(error(
                Code::InvalidArgument,
                format!(
                    "{field}: {v} is not an entry id (digits, d and digits for a document, k and digits for a knowledge or work item, as `search` returns)"
                ),
                json!({"field": field}),
            ))
        })
}

/// A `timeline` anchor: an observation's entry id, or a document chunk's (`d<id>`: the chunks
/// around it in its source). A knowledge item has no timeline.
fn entry_id(field: &str, v: &Value) -> Result<EntryId, Box<CallToolResult>> {
    match entry_ref(field, v)? {
        e @ (EntryId::Obs(_) | EntryId::Doc(_)) => Ok(e),
        EntryId::Knowledge(_) => Err(Box::new(error(
            Code::InvalidArgument,
            format!("{field}: {v} is a knowledge entry, which has no session timeline: read it with get_entries"),
            json!({"field": field}),
        ))),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveArgs {
    /// What to remember (required).
    #[serde(default)]
    pub text: String,
    pub title: Option<String>,
    /// Default: the project of the server's folder.
    pub project: Option<String>,
    /// An entry type kept with it (the stored type is `memory`).
    #[serde(rename = "type")]
    pub entry_type: Option<String>,
    /// Where it came from (a URL, a commit, a file).
    pub source_ref: Option<String>,
    /// Anything else to keep with it (an object).
    pub metadata: Option<Map<String, Value>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchArgs {
    /// Words, names, paths or error text (required).
    #[serde(default)]
    pub query: String,
    /// Default: the project of the server's folder.
    pub project: Option<String>,
    /// Only this entry type (an observation type: command_error, file_edit, memory, …).
    #[serde(rename = "type")]
    pub entry_type: Option<String>,
    /// Default 20, at most 100.
    pub limit: Option<i64>,
    /// Default 0.
    pub offset: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TimelineArgs {
    /// The entry to center on (required).
    #[serde(default)]
    pub anchor_id: Value,
    /// Entries before it (default 3, at most 20).
    pub depth_before: Option<i64>,
    /// Entries after it (default 3, at most 20).
    pub depth_after: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct GetArgs {
    /// 1 to 200 entry ids.
    #[serde(default)]
    pub ids: Vec<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct IngestArgs {
    /// Default: the project of the server's folder.
    pub project: Option<String>,
    /// Files or folders (relative to the server's folder, or absolute). Default: the folder's
    /// top-level Markdown files and its `docs/`.
    pub sources: Option<Value>,
    /// Checked (a string) but not stored: a document entry's type is `doc`.
    pub entry_type: Option<Value>,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct RetentionArgs {
    /// Evaluate as of this time (ISO 8601; default now).
    pub now: Option<String>,
    /// One age for every entry type, in days (> 0; default: each type's own age).
    pub max_age_days: Option<i64>,
    /// Keep at most this many entries per project (> 0).
    pub max_entries_per_project: Option<i64>,
    pub project: Option<String>,
}

#[derive(Clone)]
pub struct CodexMem {
    cwd: Option<String>,
    tool_router: ToolRouter<Self>,
}

impl Default for CodexMem {
    fn default() -> Self {
        CodexMem::new()
    }
}

#[tool_router]
impl CodexMem {
    pub fn new() -> CodexMem {
        CodexMem {
            cwd: std::env::current_dir()
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Save a memory entry: `text` required; `title`, `project`, `type`, \
        `source_ref`, `metadata` optional. Returns {status: \"saved\", id, created_at}."
    )]
    async fn save_memory(
        &self,
        Parameters(a): Parameters<SaveArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if a.text.trim().is_empty() {
            return Ok(error(
                Code::InvalidArgument,
                "`text` is required: say what to remember",
                json!({"field": "text"}),
            ));
        }
        let mut metadata = a.metadata.unwrap_or_default();
        if let Some(t) = a.entry_type {
            metadata.insert("type".into(), Value::String(t));
        }
        if let Some(s) = a.source_ref {
            metadata.insert("source_ref".into(), Value::String(s));
        }
        let req = SaveRequest {
            text: a.text,
            title: a.title,
            project: a.project.map(Some),
            cwd: self.cwd.clone(),
            metadata: (!metadata.is_empty()).then_some(metadata),
        };
        Ok(match daemon::<_, Saved>(wire::PATH_MEMORIES, req).await {
            Ok(s) => ok(&json!({
                "status": "saved",
                "id": s.id.to_string(),
                "created_at": format_rfc3339_ms(s.created_at.unwrap_or_else(nmem_proto::now_ms)),
            })),
            Err(e) => *e,
        })
    }

    #[tool(
        description = "Compact ranked entries for `query` (required): project (default: this \
        folder's), type, limit (20, max 100), offset. Returns {items, total, limit, offset}; \
        each item {id, title, entry_type, project, created_at, score, snippet}."
    )]
    async fn search(
        &self,
        Parameters(a): Parameters<SearchArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if a.query.trim().is_empty() {
            return Ok(error(
                Code::InvalidArgument,
                "`query` is required",
                json!({"field": "query"}),
            ));
        }
        let limit = a.limit.unwrap_or(20);
        let offset = a.offset.unwrap_or(0);
        if !(1..=100).contains(&limit) {
            return Ok(error(
                Code::InvalidArgument,
                format!("`limit` is {limit}: give 1 to 100"),
                json!({"field": "limit"}),
            ));
        }
        if offset < 0 {
            return Ok(error(
                Code::InvalidArgument,
                format!("`offset` is {offset}: give 0 or more"),
                json!({"field": "offset"}),
            ));
        }
        // One window of up to 100 ranks from `offset`: the page, and how many more there are.
        let req = SearchRequest {
            query: a.query,
            project: a.project.map(Some),
            obs_type: a.entry_type.map(OneOrMany::One),
            limit: Some(100),
            offset: Some(offset),
            include_prompts: Some(false),
            include_docs: Some(true),
            cwd: self.cwd.clone(),
            ..SearchRequest::default()
        };
        Ok(
            match daemon::<_, SearchReply>(wire::PATH_SEARCH, req).await {
                Ok(r) => {
                    let total = offset + r.items.len() as i64;
                    let items: Vec<EntryIndexItem> = r
                        .items
                        .iter()
                        .filter(|h| {
                            matches!(
                                h.kind.as_str(),
                                "observation" | "doc" | "knowledge" | "work"
                            )
                        })
                        .take(limit as usize)
                        .map(index_item_of_hit)
                        .collect();
                    ok(&json!({"items": items, "total": total, "limit": limit, "offset": offset}))
                }
                Err(e) => *e,
            },
        )
    }

    #[tool(
        description = "The entries around one, in time order: `anchor_id` (required), \
        depth_before and depth_after (3 each, max 20). Returns {anchor_id, items}. Around a \
        document entry (`d<id>`): the chunks before and after it in its document."
    )]
    async fn timeline(
        &self,
        Parameters(a): Parameters<TimelineArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let anchor = match entry_id("anchor_id", &a.anchor_id) {
            Ok(id) => id,
            Err(e) => return Ok(*e),
        };
        for (field, v) in [
            ("depth_before", a.depth_before),
            ("depth_after", a.depth_after),
        ] {
            if let Some(d) = v.filter(|d| !(0..=20).contains(d)) {
                return Ok(error(
                    Code::InvalidArgument,
                    format!("`{field}` is {d}: give 0 to 20"),
                    json!({"field": field}),
                ));
            }
        }
        // A document entry's timeline is its neighbouring chunks in its source.
        let (obs_anchor, doc_anchor, prefix) = match anchor {
            EntryId::Doc(n) => (None, Some(n), "d"),
            // (`entry_id` refuses knowledge entries.)
            EntryId::Obs(n) | EntryId::Knowledge(n) => (Some(n), None, ""),
        };
        let req = TimelineRequest {
            anchor: obs_anchor,
            doc_anchor,
            before: Some(a.depth_before.unwrap_or(3)),
            after: Some(a.depth_after.unwrap_or(3)),
            // The anchor's own session, whatever its project.
            project: Some(None),
            ..TimelineRequest::default()
        };
        Ok(
            match daemon::<_, Timeline>(wire::PATH_TIMELINE, req).await {
                Ok(t) => {
                    let items: Vec<EntryIndexItem> = t
                        .before
                        .iter()
                        .chain(std::iter::once(&t.anchor))
                        .chain(t.after.iter())
                        .map(|o| {
                            let mut i = index_item_of_obs(o);
                            i.id = format!("{prefix}{}", i.id);
                            if let Some(h) = doc_heading(o) {
                                // As search titles a chunk: its heading path.
                                i.title = h;
                            }
                            i
                        })
                        .collect();
                    let id = match anchor {
                        EntryId::Doc(n) => format!("d{n}"),
                        EntryId::Obs(n) | EntryId::Knowledge(n) => n.to_string(),
                    };
                    ok(&json!({"anchor_id": id, "items": items}))
                }
                Err(e) => *e,
            },
        )
    }

    #[tool(
        description = "Full entries by id: `ids`, 1 to 200 strings. Returns {items}, in the \
        order asked; ids that do not exist are left out."
    )]
    async fn get_entries(
        &self,
        Parameters(a): Parameters<GetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if a.ids.is_empty() || a.ids.len() > 200 {
            return Ok(error(
                Code::InvalidArgument,
                format!("`ids` has {} ids: give 1 to 200", a.ids.len()),
                json!({"field": "ids"}),
            ));
        }
        let mut ids = Vec::with_capacity(a.ids.len());
        for v in &a.ids {
            match entry_ref("ids", v) {
                Ok(id) => ids.push(id),
                Err(e) => return Ok(*e),
            }
        }
        // Fetched 50 of a kind at a time, then put back in the order asked.
        let mut found: std::collections::HashMap<EntryId, EntryDetailItem> = Default::default();
        let obs: Vec<i64> = ids
            .iter()
            .filter_map(|e| match e {
                EntryId::Obs(n) => Some(*n),
                _ => None,
            })
            .collect();
        let docs: Vec<i64> = ids
            .iter()
            .filter_map(|e| match e {
                EntryId::Doc(n) => Some(*n),
                _ => None,
            })
            .collect();
        let items: Vec<i64> = ids
            .iter()
            .filter_map(|e| match e {
                EntryId::Knowledge(n) => Some(*n),
                _ => None,
            })
            .collect();
        let batches = obs
            .chunks(50)
            .map(|c| (c, EntryId::Obs as fn(i64) -> EntryId))
            .chain(
                docs.chunks(50)
                    .map(|c| (c, EntryId::Doc as fn(i64) -> EntryId)),
            )
            .chain(
                items
                    .chunks(50)
                    .map(|c| (c, EntryId::Knowledge as fn(i64) -> EntryId)),
            );
        for (chunk, of) in batches {
            let mut req = GetRequest::default();
            match of(0) {
                EntryId::Obs(_) => req.ids = chunk.to_vec(),
                EntryId::Doc(_) => req.doc_ids = chunk.to_vec(),
                EntryId::Knowledge(_) => req.knowledge_ids = chunk.to_vec(),
            }
            match daemon::<_, Vec<Observation>>(wire::PATH_OBSERVATIONS, req).await {
                Ok(got) => {
                    for o in got {
                        found.insert(of(o.id), detail_of(o, of));
                    }
                }
                Err(e) => return Ok(*e),
            }
        }
        let items: Vec<&EntryDetailItem> = ids.iter().filter_map(|e| found.get(e)).collect();
        Ok(ok(&json!({ "items": items })))
    }

    #[tool(
        description = "Ingest project documents with source and hash dedupe: project (default: \
        this folder's), sources (paths; default: the folder's top-level Markdown and docs/), \
        entry_type. An unchanged source imports nothing. Returns {processed_sources, \
        imported_entries, duplicate_entries, skipped_sources}; its entries are `d<id>`."
    )]
    async fn ingest_docs(
        &self,
        Parameters(a): Parameters<IngestArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if a.entry_type
            .as_ref()
            .is_some_and(|t| !t.is_string() && !t.is_null())
        {
            return Ok(error(
                Code::InvalidArgument,
                "`entry_type` must be a string",
                json!({"field": "entry_type"}),
            ));
        }
        let Some(base) = self.cwd.clone().map(std::path::PathBuf::from) else {
            return Ok(error(
                Code::StorageFailure,
                "the server has no working folder",
                Value::Null,
            ));
        };
        let sources: Vec<std::path::PathBuf> = match &a.sources {
            None | Some(Value::Null) => {
                // Top-level Markdown, then docs/.
                let mut v: Vec<std::path::PathBuf> = std::fs::read_dir(&base)
                    .map(|d| {
                        d.filter_map(Result::ok)
                            .map(|e| e.path())
                            .filter(|p| {
                                p.is_file()
                                    && p.extension()
                                        .and_then(|e| e.to_str())
                                        .is_some_and(|e| e.eq_ignore_ascii_case("md"))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort();
                if base.join(DEFAULT_DOCS).is_dir() {
                    v.push(base.join(DEFAULT_DOCS));
                }
                v
            }
            Some(Value::Array(list)) if list.len() <= 1000 => {
                let mut v = Vec::new();
                for s in list {
                    match s.as_str().filter(|s| !s.trim().is_empty()) {
                        Some(s) => v.push(base.join(s)),
                        None => {
                            return Ok(error(
                                Code::InvalidArgument,
                                format!("`sources`: {s} is not a path (give strings)"),
                                json!({"field": "sources"}),
                            ))
                        }
                    }
                }
                v
            }
            _ => {
                return Ok(error(
                    Code::InvalidArgument,
                    "`sources` must be a list of at most 1000 paths",
                    json!({"field": "sources"}),
                ))
            }
        };
        let project = a.project;
        let res = tokio::task::spawn_blocking(move || {
            // Each source alone, so one that cannot be read is skipped, not fatal.
            let mut all = crate::docs::Collected::default();
            for p in &sources {
                let o = crate::docs::Options {
                    paths: vec![p.clone()],
                    ..crate::docs::Options::default()
                };
                match crate::docs::collect(&o, &indicatif::ProgressBar::hidden()) {
                    Ok(c) => {
                        all.sources.extend(c.sources);
                        all.skipped.extend(c.skipped);
                    }
                    Err(why) => all.skipped.push(nmem_proto::docs::SourceOutcome {
                        locator: p.to_string_lossy().into_owned(),
                        kind: nmem_proto::docs::SourceKind::File,
                        status: nmem_proto::docs::SourceStatus::Skipped,
                        reason: Some(why),
                        source_id: None,
                        chunks: Default::default(),
                    }),
                }
            }
            let o = crate::docs::Options {
                project,
                cwd: Some(base),
                ..crate::docs::Options::default()
            };
            if all.sources.is_empty() {
                let mut r = nmem_proto::docs::IngestReply {
                    sources: all.skipped,
                    ..Default::default()
                };
                r.total();
                return Ok(r);
            }
            crate::docs::send(&o, all)
        })
        .await;
        let reply = match res {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                return Ok(error(code_of(&e), e.to_string(), Value::Null));
            }
            Err(e) => return Ok(error(Code::StorageFailure, e.to_string(), Value::Null)),
        };
        use nmem_proto::docs::SourceStatus;
        let skipped: Vec<&str> = reply
            .sources
            .iter()
            .filter(|s| s.status == SourceStatus::Skipped)
            .map(|s| s.locator.as_str())
            .collect();
        Ok(ok(&json!({
            "processed_sources": reply.sources.len() - skipped.len(),
            "imported_entries": reply.totals.chunks.added,
            "duplicate_entries": reply.totals.chunks.duplicate,
            "skipped_sources": skipped,
        })))
    }

    #[tool(
        description = "What retention would remove, without deleting: now (ISO time, default \
        now), max_age_days (> 0), max_entries_per_project (> 0), project. Returns {mode: \
        \"dry-run\", executed_at, total_candidates, by_reason, candidate_ids}."
    )]
    async fn retention_dry_run(
        &self,
        Parameters(a): Parameters<RetentionArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        for (field, v) in [
            ("max_age_days", a.max_age_days),
            ("max_entries_per_project", a.max_entries_per_project),
        ] {
            if let Some(n) = v.filter(|n| *n <= 0) {
                return Ok(error(
                    Code::InvalidArgument,
                    format!("`{field}` is {n}: give a number above 0"),
                    json!({"field": field}),
                ));
            }
        }
        let now = match a.now.as_deref() {
            None => None,
            Some(s) => match nmem_proto::time::parse_date(s, false) {
                Ok(ms) => Some(ms),
                Err(e) => {
                    return Ok(error(
                        Code::InvalidArgument,
                        format!("`now`: {e}"),
                        json!({"field": "now"}),
                    ))
                }
            },
        };
        let req = RetentionRequest {
            max_age_days: a.max_age_days,
            max_per_project: a.max_entries_per_project,
            project: a.project,
            now,
            apply: false,
            ..RetentionRequest::default()
        };
        Ok(
            match daemon::<_, DeletionReport>(wire::PATH_RETENTION, req).await {
                Ok(r) => ok(&json!({
                    "mode": "dry-run",
                    "executed_at": format_rfc3339_ms(r.executed_at),
                    "total_candidates": r.total_candidates,
                    "by_reason": r.by_reason,
                    "candidate_ids": r.candidate_ids,
                })),
                Err(e) => *e,
            },
        )
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for CodexMem {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("nmem (codex-mem v1)", nmem_proto::VERSION);
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemon_failures_map_to_v1_codes() {
        let api = |code: &str, message: &str| CallError::Api {
            status: 400,
            code: code.into(),
            message: message.into(),
        };
        assert_eq!(code_of(&api("bad_request", "x")), Code::InvalidArgument);
        assert_eq!(code_of(&api("bad_query", "x")), Code::InvalidArgument);
        assert_eq!(code_of(&api("not_found", "x")), Code::EntryNotFound);
        assert_eq!(code_of(&api("store_failed", "x")), Code::StorageFailure);
        assert_eq!(
            code_of(&CallError::Down("no daemon".into())),
            Code::StorageFailure
        );
        assert_eq!(
            code_of(&CallError::Down("written by a newer nmem".into())),
            Code::MigrationFailure
        );
    }

    #[test]
    fn ids_are_strings_of_digits_or_d_and_digits() {
        assert_eq!(entry_id("ids", &json!("42")).unwrap(), EntryId::Obs(42));
        assert_eq!(entry_id("ids", &json!(42)).unwrap(), EntryId::Obs(42));
        assert_eq!(entry_ref("ids", &json!("d7")).unwrap(), EntryId::Doc(7));
        // A timeline anchors on a document chunk, not on a knowledge item.
        assert_eq!(
            entry_id("anchor_id", &json!("d7")).unwrap(),
            EntryId::Doc(7)
        );
        assert!(entry_id("anchor_id", &json!("k7")).is_err());
        for bad in [
            json!("p4"),
            json!(""),
            json!(-1),
            json!(null),
            json!([1]),
            json!("d"),
            json!("d-3"),
        ] {
            assert!(entry_ref("ids", &bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_detail_keeps_what_save_memory_was_given() {
        let o = Observation {
            id: 7,
            timestamp: 1_780_000_000_000,
            session_id: "memory-acme".into(),
            project: "acme".into(),
            obs_type: "memory".into(),
            content: "Retry policy\nbackoff, max 5".into(),
            metadata: Some(
                json!({"title": "Retry policy", "type": "decision", "source_ref": "PR #12"}),
            ),
            ..Observation::default()
        };
        let d = detail_of(o, EntryId::Obs);
        assert_eq!(
            (d.id.as_str(), d.title.as_str(), d.entry_type.as_str()),
            ("7", "Retry policy", "decision")
        );
        assert_eq!(d.source_ref.as_deref(), Some("PR #12"));
        assert_eq!(d.created_at, format_rfc3339_ms(1_780_000_000_000));
    }
}
