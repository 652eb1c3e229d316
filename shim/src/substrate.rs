//! `nmem serve --profile substrate`: memory-substrate's four MCP tools (`memory_ingest`,
//! `memory_query`, `memory_remember`, `memory_maintain`), its resources (`memory://policy`,
//! `memory://agent-playbook`, `memory://mcp-api-summary`) and prompts (`memory_task_start`,
//! `memory_review`), as a thin face over the daemon's routes: documents (`/v1/docs/ingest`, read
//! by the same client code as `nmem ingest`), governed knowledge and work items
//! (`/v1/knowledge*`), search, timeline, observations, memories and maintenance.
//!
//! Every call is `{args: {mode, input_data, options}}`, validated strictly before anything is
//! sent: `args`, `mode` and `input_data` are required, and a field the mode does not know (in
//! `args`, `input_data` or `options`, `root` included) fails with "Extra inputs are not
//! permitted", so a typo never silently changes a write. A refused call changes nothing. Errors
//! are tool errors whose text starts with the kind of failure, as memory-substrate's Python
//! exceptions do: `ValidationError` (the envelope or a field), `ValueError` (an unsupported mode,
//! a value the rules refuse, a mutating `memory_maintain` mode without `options.apply=true`),
//! `KeyError` (an id that names nothing; the id is in the message), `StorageError` (the daemon is
//! down or failed).
//!
//! Ids carry their type: `know:<n>` (knowledge), `work:<n>` (work item), `obs:<n>` (an
//! observation, the evidence form knowledge already uses), `doc:<n>` (a document chunk) and
//! `src:<n>` (a document source). Where memory-substrate has machinery nmem does not (a graph
//! database, semantic backends to configure, LLM-free concept mining), the face says so in its
//! reply instead of pretending; README "MCP profiles" lists each choice.

use crate::daemon_client::{post, CallError};
use nmem_proto::docs::{IngestReply, SourceStatus};
use nmem_proto::knowledge::{
    Action, Class, EvidenceRef, Item, LifecycleReply, LifecycleRequest, ListReply, ListRequest,
    MemorySource, Payload, RememberRequest, Remembered, Status,
};
use nmem_proto::query::{
    GetRequest, Observation, RecentRequest, SaveRequest, Saved, SearchHit, SearchReply,
    SearchRequest, Timeline, TimelineRequest,
};
use nmem_proto::time::format_rfc3339_ms;
use nmem_proto::wire;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, ErrorData, GetPromptRequestParams, GetPromptResponse,
    GetPromptResult, Implementation, ListPromptsResult, ListResourcesResult,
    PaginatedRequestParams, Prompt, PromptArgument, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, Role, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{tool, tool_handler, tool_router, RoleServer, ServerHandler};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

const INSTRUCTIONS: &str = "memory-substrate's four tools, served by nmem. Query before work \
(`memory_query` mode context or search; retry with other words when results are weak), capture \
evidence with `memory_ingest`, write durable knowledge, activity and work items with \
`memory_remember` (reason, memory_source and scope_refs required), review with `memory_maintain` \
mode report. Every call is {args: {mode, input_data, options}}; unexpected fields fail. Read \
memory://agent-playbook for the workflow.";

/// The modes of each tool.
pub const INGEST_MODES: &[&str] = &["repo", "file", "markdown", "web", "pdf", "conversation"];
pub const QUERY_MODES: &[&str] = &["context", "expand", "page", "recent", "search", "graph"];
pub const REMEMBER_MODES: &[&str] = &[
    "activity",
    "knowledge",
    "work_item",
    "promote",
    "supersede",
    "contest",
    "batch",
];
pub const MAINTAIN_MODES: &[&str] = &[
    "report",
    "structure",
    "audit",
    "reindex",
    "repair",
    "promote_candidates",
    "merge_duplicates",
    "decay_stale",
    "cycle",
];
/// memory-substrate modes nmem has no machinery for, with what to do instead.
const MAINTAIN_UNSUPPORTED: &[(&str, &str)] = &[
    ("configure", "nmem has no graph or semantic backends to choose: its embedding model is set in config.toml (`nmemctl model`)"),
    ("resolve_duplicates", "resolve a possible duplicate with memory_remember mode supersede or contest"),
    ("archive_source", "re-ingest the source (changed chunks are replaced, evidence citing them is flagged stale) or purge its project"),
];

/// The longest query used as is; a longer one is reduced ([`sanitize`]).
const MAX_QUERY: usize = 500;

/// A failure, as a tool error whose text starts with its kind.
#[derive(Debug)]
pub struct Failure {
    kind: &'static str,
    message: String,
}

type Res<T> = Result<T, Failure>;

fn fail<T>(kind: &'static str, message: impl Into<String>) -> Res<T> {
    Err(Failure {
        kind,
        message: message.into(),
    })
}

fn invalid<T>(message: impl Into<String>) -> Res<T> {
    fail("ValidationError", message)
}

fn value_error<T>(message: impl Into<String>) -> Res<T> {
    fail("ValueError", message)
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Failure {
        let kind = match &e {
            CallError::Api { code, .. } => match code.as_str() {
                wire::code::NOT_FOUND => "KeyError",
                wire::code::BAD_REQUEST
                | wire::code::BAD_QUERY
                | wire::code::INVALID_PAYLOAD
                | wire::code::CONFLICT => "ValueError",
                _ => "StorageError",
            },
            _ => "StorageError",
        };
        Failure {
            kind,
            message: e.to_string(),
        }
    }
}

fn result(r: Res<Value>) -> Result<CallToolResult, ErrorData> {
    Ok(match r {
        Ok(v) => CallToolResult::success(vec![Content::text(v.to_string())]),
        Err(f) => CallToolResult::error(vec![Content::text(format!("{}: {}", f.kind, f.message))]),
    })
}

/// One daemon call off the async threads.
async fn daemon<B: Serialize + Send + 'static, R: DeserializeOwned + Send + 'static>(
    path: &'static str,
    body: B,
) -> Res<R> {
    tokio::task::spawn_blocking(move || post::<B, R>(path, &body))
        .await
        .map_err(|e| Failure {
            kind: "StorageError",
            message: e.to_string(),
        })?
        .map_err(Failure::from)
}

/// The envelope, as the tools' schema shows it (the call is validated by hand, to fail with a
/// clear message on any field it does not expect).
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
#[allow(dead_code)]
pub struct Envelope {
    /// The operation (see the tool's description for its modes).
    mode: String,
    /// The mode's input (required, `{}` when empty).
    input_data: Map<String, Value>,
    /// The mode's options.
    #[serde(default)]
    options: Option<Map<String, Value>>,
}

/// A tool call: `{args: {mode, input_data, options}}`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Call {
    /// `{mode, input_data, options}` (required; absent, the call fails with a clear message
    /// rather than a protocol error).
    #[schemars(with = "Envelope")]
    pub args: Option<Value>,
    #[serde(flatten)]
    #[schemars(skip)]
    pub extra: Map<String, Value>,
}

/// A validated envelope.
#[derive(Debug, Clone)]
pub struct Env {
    pub mode: String,
    pub input: Map<String, Value>,
    pub options: Map<String, Value>,
}

fn extra(place: &str, key: &str) -> Failure {
    Failure {
        kind: "ValidationError",
        message: format!("{place}.{key}: Extra inputs are not permitted"),
    }
}

/// Check the envelope of a call to `tool` (whose modes are `modes`).
pub fn envelope(tool: &str, call: Call, modes: &[&str]) -> Res<Env> {
    if let Some(k) = call.extra.keys().next() {
        let why = if k == "root" {
            " (the memory root is the daemon's NMEM_HOME, never a tool argument)"
        } else {
            ""
        };
        return invalid(format!(
            "{k}: Extra inputs are not permitted{why}: a call is {{\"args\": {{\"mode\", \"input_data\", \"options\"}}}}"
        ));
    }
    let Some(args) = call.args else {
        return invalid(format!(
            "args: Field required: call {tool} as {{\"args\": {{\"mode\": ..., \"input_data\": {{}}, \"options\": {{}}}}}}"
        ));
    };
    let Value::Object(mut args) = args else {
        return invalid("args: must be an object {mode, input_data, options}");
    };
    for k in args.keys() {
        if !matches!(k.as_str(), "mode" | "input_data" | "options") {
            let mut f = extra("args", k);
            if k == "root" {
                f.message.push_str(
                    " (the memory root is the daemon's NMEM_HOME, never a tool argument)",
                );
            }
            return Err(f);
        }
    }
    let mode = match args.remove("mode") {
        Some(Value::String(m)) => m,
        Some(_) => return invalid("args.mode: must be a string"),
        None => {
            return invalid(format!(
                "args.mode: Field required: one of {}",
                modes.join(", ")
            ))
        }
    };
    if !modes.contains(&mode.as_str()) {
        let hint = MAINTAIN_UNSUPPORTED
            .iter()
            .find(|(m, _)| *m == mode && tool == "memory_maintain")
            .map(|(_, h)| format!(" (nmem does not implement it: {h})"))
            .unwrap_or_default();
        return value_error(format!(
            "unsupported {tool} mode {mode:?}{hint}; supported modes: {}",
            modes.join(", ")
        ));
    }
    let input = match args.remove("input_data") {
        Some(Value::Object(m)) => m,
        Some(_) => return invalid("args.input_data: must be an object"),
        None => return invalid("args.input_data: Field required (pass {} when empty)"),
    };
    let options = match args.remove("options") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m,
        Some(_) => return invalid("args.options: must be an object"),
    };
    Ok(Env {
        mode,
        input,
        options,
    })
}

/// Refuse any key of `m` (at `place`) not in `allowed`.
fn only(place: &str, m: &Map<String, Value>, allowed: &[&str]) -> Res<()> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => {
            let mut f = extra(place, k);
            f.message
                .push_str(&format!(" (allowed: {})", allowed.join(", ")));
            Err(f)
        }
        None => Ok(()),
    }
}

fn string(m: &Map<String, Value>, place: &str, key: &str) -> Res<Option<String>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => invalid(format!("{place}.{key}: must be a string")),
    }
}

fn required(m: &Map<String, Value>, place: &str, key: &str) -> Res<String> {
    match string(m, place, key)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        _ => invalid(format!("{place}.{key}: Field required")),
    }
}

fn boolean(m: &Map<String, Value>, place: &str, key: &str) -> Res<bool> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => invalid(format!("{place}.{key}: must be true or false")),
    }
}

fn strings(m: &Map<String, Value>, place: &str, key: &str) -> Res<Vec<String>> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(vec![s.clone()]),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                _ => invalid(format!("{place}.{key}: must be a list of strings")),
            })
            .collect(),
        Some(_) => invalid(format!("{place}.{key}: must be a list of strings")),
    }
}

/// `options.max_items`: `default`, 1 to `max`.
fn max_items(o: &Map<String, Value>, default: i64, max: i64) -> Res<i64> {
    match o.get("max_items") {
        None | Some(Value::Null) => Ok(default),
        Some(v) => match v.as_i64() {
            Some(n) if (1..=max).contains(&n) => Ok(n),
            _ => invalid(format!("options.max_items: {v} is not 1 to {max}")),
        },
    }
}

/// An object id: `know:<n>` / `work:<n>` (the knowledge table), `obs:<n>`, `doc:<n>`, `src:<n>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ref {
    Knowledge(i64),
    Obs(i64),
    Doc(i64),
    Src(i64),
}

pub fn parse_ref(s: &str) -> Result<Ref, String> {
    let (prefix, n) = s.split_once(':').ok_or_else(|| {
        format!("{s:?} is not an id: ids are know:<n>, work:<n>, obs:<n>, doc:<n> or src:<n>")
    })?;
    let n: i64 = n
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{s:?}: {prefix}: must be followed by a positive number"))?;
    Ok(match prefix {
        "know" | "work" => Ref::Knowledge(n),
        "obs" => Ref::Obs(n),
        "doc" => Ref::Doc(n),
        "src" => Ref::Src(n),
        _ => {
            return Err(format!(
                "{s:?}: unknown id type {prefix:?}: ids are know:<n>, work:<n>, obs:<n>, doc:<n> or src:<n>"
            ))
        }
    })
}

fn id_of(m: &Map<String, Value>, place: &str, key: &str) -> Res<Ref> {
    let s = required(m, place, key)?;
    parse_ref(s.trim()).or_else(|e| invalid(format!("{place}.{key}: {e}")))
}

fn knowledge_id(m: &Map<String, Value>, place: &str, key: &str) -> Res<i64> {
    match id_of(m, place, key)? {
        Ref::Knowledge(n) => Ok(n),
        _ => invalid(format!(
            "{place}.{key}: give a knowledge or work item id (know:<n> or work:<n>)"
        )),
    }
}

fn object_id(i: &Item) -> String {
    match i.class {
        Class::Knowledge => format!("know:{}", i.id),
        Class::WorkItem => format!("work:{}", i.id),
    }
}

/// A knowledge or work item, as memory-substrate shows one.
pub fn item_json(i: &Item) -> Value {
    json!({
        "object_id": object_id(i),
        "object_type": i.class.as_str(),
        "kind": i.kind,
        "title": i.title,
        "summary": i.summary,
        "reason": i.reason,
        "memory_source": i.memory_source,
        "scope_refs": [i.scope],
        "status": i.status,
        "confidence": i.confidence,
        "payload": i.payload.clone().unwrap_or_else(|| json!({})),
        "evidence_refs": i.evidence,
        "possibly_stale": i.possibly_stale,
        "stale_because": i.stale_obs_id.map(|o| format!("obs:{o}")),
        "superseded_by": i.superseded_by.map(|n| format!("know:{n}")),
        "observation_ref": i.obs_id.map(|o| format!("obs:{o}")),
        "is_pinned": i.is_pinned,
        "project": i.project,
        "created_at": format_rfc3339_ms(i.created_at),
        "updated_at": format_rfc3339_ms(i.updated_at),
    })
}

fn obs_json(o: &Observation, snippet_chars: usize) -> Value {
    let title = o
        .metadata
        .as_ref()
        .and_then(|m| m.get("title"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| nmem_proto::text::one_line(o.content.lines().next().unwrap_or(""), 120));
    json!({
        "object_id": format!("obs:{}", o.id),
        "object_type": "observation",
        "kind": o.obs_type,
        "title": title,
        "summary": nmem_proto::text::one_line(&o.content, snippet_chars),
        "session_id": o.session_id,
        "file_path": o.file_path,
        "project": o.project,
        "created_at": format_rfc3339_ms(o.timestamp),
    })
}

fn hit_json(h: &SearchHit, rank: usize) -> Value {
    let (object_id, object_type, locator) = match (&h.doc, h.kind.as_str()) {
        (Some(d), _) => (
            format!("doc:{}", h.id),
            "source",
            json!({"source_id": format!("src:{}", d.source_id), "segment_id": h.id.to_string(),
                   "path": d.locator, "heading_path": d.heading,
                   "line_start": d.line_start, "line_end": d.line_end}),
        ),
        _ => (
            format!("obs:{}", h.id),
            "observation",
            json!({"file_path": h.file_path, "session_id": h.session_id}),
        ),
    };
    json!({
        "object_id": object_id,
        "object_type": object_type,
        "kind": h.obs_type.clone().unwrap_or_else(|| h.kind.clone()),
        "title": nmem_proto::text::one_line(h.content_preview.lines().next().unwrap_or(""), 120),
        "summary": h.content_preview,
        "project": h.project,
        "created_at": format_rfc3339_ms(h.timestamp),
        "locator": locator,
        "retrieval_sources": h.retrieval_sources,
        "retrieval_ranks": {"nmem": rank + 1},
        "rank_score": h.score,
    })
}

/// How a long query was reduced, memory-substrate's `query_sanitizer`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sanitized {
    pub query: String,
    pub was_sanitized: bool,
    pub method: &'static str,
    pub original_length: usize,
    pub clean_length: usize,
}

/// A query as asked, or, when longer than [`MAX_QUERY`] characters (an agent passed a whole
/// prompt), the line labelled `query:`/`question:`/`task:`, else the last question, else the
/// tail.
pub fn sanitize(q: &str) -> Sanitized {
    let original_length = q.chars().count();
    let done = |query: String, method: &'static str| Sanitized {
        clean_length: query.chars().count(),
        query,
        was_sanitized: method != "passthrough",
        method,
        original_length,
    };
    let q = q.trim();
    if q.chars().count() <= MAX_QUERY {
        return done(q.to_string(), "passthrough");
    }
    let cut = |s: &str| s.chars().take(MAX_QUERY).collect::<String>();
    for line in q.lines().rev() {
        let l = line.trim();
        let lower = l.to_lowercase();
        for label in ["query:", "question:", "task:"] {
            if let Some(rest) = lower.strip_prefix(label) {
                let rest = &l[l.len() - rest.len()..];
                if !rest.trim().is_empty() {
                    return done(cut(rest.trim()), "labeled_line");
                }
            }
        }
    }
    if let Some(end) = q.rfind('?') {
        let start = q[..end]
            .rfind(['.', '!', '?', '\n'])
            .map(|i| i + 1)
            .unwrap_or(0);
        let s = q[start..=end].trim();
        if !s.is_empty() && s.chars().count() <= MAX_QUERY {
            return done(s.to_string(), "question_sentence");
        }
    }
    let n = q.chars().count();
    done(q.chars().skip(n - MAX_QUERY).collect(), "tail_truncation")
}

/// Lower-cased words of two or more characters, in order, without repeats.
pub fn terms(q: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in q
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_lowercase)
        .filter(|w| w.chars().count() >= 2)
    {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Words that mean work items (memory-substrate's domain expansion).
const WORK_TERMS: &[&str] = &[
    "todo",
    "todos",
    "task",
    "tasks",
    "work_item",
    "待办项",
    "bug",
];

/// Query filters (`options.filters`), memory-substrate's names.
#[derive(Debug, Default, Clone)]
struct Filters {
    object_types: Vec<String>,
    kinds: Vec<String>,
    statuses: Vec<String>,
    source_ids: Vec<String>,
    node_ids: Vec<String>,
}

impl Filters {
    fn parse(o: &Map<String, Value>) -> Res<Filters> {
        let f = match o.get("filters") {
            None | Some(Value::Null) => return Ok(Filters::default()),
            Some(Value::Object(f)) => f,
            Some(_) => return invalid("options.filters: must be an object"),
        };
        only(
            "options.filters",
            f,
            &[
                "object_type",
                "object_types",
                "kind",
                "kinds",
                "status",
                "statuses",
                "node_id",
                "node_ids",
                "source_id",
                "source_ids",
            ],
        )?;
        let both = |a: &str, b: &str| -> Res<Vec<String>> {
            let mut v = strings(f, "options.filters", a)?;
            v.extend(strings(f, "options.filters", b)?);
            Ok(v)
        };
        let object_types = both("object_type", "object_types")?
            .into_iter()
            .map(|t| {
                if t == "activity" {
                    "observation".into()
                } else {
                    t
                }
            })
            .collect::<Vec<String>>();
        for t in &object_types {
            if !["knowledge", "work_item", "observation", "source"].contains(&t.as_str()) {
                return value_error(format!(
                    "options.filters.object_type: {t:?} is not an object type: knowledge, work_item, activity (observations) or source"
                ));
            }
        }
        Ok(Filters {
            object_types,
            kinds: both("kind", "kinds")?,
            statuses: both("status", "statuses")?,
            source_ids: both("source_id", "source_ids")?,
            node_ids: both("node_id", "node_ids")?,
        })
    }

    fn wants(&self, t: &str) -> bool {
        self.object_types.is_empty() || self.object_types.iter().any(|o| o == t)
    }

    fn keeps_item(&self, i: &Item) -> bool {
        self.wants(i.class.as_str())
            && (self.kinds.is_empty() || self.kinds.contains(&i.kind))
            && (self.statuses.is_empty() || self.statuses.iter().any(|s| s == i.status.as_str()))
            && (self.source_ids.is_empty()
                || i.evidence.iter().any(|e| {
                    self.source_ids.contains(&e.source_id)
                        || e.segment_id
                            .as_ref()
                            .is_some_and(|s| self.source_ids.contains(&format!("doc:{s}")))
                }))
    }

    fn json(&self) -> Value {
        json!({"object_types": self.object_types, "kinds": self.kinds, "statuses": self.statuses,
               "source_ids": self.source_ids, "node_ids": self.node_ids})
    }
}

#[derive(Clone)]
pub struct Substrate {
    cwd: Option<String>,
    tool_router: ToolRouter<Self>,
}

impl Default for Substrate {
    fn default() -> Self {
        Substrate::new()
    }
}

impl Substrate {
    /// Knowledge and work items of this folder's project (and global ones), newest first.
    async fn items(&self, class: Option<Class>, audit: bool) -> Res<ListReply> {
        daemon(
            wire::PATH_KNOWLEDGE_LIST,
            ListRequest {
                cwd: self.cwd.clone(),
                class,
                audit,
                limit: Some(500),
                ..ListRequest::default()
            },
        )
        .await
    }

    async fn item(&self, id: i64, audit: bool) -> Res<(Item, ListReply)> {
        let r: ListReply = daemon(
            wire::PATH_KNOWLEDGE_LIST,
            ListRequest {
                ids: vec![id],
                audit,
                ..ListRequest::default()
            },
        )
        .await?;
        match r.items.first() {
            Some(i) => Ok((i.clone(), r)),
            None => fail(
                "KeyError",
                format!("know:{id}: no knowledge or work item has this id"),
            ),
        }
    }

    async fn observations(&self, ids: Vec<i64>, doc_ids: Vec<i64>) -> Res<Vec<Observation>> {
        daemon(
            wire::PATH_OBSERVATIONS,
            GetRequest {
                ids,
                doc_ids,
                ..GetRequest::default()
            },
        )
        .await
    }

    // ---- memory_ingest ----

    async fn ingest(&self, e: Env) -> Res<Value> {
        let place = "input_data";
        // Documents belong to the project of the server's folder, where search looks.
        let mut o = crate::docs::Options {
            cwd: self.cwd.clone().map(Into::into),
            ..crate::docs::Options::default()
        };
        let (mut include, mut exclude) = (Vec::new(), Vec::new());
        match e.mode.as_str() {
            "repo" => {
                only(
                    place,
                    &e.input,
                    &["path", "include_patterns", "exclude_patterns"],
                )?;
                only("options", &e.options, &["force"])?;
                include = strings(&e.input, place, "include_patterns")?;
                exclude = strings(&e.input, place, "exclude_patterns")?;
                o.force = boolean(&e.options, "options", "force")?;
                o.paths.push(absolute(&required(&e.input, place, "path")?)?);
                if !o.paths[0].is_dir() {
                    return value_error(format!(
                        "input_data.path: {} is not a folder: use mode file, markdown or pdf for a file",
                        o.paths[0].display()
                    ));
                }
            }
            "file" | "markdown" | "pdf" => {
                only(place, &e.input, &["path"])?;
                only("options", &e.options, &[])?;
                let p = absolute(&required(&e.input, place, "path")?)?;
                if p.is_dir() {
                    return value_error(format!(
                        "input_data.path: {} is a folder: use mode repo",
                        p.display()
                    ));
                }
                o.paths.push(p);
            }
            "web" => {
                only(place, &e.input, &["url"])?;
                only("options", &e.options, &[])?;
                o.urls.push(required(&e.input, place, "url")?);
            }
            "conversation" => {
                only(place, &e.input, &["title", "messages", "origin", "id"])?;
                only("options", &e.options, &[])?;
                if !matches!(e.input.get("messages"), Some(Value::Array(_))) {
                    return invalid(
                        "input_data.messages: Field required (a list of {role, content})",
                    );
                }
                if let Some(Value::Object(origin)) = e.input.get("origin") {
                    o.project = string(origin, "input_data.origin", "project")?;
                }
            }
            _ => unreachable!("modes are checked by the envelope"),
        }
        let mode = e.mode.clone();
        let input = e.input.clone();
        let pdf_or_md = mode.clone();
        let (reply, excluded_by_me) = tokio::task::spawn_blocking(move || -> Res<_> {
            let mut c = if mode == "conversation" {
                let bytes = serde_json::to_vec(&input).unwrap_or_default();
                if bytes.len() as u64 > crate::docs::MAX_FILE {
                    return invalid(format!(
                        "input_data: the conversation is over {} KiB",
                        crate::docs::MAX_FILE >> 10
                    ));
                }
                let mut c = crate::docs::Collected::default();
                c.sources.push(
                    crate::docs::conversation_of(&Value::Object(input), None)
                        .or_else(|e| invalid(format!("input_data: {e}")))?,
                );
                c
            } else {
                crate::docs::collect(&o, &indicatif::ProgressBar::hidden())
                    .or_else(value_error)?
            };
            if pdf_or_md == "markdown" {
                for s in &mut c.sources {
                    s.markdown = true;
                }
            }
            if pdf_or_md == "pdf" && c.sources.iter().any(|s| s.kind != nmem_proto::docs::SourceKind::Pdf) {
                return value_error("input_data.path: not a PDF (its name does not end in .pdf): use mode file or markdown");
            }
            // Patterns: relative paths, their components, or globs.
            let mut excluded_by_me = Vec::new();
            if let Some(root) = o.paths.first().filter(|_| mode == "repo") {
                let matches = |pats: &[String], rel: &str| pats.iter().any(|p| pattern_matches(p, rel));
                c.sources.retain(|s| {
                    let rel = std::path::Path::new(&s.locator)
                        .strip_prefix(root)
                        .map(|r| r.to_string_lossy().into_owned())
                        .unwrap_or_else(|_| s.locator.clone());
                    (include.is_empty() || matches(&include, &rel)) && !matches(&exclude, &rel)
                });
                // Agent state the caller excluded is no pending decision.
                c.skipped.retain(|s| {
                    let rel = std::path::Path::new(&s.locator)
                        .strip_prefix(root)
                        .map(|r| r.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let mine = matches(&exclude, &rel);
                    if mine {
                        excluded_by_me.push(rel);
                    }
                    !mine
                });
                c.warnings.retain(|w| !excluded_by_me.iter().any(|x| w.contains(&format!("/{x} "))));
            }
            if c.sources.is_empty() {
                return Ok((
                    IngestReply {
                        sources: c.skipped,
                        warnings: c.warnings,
                        ..IngestReply::default()
                    },
                    excluded_by_me,
                ));
            }
            let reply = crate::docs::send(&o, c).map_err(Failure::from)?;
            Ok((reply, excluded_by_me))
        })
        .await
        .map_err(|e| Failure {
            kind: "StorageError",
            message: e.to_string(),
        })??;
        Ok(ingest_result(
            &e.mode,
            &reply,
            &excluded_by_me,
            e.options.get("force").is_some(),
        ))
    }

    // ---- memory_query ----

    /// `search` (and `context`'s matches): one daemon search over observations, knowledge and
    /// work items and documents, ranked there (knowledge merged with the observations by score,
    /// documents after), filtered here by what the daemon's request cannot say (source ids, an
    /// object type of two classes).
    async fn search_all(
        &self,
        query: &str,
        filters: &Filters,
        limit: i64,
    ) -> Res<(Vec<Value>, Value)> {
        let ts = terms(query);
        let mut inferred = Vec::new();
        let wants_items = filters.wants("knowledge") || filters.wants("work_item");
        let wants_obs = filters.wants("observation");
        let wants_docs = filters.wants("source");
        let mut items: Vec<Value> = Vec::new();
        let mut semantic = Value::Null;
        if !query.trim().is_empty() {
            let obs_type = if !filters.kinds.is_empty() {
                Some(filters.kinds.clone())
            } else if wants_obs {
                None
            } else {
                let mut t = Vec::new();
                for (class, name) in [("knowledge", "knowledge"), ("work_item", "work")] {
                    if filters.wants(class) {
                        t.push(name.to_string());
                    }
                }
                if wants_docs {
                    t.push("doc".into());
                }
                Some(t)
            };
            let mut asks = vec![(query.to_string(), obs_type)];
            // "todo", "task", "bug" in a query mean work items: they are searched for the
            // other words too, or, when the query has no other word, listed (open ones, newest
            // first), ahead of what the words find.
            if filters.wants("work_item") && ts.iter().any(|t| WORK_TERMS.contains(&t.as_str())) {
                inferred.push("object_type:work_item");
                let rest: Vec<&str> = ts
                    .iter()
                    .filter(|t| !WORK_TERMS.contains(&t.as_str()))
                    .map(String::as_str)
                    .collect();
                if rest.is_empty() {
                    for i in self.items(Some(Class::WorkItem), false).await?.items {
                        let open = filters.statuses.is_empty() && i.status == Status::Open;
                        if (open || !filters.statuses.is_empty()) && filters.keeps_item(&i) {
                            let mut v = item_json(&i);
                            v["retrieval_sources"] = json!(["listed"]);
                            items.push(v);
                        }
                    }
                } else {
                    asks.insert(0, (rest.join(" "), Some(vec!["work".to_string()])));
                }
            }
            let mut seen = std::collections::HashSet::new();
            let mut hits: Vec<SearchHit> = Vec::new();
            for (q, types) in asks {
                let req = SearchRequest {
                    query: q,
                    cwd: self.cwd.clone(),
                    limit: Some(limit.min(100)),
                    include_prompts: Some(false),
                    include_docs: Some(wants_docs),
                    include_knowledge: Some(wants_items),
                    knowledge_status: (!filters.statuses.is_empty())
                        .then(|| nmem_proto::query::OneOrMany::Many(filters.statuses.clone())),
                    obs_type: types.map(nmem_proto::query::OneOrMany::Many),
                    ..SearchRequest::default()
                };
                let r: SearchReply = daemon(wire::PATH_SEARCH, req).await?;
                semantic = json!(r.mode);
                for h in r.items {
                    if seen.insert((h.kind.clone(), h.id)) {
                        hits.push(h);
                    }
                }
            }
            // Knowledge hits are shown whole: their items, read in one call.
            let ids: Vec<i64> = hits
                .iter()
                .filter(|h| h.knowledge.is_some())
                .map(|h| h.id)
                .collect();
            let known: std::collections::HashMap<i64, Item> = if ids.is_empty() {
                Default::default()
            } else {
                let r: ListReply = daemon(
                    wire::PATH_KNOWLEDGE_LIST,
                    ListRequest {
                        ids,
                        ..ListRequest::default()
                    },
                )
                .await?;
                r.items.into_iter().map(|i| (i.id, i)).collect()
            };
            for (rank, h) in hits.iter().enumerate() {
                if h.knowledge.is_some() {
                    let Some(i) = known.get(&h.id).filter(|i| filters.keeps_item(i)) else {
                        continue;
                    };
                    if items.iter().any(|v| v["object_id"] == json!(object_id(i))) {
                        continue;
                    }
                    let mut v = item_json(i);
                    v["rank_score"] = json!(h.score);
                    v["retrieval_sources"] = json!(h.retrieval_sources);
                    v["retrieval_ranks"] = json!({"nmem": rank + 1});
                    items.push(v);
                    continue;
                }
                if (h.doc.is_some() && !wants_docs) || (h.doc.is_none() && !wants_obs) {
                    continue;
                }
                if !filters.source_ids.is_empty() {
                    let src = h.doc.as_ref().map(|d| format!("src:{}", d.source_id));
                    if !src.is_some_and(|s| filters.source_ids.contains(&s)) {
                        continue;
                    }
                }
                items.push(hit_json(h, rank));
            }
        }
        items.truncate(limit as usize);
        let diag = json!({
            "normalized_terms": ts,
            "applied_filters": filters.json(),
            "inferred_filters": inferred,
            "semantic_backend": semantic,
        });
        Ok((items, diag))
    }

    async fn query(&self, e: Env) -> Res<Value> {
        let place = "input_data";
        match e.mode.as_str() {
            "search" => {
                only(place, &e.input, &["query"])?;
                only("options", &e.options, &["max_items", "filters"])?;
                let q = required(&e.input, place, "query")?;
                let s = sanitize(&q);
                let filters = Filters::parse(&e.options)?;
                let limit = max_items(&e.options, 20, 100)?;
                let (items, mut diag) = self.search_all(&s.query, &filters, limit).await?;
                let retry: Vec<&str> = if items.is_empty() {
                    vec![
                        "use fewer or other words",
                        "drop filters",
                        "try the file or function name",
                    ]
                } else {
                    vec![]
                };
                diag["suggested_retry_terms"] = json!(retry);
                diag["query_sanitizer"] = json!(s);
                let mut v = json!({"result_type": "query_result", "mode": "search", "query": s.query,
                                   "count": items.len(), "items": items});
                merge(&mut v, diag);
                Ok(v)
            }
            "context" => {
                only(place, &e.input, &["task", "scope", "query"])?;
                only("options", &e.options, &["max_items", "filters"])?;
                let task = string(&e.input, place, "task")?
                    .or(string(&e.input, place, "query")?)
                    .unwrap_or_default();
                let mut filters = Filters::parse(&e.options)?;
                if let Some(scope) = e.input.get("scope") {
                    let Value::Object(scope) = scope else {
                        return invalid("input_data.scope: must be an object");
                    };
                    only("input_data.scope", scope, &["object_types", "object_type"])?;
                    let mut t = strings(scope, "input_data.scope", "object_types")?;
                    t.extend(strings(scope, "input_data.scope", "object_type")?);
                    filters.object_types.extend(t.into_iter().map(|t| {
                        if t == "activity" {
                            "observation".into()
                        } else {
                            t
                        }
                    }));
                }
                let limit = max_items(&e.options, 12, 100)?;
                let s = sanitize(&task);
                let (mut items, mut diag) = if s.query.trim().is_empty() {
                    (Vec::new(), json!({}))
                } else {
                    self.search_all(&s.query, &filters, limit).await?
                };
                // Active decisions and procedures, and open work, belong in any context.
                let list = self.items(None, false).await?;
                let mut ids = |pred: &dyn Fn(&Item) -> bool| -> Vec<String> {
                    let mut out = Vec::new();
                    for i in list
                        .items
                        .iter()
                        .filter(|i| pred(i) && filters.keeps_item(i))
                    {
                        let id = object_id(i);
                        if !items.iter().any(|v| v["object_id"] == json!(id))
                            && items.len() < limit as usize
                        {
                            items.push(item_json(i));
                        }
                        if items.iter().any(|v| v["object_id"] == json!(id)) {
                            out.push(id);
                        }
                    }
                    out
                };
                let decisions = ids(&|i| i.kind == "decision" && i.status == Status::Active);
                let procedures = ids(&|i| i.kind == "procedure" && i.status == Status::Active);
                let open_work = ids(&|i| i.status == Status::Open);
                let evidence: Vec<String> = items
                    .iter()
                    .filter(|v| v["object_type"] == "observation" || v["object_type"] == "source")
                    .filter_map(|v| v["object_id"].as_str().map(str::to_string))
                    .collect();
                let tier = |field: &str, ids: &[String]| json!({"field": field, "count": ids.len(), "ids": ids});
                let hints: Vec<Value> = items
                    .iter()
                    .take(3)
                    .map(|v| json!({"tool": "memory_query", "mode": "expand", "input_data": {"id": v["object_id"]}}))
                    .collect();
                diag["query_sanitizer"] = json!(s);
                let mut v = json!({
                    "result_type": "context_result", "mode": "context", "task": s.query,
                    "items": items,
                    "context_tiers": {
                        "policy": {"resource": "memory://policy"},
                        "active_task": {"task": s.query, "scope": filters.json()},
                        "decisions": tier("items", &decisions),
                        "procedures": tier("items", &procedures),
                        "evidence": tier("items", &evidence),
                        "open_work": tier("items", &open_work),
                        "deep_search_hints": hints,
                    },
                    "context_budget": {"max_items": limit, "returned_items": items.len(), "detail": "compact"},
                });
                merge(&mut v, diag);
                Ok(v)
            }
            "recent" => {
                only(place, &e.input, &[])?;
                only("options", &e.options, &["max_items", "filters"])?;
                let filters = Filters::parse(&e.options)?;
                let limit = max_items(&e.options, 20, 100)?;
                let mut dated: Vec<(i64, Value)> = Vec::new();
                if filters.wants("knowledge") || filters.wants("work_item") {
                    for i in self.items(None, false).await?.items {
                        if filters.keeps_item(&i) {
                            dated.push((i.updated_at, item_json(&i)));
                        }
                    }
                }
                if filters.wants("observation") && filters.statuses.is_empty() {
                    let req = RecentRequest {
                        cwd: self.cwd.clone(),
                        limit: Some(limit),
                        ..RecentRequest::default()
                    };
                    let obs: Vec<Observation> = daemon(wire::PATH_RECENT, req).await?;
                    for o in obs {
                        if filters.kinds.is_empty() || filters.kinds.contains(&o.obs_type) {
                            dated.push((o.timestamp, obs_json(&o, 200)));
                        }
                    }
                }
                dated.sort_by_key(|d| std::cmp::Reverse(d.0));
                let items: Vec<Value> = dated
                    .into_iter()
                    .take(limit as usize)
                    .map(|d| d.1)
                    .collect();
                Ok(
                    json!({"result_type": "query_result", "mode": "recent", "count": items.len(),
                          "items": items, "applied_filters": filters.json()}),
                )
            }
            "page" | "expand" | "graph" => {
                only(place, &e.input, &["id"])?;
                let allowed: &[&str] = match e.mode.as_str() {
                    "page" => &["detail", "include_segments", "max_items", "snippet_chars"],
                    "expand" => &["include_segments", "max_items", "snippet_chars"],
                    _ => &["max_items"],
                };
                only("options", &e.options, allowed)?;
                let max = max_items(&e.options, 10, 100)? as usize;
                let snippet = match e.options.get("snippet_chars") {
                    None | Some(Value::Null) => 200,
                    Some(v) => match v.as_u64() {
                        Some(n) if (1..=10_000).contains(&n) => n as usize,
                        _ => {
                            return invalid(format!("options.snippet_chars: {v} is not 1 to 10000"))
                        }
                    },
                };
                let detail = string(&e.options, "options", "detail")?;
                if let Some(d) = detail
                    .as_deref()
                    .filter(|d| !["compact", "full"].contains(d))
                {
                    return invalid(format!("options.detail: {d:?} is not compact or full"));
                }
                let full = detail.as_deref() == Some("full");
                let id = id_of(&e.input, place, "id")?;
                let id_str = e.input["id"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                self.look(
                    &e.mode,
                    id,
                    &id_str,
                    max,
                    if full { 100_000 } else { snippet },
                )
                .await
            }
            _ => unreachable!("modes are checked by the envelope"),
        }
    }

    /// `page`, `expand` and `graph` of one object.
    async fn look(
        &self,
        mode: &str,
        id: Ref,
        id_str: &str,
        max: usize,
        snippet: usize,
    ) -> Res<Value> {
        let missing = |what: &str| Failure {
            kind: "KeyError",
            message: format!("{id_str}: no {what} has this id"),
        };
        match id {
            Ref::Knowledge(n) => {
                let (item, r) = self.item(n, true).await?;
                let mut v = item_json(&item);
                if mode == "page" {
                    v["audit"] = json!(r.audit);
                    return Ok(json!({"result_type": "page_result", "mode": mode, "object": v}));
                }
                // The cited observations and chunks, and the items it supersedes or is
                // superseded by.
                let obs_ids: Vec<i64> = item
                    .evidence
                    .iter()
                    .filter_map(|e| e.source_id.strip_prefix("obs:")?.parse().ok())
                    .take(max)
                    .collect();
                let doc_ids: Vec<i64> = item
                    .evidence
                    .iter()
                    .filter_map(|e| e.segment_id.as_ref()?.parse().ok())
                    .take(max)
                    .collect();
                let cited = if obs_ids.is_empty() && doc_ids.is_empty() {
                    Vec::new()
                } else {
                    self.observations(obs_ids, doc_ids).await?
                };
                let others: Vec<&nmem_proto::knowledge::AuditEntry> = r
                    .audit
                    .iter()
                    .filter(|a| matches!(a.action.as_str(), "supersedes" | "superseded" | "contested"))
                    .collect();
                if mode == "expand" {
                    let related: Vec<Value> = cited.iter().map(|o| obs_json(o, snippet)).collect();
                    return Ok(json!({"result_type": "expand_result", "mode": mode, "object": v,
                                     "related": related, "count": related.len()}));
                }
                let mut edges = Vec::new();
                for e in &item.evidence {
                    edges.push(json!({"type": "evidence", "from": object_id(&item), "to": e.source_id, "segment_id": e.segment_id}));
                    if let Some(f) = &e.file_path {
                        edges.push(json!({"type": "file", "from": e.source_id, "to": format!("file:{f}")}));
                    }
                }
                for a in others {
                    if let Some(o) = a.other_id.filter(|o| *o != item.id) {
                        let (from, to) = if a.action == "superseded" {
                            (format!("know:{o}"), object_id(&item))
                        } else {
                            (object_id(&item), format!("know:{o}"))
                        };
                        let t = if a.action == "contested" { "contests" } else { "supersedes" };
                        edges.push(json!({"type": t, "from": from, "to": to}));
                    }
                }
                if let Some(o) = item.obs_id {
                    edges.push(json!({"type": "evidence", "from": object_id(&item), "to": format!("obs:{o}")}));
                }
                edges.truncate(max);
                let nodes: Vec<Value> = std::iter::once(v)
                    .chain(cited.iter().map(|o| obs_json(o, snippet)))
                    .collect();
                Ok(json!({"result_type": "graph_result", "mode": mode, "id": id_str,
                          "nodes": nodes, "edges": edges}))
            }
            Ref::Obs(n) => {
                let o = self
                    .observations(vec![n], vec![])
                    .await?
                    .pop()
                    .ok_or_else(|| missing("observation"))?;
                match mode {
                    "page" => Ok(json!({"result_type": "page_result", "mode": mode,
                                        "object": {"content": nmem_proto::text::one_line(&o.content, snippet), "metadata": o.metadata, "summary_object": obs_json(&o, snippet)}})),
                    "expand" => {
                        let half = (max / 2).max(1) as i64;
                        let t: Timeline = daemon(
                            wire::PATH_TIMELINE,
                            TimelineRequest {
                                anchor: Some(n),
                                before: Some(half),
                                after: Some(half),
                                project: Some(None),
                                ..TimelineRequest::default()
                            },
                        )
                        .await?;
                        let related: Vec<Value> = t.before.iter().chain(t.after.iter()).map(|o| obs_json(o, snippet)).collect();
                        Ok(json!({"result_type": "expand_result", "mode": mode, "object": obs_json(&o, snippet),
                                  "related": related, "count": related.len()}))
                    }
                    _ => {
                        let mut edges = vec![json!({"type": "session", "from": format!("obs:{n}"), "to": format!("session:{}", o.session_id)})];
                        if let Some(f) = &o.file_path {
                            edges.push(json!({"type": "file", "from": format!("obs:{n}"), "to": format!("file:{f}")}));
                        }
                        // Knowledge that cites it.
                        for i in self.items(None, false).await?.items {
                            if i.obs_id == Some(n) || i.evidence.iter().any(|e| e.source_id == format!("obs:{n}")) {
                                edges.push(json!({"type": "evidence", "from": object_id(&i), "to": format!("obs:{n}")}));
                            }
                        }
                        edges.truncate(max);
                        Ok(json!({"result_type": "graph_result", "mode": mode, "id": id_str,
                                  "nodes": [obs_json(&o, snippet)], "edges": edges}))
                    }
                }
            }
            Ref::Doc(n) => {
                let o = self
                    .observations(vec![], vec![n])
                    .await?
                    .pop()
                    .ok_or_else(|| missing("document chunk"))?;
                let meta = o.metadata.clone().unwrap_or(Value::Null);
                let src = meta.get("source_id").and_then(Value::as_i64);
                let chunk = json!({"object_id": id_str, "object_type": "source",
                                   "excerpt": nmem_proto::text::one_line(&o.content, snippet),
                                   "locator": meta, "source_id": src.map(|s| format!("src:{s}"))});
                match mode {
                    "graph" => Ok(json!({"result_type": "graph_result", "mode": mode, "id": id_str, "nodes": [chunk],
                                         "edges": src.map(|s| vec![json!({"type": "segment_of", "from": id_str, "to": format!("src:{s}")})]).unwrap_or_default()})),
                    _ => Ok(json!({"result_type": format!("{mode}_result"), "mode": mode, "object": chunk})),
                }
            }
            Ref::Src(_) => fail(
                "KeyError",
                format!("{id_str}: sources are not paged whole in nmem: search for their chunks (doc:<n>, with the source's path and lines) and read the file itself for the full text"),
            ),
        }
    }

    // ---- memory_remember ----

    /// Check one write and turn it into what it sends, before anything is sent.
    fn plan(&self, mode: &str, input: &Map<String, Value>) -> Res<Write> {
        let place = "input_data";
        match mode {
            "knowledge" | "work_item" => {
                only(
                    place,
                    input,
                    &[
                        "kind",
                        "title",
                        "summary",
                        "reason",
                        "memory_source",
                        "scope_refs",
                        "subject_refs",
                        "evidence_refs",
                        "source_refs",
                        "related_node_refs",
                        "payload",
                        "confidence",
                        "status",
                    ],
                )?;
                let class = if mode == "knowledge" {
                    Class::Knowledge
                } else {
                    Class::WorkItem
                };
                let source = required(input, place, "memory_source")?;
                let memory_source = MemorySource::parse(&source).ok_or_else(|| Failure {
                    kind: "ValueError",
                    message: format!(
                        "input_data.memory_source: {source:?} is not {}",
                        MemorySource::names()
                    ),
                })?;
                let scope_refs = strings(input, place, "scope_refs")?;
                if scope_refs.is_empty() {
                    return invalid(
                        "input_data.scope_refs: Field required (scope:project or scope:global)",
                    );
                }
                let status = match string(input, place, "status")? {
                    None => None,
                    Some(s) => Some(Status::parse(&s).ok_or_else(|| Failure {
                        kind: "ValueError",
                        message: format!("input_data.status: {s:?} is not {}", Status::names()),
                    })?),
                };
                let mut evidence_refs: Vec<EvidenceRef> = match input.get("evidence_refs") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(v) => serde_json::from_value::<Vec<Map<String, Value>>>(v.clone())
                        .or_else(|_| invalid("input_data.evidence_refs: must be a list of {source_id, segment_id, locator, hash}"))?
                        .into_iter()
                        .map(|m| {
                            only("input_data.evidence_refs[]", &m, &["source_id", "segment_id", "locator", "hash"])?;
                            Ok(EvidenceRef {
                                source_id: required(&m, "input_data.evidence_refs[]", "source_id")?,
                                segment_id: match m.get("segment_id") {
                                    Some(Value::Number(n)) => Some(n.to_string()),
                                    _ => string(&m, "input_data.evidence_refs[]", "segment_id")?,
                                },
                                hash: string(&m, "input_data.evidence_refs[]", "hash")?,
                                file_path: None,
                            })
                        })
                        .collect::<Res<Vec<_>>>()?,
                };
                for s in strings(input, place, "source_refs")? {
                    evidence_refs.push(EvidenceRef {
                        source_id: s,
                        segment_id: None,
                        hash: None,
                        file_path: None,
                    });
                }
                let payload = match input.get("payload") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(serde_json::from_value::<Payload>(v.clone()).or_else(|e| {
                        invalid(format!(
                            "input_data.payload: {e} (subject, predicate, value, object, metadata)"
                        ))
                    })?),
                };
                let confidence = match input.get("confidence") {
                    None | Some(Value::Null) => None,
                    Some(v) => Some(v.as_f64().filter(|c| (0.0..=1.0).contains(c)).ok_or_else(
                        || Failure {
                            kind: "ValidationError",
                            message: format!(
                                "input_data.confidence: {v} is not a number from 0 to 1"
                            ),
                        },
                    )?),
                };
                Ok(Write::Remember(Box::new(RememberRequest {
                    class,
                    kind: required(input, place, "kind")?,
                    title: required(input, place, "title")?,
                    summary: string(input, place, "summary")?.unwrap_or_default(),
                    reason: required(input, place, "reason")?,
                    memory_source,
                    scope_refs,
                    status,
                    confidence,
                    payload,
                    evidence_refs,
                    project: None,
                    cwd: self.cwd.clone(),
                })))
            }
            "activity" => {
                only(
                    place,
                    input,
                    &[
                        "kind",
                        "title",
                        "summary",
                        "reason",
                        "memory_source",
                        "scope_refs",
                        "source_refs",
                        "related_node_refs",
                    ],
                )?;
                let title = required(input, place, "title")?;
                let summary = string(input, place, "summary")?.unwrap_or_default();
                let reason = required(input, place, "reason")?;
                let source = required(input, place, "memory_source")?;
                if MemorySource::parse(&source).is_none() {
                    return value_error(format!(
                        "input_data.memory_source: {source:?} is not {}",
                        MemorySource::names()
                    ));
                }
                let scope_refs = strings(input, place, "scope_refs")?;
                if scope_refs.is_empty() {
                    return invalid(
                        "input_data.scope_refs: Field required (scope:project or scope:global)",
                    );
                }
                let mut metadata = Map::new();
                metadata.insert(
                    "type".into(),
                    json!(string(input, place, "kind")?.unwrap_or_else(|| "activity".into())),
                );
                metadata.insert("reason".into(), json!(reason));
                metadata.insert("memory_source".into(), json!(source));
                metadata.insert("scope_refs".into(), json!(scope_refs));
                metadata.insert(
                    "source_refs".into(),
                    json!(strings(input, place, "source_refs")?),
                );
                let text = if summary.trim().is_empty() {
                    title.clone()
                } else {
                    format!("{title}\n{summary}")
                };
                Ok(Write::Activity(SaveRequest {
                    text,
                    title: Some(title),
                    project: None,
                    cwd: self.cwd.clone(),
                    metadata: Some(metadata),
                }))
            }
            "promote" | "contest" => {
                only(place, input, &["knowledge_id", "reason"])?;
                Ok(Write::Lifecycle(LifecycleRequest {
                    action: if mode == "promote" {
                        Action::Promote
                    } else {
                        Action::Contest
                    },
                    id: knowledge_id(input, place, "knowledge_id")?,
                    new_id: None,
                    reason: required(input, place, "reason")?,
                }))
            }
            "supersede" => {
                only(
                    place,
                    input,
                    &["old_knowledge_id", "new_knowledge_id", "reason"],
                )?;
                Ok(Write::Lifecycle(LifecycleRequest {
                    action: Action::Supersede,
                    id: knowledge_id(input, place, "old_knowledge_id")?,
                    new_id: Some(knowledge_id(input, place, "new_knowledge_id")?),
                    reason: required(input, place, "reason")?,
                }))
            }
            _ => value_error(format!("mode {mode:?} cannot be written here")),
        }
    }

    async fn write(&self, w: Write) -> Res<Value> {
        match w {
            Write::Remember(req) => {
                let r: Remembered = daemon(wire::PATH_KNOWLEDGE, *req).await?;
                let dups: Vec<Value> = r
                    .possible_duplicates
                    .iter()
                    .map(|d| {
                        json!({"object_id": format!("know:{}", d.object_id), "score": d.score, "reasons": d.reasons,
                               "title": d.title, "kind": d.kind, "status": d.status})
                    })
                    .collect();
                Ok(json!({
                    "result_type": "remember_result",
                    "object_id": object_id(&r.item),
                    "object_type": r.item.class.as_str(),
                    "status": r.item.status,
                    "object": item_json(&r.item),
                    "possible_duplicates": dups,
                    "contested_with": r.contested_with.iter().map(|n| format!("know:{n}")).collect::<Vec<_>>(),
                    "notes": r.notes,
                }))
            }
            Write::Activity(req) => {
                let s: Saved = daemon(wire::PATH_MEMORIES, req).await?;
                Ok(
                    json!({"result_type": "remember_result", "object_id": format!("obs:{}", s.id),
                          "object_type": "activity", "status": "recorded", "project": s.project,
                          "notes": ["kept as a `memory` observation; the knowledge layer also shows it as a note (memory_query recent)"]}),
                )
            }
            Write::Lifecycle(req) => {
                let action = req.action;
                let r: LifecycleReply = daemon(wire::PATH_KNOWLEDGE_LIFECYCLE, req).await?;
                Ok(
                    json!({"result_type": "lifecycle_result", "action": action.as_str(),
                          "objects": r.items.iter().map(item_json).collect::<Vec<_>>()}),
                )
            }
        }
    }

    async fn remember(&self, e: Env) -> Res<Value> {
        only("options", &e.options, &[])?;
        if e.mode != "batch" {
            let w = self.plan(&e.mode, &e.input)?;
            let mut v = self.write(w).await?;
            v["mode"] = json!(e.mode);
            return Ok(v);
        }
        only("input_data", &e.input, &["entries"])?;
        let Some(Value::Array(entries)) = e.input.get("entries") else {
            return invalid("input_data.entries: Field required (a list of {mode, input_data})");
        };
        if entries.is_empty() || entries.len() > 100 {
            return invalid(format!(
                "input_data.entries: {} entries: give 1 to 100",
                entries.len()
            ));
        }
        // Every entry is checked before the first is written.
        let mut plans = Vec::new();
        for (n, entry) in entries.iter().enumerate() {
            let place = format!("input_data.entries[{n}]");
            let Value::Object(m) = entry else {
                return invalid(format!("{place}: must be an object {{mode, input_data}}"));
            };
            only(&place, m, &["mode", "input_data"])?;
            let mode = required(m, &place, "mode")?;
            if mode == "batch" || !REMEMBER_MODES.contains(&mode.as_str()) {
                return value_error(format!("{place}.mode: {mode:?} cannot be batched: use knowledge, work_item, activity, promote, supersede or contest"));
            }
            let Some(Value::Object(input)) = m.get("input_data") else {
                return invalid(format!("{place}.input_data: Field required"));
            };
            plans.push((
                mode.clone(),
                self.plan(&mode, input).map_err(|mut f| {
                    f.message = format!("{place}: {}", f.message);
                    f
                })?,
            ));
        }
        let mut results = Vec::new();
        let mut failed = 0;
        for (mode, w) in plans {
            match self.write(w).await {
                Ok(mut v) => {
                    v["mode"] = json!(mode);
                    results.push(v);
                }
                Err(f) => {
                    failed += 1;
                    results.push(json!({"mode": mode, "status": "failed", "error": format!("{}: {}", f.kind, f.message)}));
                }
            }
        }
        Ok(
            json!({"result_type": "batch_result", "mode": "batch", "count": results.len(),
                  "failed": failed, "results": results}),
        )
    }

    // ---- memory_maintain ----

    async fn maintain(&self, e: Env) -> Res<Value> {
        let place = "input_data";
        let apply = boolean(&e.options, "options", "apply")?;
        if e.mode != "report" && !apply {
            return value_error(format!(
                "memory_maintain mode {:?} changes memory: pass options.apply=true (mode report is read-only)",
                e.mode
            ));
        }
        let thresholds = |input: &Map<String, Value>| -> Res<(f64, usize, i64, i64)> {
            only(
                place,
                input,
                &[
                    "min_confidence",
                    "min_evidence",
                    "reference_time",
                    "stale_after_days",
                ],
            )?;
            let min_conf = match input.get("min_confidence") {
                None | Some(Value::Null) => 0.75,
                Some(v) => v
                    .as_f64()
                    .filter(|c| (0.0..=1.0).contains(c))
                    .ok_or_else(|| Failure {
                        kind: "ValidationError",
                        message: format!("input_data.min_confidence: {v} is not 0 to 1"),
                    })?,
            };
            let min_ev = match input.get("min_evidence") {
                None | Some(Value::Null) => 1,
                Some(v) => v.as_u64().ok_or_else(|| Failure {
                    kind: "ValidationError",
                    message: format!("input_data.min_evidence: {v} is not a count"),
                })? as usize,
            };
            let now = match string(input, place, "reference_time")? {
                None => nmem_proto::now_ms(),
                Some(s) => nmem_proto::time::parse_date(&s, false)
                    .or_else(|e| invalid(format!("input_data.reference_time: {e}")))?,
            };
            let days = match input.get("stale_after_days") {
                None | Some(Value::Null) => 30,
                Some(v) => v.as_i64().filter(|d| *d > 0).ok_or_else(|| Failure {
                    kind: "ValidationError",
                    message: format!(
                        "input_data.stale_after_days: {v} is not a number of days above 0"
                    ),
                })?,
            };
            Ok((min_conf, min_ev, now, days))
        };
        match e.mode.as_str() {
            "report" | "promote_candidates" | "decay_stale" | "cycle" | "merge_duplicates" => {
                only("options", &e.options, &["apply"])?;
                let (min_conf, min_ev, now, days) = thresholds(&e.input)?;
                let list = self.items(None, false).await?.items;
                let cands: Vec<&Item> = list
                    .iter()
                    .filter(|i| i.status == Status::Candidate)
                    .collect();
                let promotable: Vec<&Item> = cands
                    .iter()
                    .copied()
                    .filter(|i| {
                        i.confidence.unwrap_or(0.0) >= min_conf && i.evidence.len() >= min_ev
                    })
                    .collect();
                let low_evidence: Vec<&Item> = cands
                    .iter()
                    .copied()
                    .filter(|i| i.evidence.len() < min_ev)
                    .collect();
                let old = now - days * 86_400_000;
                let stale: Vec<&Item> = list
                    .iter()
                    .filter(|i| {
                        i.possibly_stale || (i.status == Status::Candidate && i.updated_at < old)
                    })
                    .collect();
                let ids = |v: &[&Item]| v.iter().map(|i| object_id(i)).collect::<Vec<_>>();
                let mut promoted = Vec::new();
                let mut decayed = Vec::new();
                if apply && matches!(e.mode.as_str(), "promote_candidates" | "cycle") {
                    for i in &promotable {
                        let reason = format!(
                            "memory_maintain {}: confidence ≥ {min_conf} with {} evidence",
                            e.mode,
                            i.evidence.len()
                        );
                        let _: LifecycleReply = daemon(
                            wire::PATH_KNOWLEDGE_LIFECYCLE,
                            LifecycleRequest {
                                action: Action::Promote,
                                id: i.id,
                                new_id: None,
                                reason,
                            },
                        )
                        .await?;
                        promoted.push(object_id(i));
                    }
                }
                if apply && matches!(e.mode.as_str(), "decay_stale" | "cycle") {
                    for i in list.iter().filter(|i| {
                        i.status == Status::Candidate
                            && i.updated_at < old
                            && !promoted.contains(&object_id(i))
                    }) {
                        let reason = format!(
                            "memory_maintain {}: a candidate not confirmed in {days} days",
                            e.mode
                        );
                        let _: LifecycleReply = daemon(
                            wire::PATH_KNOWLEDGE_LIFECYCLE,
                            LifecycleRequest {
                                action: Action::Archive,
                                id: i.id,
                                new_id: None,
                                reason,
                            },
                        )
                        .await?;
                        decayed.push(object_id(i));
                    }
                }
                let contested: Vec<&Item> = list
                    .iter()
                    .filter(|i| i.status == Status::Contested)
                    .collect();
                let open_work: Vec<&Item> =
                    list.iter().filter(|i| i.status == Status::Open).collect();
                Ok(json!({
                    "result_type": "maintain_result", "mode": e.mode, "applied": apply && e.mode != "report",
                    "promotable_candidates": ids(&promotable),
                    "low_evidence_candidates": ids(&low_evidence),
                    "stale_candidates": ids(&stale),
                    "contested": ids(&contested),
                    "open_work": ids(&open_work),
                    // Exact structured duplicates are refused at write time, so there are none
                    // to merge; similar unstructured items are reported at write time.
                    "duplicate_groups": [],
                    "merged": 0,
                    "promoted": promoted,
                    "decayed": decayed,
                    "concept_candidates": [],
                    "counts": {"items": list.len(), "candidates": cands.len(), "promotable": promotable.len(),
                               "stale": stale.len(), "contested": contested.len(), "open_work": open_work.len(),
                               "promoted": promoted.len(), "decayed": decayed.len()},
                }))
            }
            "structure" | "audit" => {
                only(place, &e.input, &[])?;
                only("options", &e.options, &["apply"])?;
                let r = self.items(None, e.mode == "audit").await?;
                let mut by: std::collections::BTreeMap<String, u64> = Default::default();
                for i in &r.items {
                    *by.entry(format!("{}:{}", i.class.as_str(), i.status.as_str()))
                        .or_default() += 1;
                }
                let mut v = json!({"result_type": "maintain_result", "mode": e.mode, "counts_by_type_status": by,
                                   "items": r.items.len()});
                if e.mode == "audit" {
                    v["audit_events"] = json!(r.audit.iter().map(|a| json!({
                        "object_id": format!("know:{}", a.knowledge_id), "at": format_rfc3339_ms(a.at), "action": a.action,
                        "from_status": a.from_status, "to_status": a.to_status, "reason": a.reason,
                        "other_id": a.other_id})).collect::<Vec<_>>());
                }
                Ok(v)
            }
            "reindex" | "repair" => {
                only(place, &e.input, &[])?;
                only(
                    "options",
                    &e.options,
                    &["apply", "graph_backend", "semantic_backend"],
                )?;
                let r: nmem_proto::admin::MaintainReport =
                    daemon(wire::PATH_MAINTAIN, json!({})).await?;
                Ok(
                    json!({"result_type": "maintain_result", "mode": e.mode, "applied": true, "report": r,
                          "derived_indexes": {"fts": r.fts_integrity}}),
                )
            }
            _ => unreachable!("modes are checked by the envelope"),
        }
    }
}

/// A memory_remember write, checked.
#[derive(Debug)]
enum Write {
    Remember(Box<RememberRequest>),
    Activity(SaveRequest),
    Lifecycle(LifecycleRequest),
}

fn merge(v: &mut Value, extra: Value) {
    if let (Value::Object(v), Value::Object(e)) = (v, extra) {
        v.extend(e);
    }
}

fn absolute(p: &str) -> Res<std::path::PathBuf> {
    let p = std::path::Path::new(p);
    if !p.is_absolute() {
        return invalid(format!(
            "input_data.path: {} is not absolute: give an absolute path",
            p.display()
        ));
    }
    Ok(p.to_path_buf())
}

/// Whether `pat` matches a repository-relative path: the path itself, a folder it is under, a
/// component (a basename), or a glob (`*.lock`, `docs/**/*.md`).
pub fn pattern_matches(pat: &str, rel: &str) -> bool {
    let pat = pat.trim().trim_end_matches('/');
    if pat.is_empty() {
        return false;
    }
    if rel == pat || rel.starts_with(&format!("{pat}/")) || rel.split('/').any(|c| c == pat) {
        return true;
    }
    match globset::Glob::new(pat) {
        Ok(g) => {
            let m = g.compile_matcher();
            m.is_match(rel) || rel.split('/').any(|c| m.is_match(c))
        }
        Err(_) => false,
    }
}

/// memory-substrate's ingest result, from nmem's reply.
fn ingest_result(mode: &str, r: &IngestReply, excluded_by_me: &[String], forced: bool) -> Value {
    let stored: Vec<_> = r
        .sources
        .iter()
        .filter(|s| s.status != SourceStatus::Skipped)
        .collect();
    let applied: u64 = stored
        .iter()
        .map(|s| s.chunks.added + s.chunks.removed)
        .sum();
    let agent_state: Vec<String> = r
        .sources
        .iter()
        .filter(|s| {
            s.reason
                .as_deref()
                .is_some_and(|w| w.starts_with("local agent state"))
        })
        .filter_map(|s| {
            std::path::Path::new(&s.locator)
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
        })
        .collect();
    let noop = !stored.is_empty() && stored.iter().all(|s| s.status == SourceStatus::Noop);
    let status = if !agent_state.is_empty() && !forced {
        "completed_with_pending_decisions"
    } else if noop {
        "noop"
    } else {
        "completed"
    };
    let source_ids: Vec<String> = stored
        .iter()
        .filter_map(|s| s.source_id.map(|i| format!("src:{i}")))
        .collect();
    let pending: Vec<Value> = agent_state
        .iter()
        .map(|p| json!({"path": p, "kind": "local_agent_state",
                        "reason": "Repository contains local/agent state that may not belong in durable memory.",
                        "suggested_action": "exclude"}))
        .collect();
    let mut warnings = r.warnings.clone();
    if !agent_state.is_empty() {
        warnings.push(format!(
            "Repository contains local/agent state entries that may not belong in memory: {}. They are excluded from the clean repo ingest unless options.force=true is used.",
            agent_state.join(", ")
        ));
    }
    let skipped: Vec<Value> = r
        .sources
        .iter()
        .filter(|s| s.status == SourceStatus::Skipped)
        .map(|s| json!({"path": s.locator, "reason": s.reason}))
        .collect();
    let result_type = if mode == "repo" {
        "repo_ingest_result"
    } else {
        "source_ingest_result"
    };
    json!({
        "result_type": result_type,
        "mode": mode,
        "status": status,
        "requires_decision": !pending.is_empty(),
        "source_id": if source_ids.len() == 1 { json!(source_ids[0]) } else { Value::Null },
        "source_ids": source_ids,
        "project": r.project,
        "applied_operations": applied,
        "reason": if status == "noop" { json!(if mode == "repo" { "repo_fingerprint_unchanged" } else { "source_fingerprint_unchanged" }) } else { Value::Null },
        "excluded_by_preflight": agent_state,
        "excluded_by_patterns": excluded_by_me,
        "pending_decisions": pending,
        "warnings": warnings,
        "suggested_exclude_patterns": agent_state,
        "skipped": skipped,
        "counts": {"sources": stored.len(), "ingested": r.totals.ingested, "updated": r.totals.updated,
                   "noop": r.totals.noop, "skipped": r.totals.skipped, "chunks": r.totals.chunks},
        "memory_suggestions": {
            "concept_candidates": [],
            "agent_extraction": {
                "protocol": "agent_extraction.v1",
                "source_id": if source_ids.len() == 1 { json!(source_ids[0]) } else { Value::Null },
                "resource": "memory://agent-playbook",
                "summary": "Ingest captured evidence; agent analyzes it and uses memory_remember for durable writes.",
                "required_steps": ["inspect_source", "query_existing_memory", "prepare_durable_candidates", "commit_reviewed_memory"],
                "remember_write_contract": {
                    "required_fields": ["kind", "title", "summary", "reason", "memory_source", "scope_refs"],
                    "recommended_fields": ["evidence_refs", "payload", "confidence", "status"],
                },
            },
            "counts": {"concept_candidates": 0, "concept_candidates_available": 0},
            "next_actions": ["call_memory_remember_if_durable"],
        },
    })
}

#[tool_router]
impl Substrate {
    pub fn new() -> Substrate {
        Substrate {
            cwd: std::env::current_dir()
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Capture evidence (documents) into memory; it does not decide what becomes \
        durable memory. {args: {mode, input_data, options}}. Modes: repo {path (absolute folder), \
        include_patterns, exclude_patterns} (options.force to keep local agent state such as \
        .codex or .claude), file / markdown / pdf {path}, web {url} (fetched only when asked), \
        conversation {title, messages: [{role, content}], origin}. Returns status completed, noop \
        (unchanged since the last ingest) or completed_with_pending_decisions, with \
        excluded_by_preflight, pending_decisions and warnings."
    )]
    async fn memory_ingest(
        &self,
        Parameters(c): Parameters<Call>,
    ) -> Result<CallToolResult, ErrorData> {
        result(match envelope("memory_ingest", c, INGEST_MODES) {
            Ok(e) => self.ingest(e).await,
            Err(f) => Err(f),
        })
    }

    #[tool(
        description = "Read memory before work. {args: {mode, input_data, options}}. Modes: \
        search {query} (options.max_items 20 max 100, options.filters {object_type(s): knowledge, \
        work_item, activity, source; kind(s); status(es); source_id(s)}), context {task, scope: \
        {object_types}} (items plus decisions, procedures, evidence and open_work tiers), recent \
        {} (newest first, same filters), page {id}, expand {id} (evidence or surrounding \
        activity), graph {id} (links: evidence, supersedes, session, file). Ids: know:<n>, \
        work:<n>, obs:<n>, doc:<n>. Search returns normalized_terms, applied_filters and \
        query_sanitizer diagnostics; retry with other words when results are weak."
    )]
    async fn memory_query(
        &self,
        Parameters(c): Parameters<Call>,
    ) -> Result<CallToolResult, ErrorData> {
        result(match envelope("memory_query", c, QUERY_MODES) {
            Ok(e) => self.query(e).await,
            Err(f) => Err(f),
        })
    }

    #[tool(
        description = "Write durable memory under governance. {args: {mode, input_data, \
        options}}. Modes: knowledge and work_item {kind, title, summary, reason, memory_source \
        (user_declared, human_curated, agent_inferred, system_generated, imported), scope_refs \
        ([\"scope:project\"] or [\"scope:global\"]), evidence_refs [{source_id: \"obs:<n>\"}], \
        payload {subject, predicate, value|object}, confidence, status}, activity {kind, title, \
        summary, reason, memory_source, scope_refs, source_refs}, promote and contest \
        {knowledge_id, reason}, supersede {old_knowledge_id, new_knowledge_id, reason}, batch \
        {entries: [{mode, input_data}]} (all checked before any is written). Agent-inferred \
        claims start as candidates; an exact structured duplicate is refused; the same subject \
        and predicate with another value is contested; similar items come back as \
        possible_duplicates."
    )]
    async fn memory_remember(
        &self,
        Parameters(c): Parameters<Call>,
    ) -> Result<CallToolResult, ErrorData> {
        result(match envelope("memory_remember", c, REMEMBER_MODES) {
            Ok(e) => self.remember(e).await,
            Err(f) => Err(f),
        })
    }

    #[tool(
        description = "Review and maintain memory. {args: {mode, input_data, options}}. report \
        {min_confidence 0.75, min_evidence 1, reference_time, stale_after_days 30} is read-only: \
        promotable, low-evidence and stale candidates, contested items, open work. These need \
        options.apply=true: structure, audit (the audit trail), reindex and repair (rebuild and \
        check the full-text indexes), promote_candidates, decay_stale (archive candidates not \
        confirmed in stale_after_days), merge_duplicates, cycle (promote, decay, report)."
    )]
    async fn memory_maintain(
        &self,
        Parameters(c): Parameters<Call>,
    ) -> Result<CallToolResult, ErrorData> {
        result(match envelope("memory_maintain", c, MAINTAIN_MODES) {
            Ok(e) => self.maintain(e).await,
            Err(f) => Err(f),
        })
    }
}

pub const POLICY: &str = "# nmem memory policy (memory-substrate face)

* Memory is evidence first: observations (what sessions did) and ingested documents are captured \
automatically or by `memory_ingest`; durable knowledge is written only by `memory_remember`, \
with a reason, a memory_source and scope_refs.
* Agent-inferred claims start as candidates; promote them (with a reason) once verified.
* Never store secrets: nmem redacts known secret shapes, but do not paste credentials.
* Do not ingest local agent state (.claude, .codex, .cursor, .worktrees) unless it is the evidence.
* When a write reports possible_duplicates, review them: supersede, contest or keep both.
* Knowledge flagged possibly_stale cites a file or chunk that changed since: re-check it, then \
promote (still true) or supersede (replaced).
";

pub const PLAYBOOK: &str = "# Agent playbook

1. Task start: `memory_query` mode `context` with the task (or `search` with its key words). \
Weak results: retry with synonyms, file and function names, or without filters.
2. Read what you find: `page` for an item with its audit trail, `expand` for its evidence or the \
activity around an observation, `graph` for its links.
3. Capture evidence worth keeping: `memory_ingest` (repo, file, markdown, pdf, web, conversation). \
Ingest does not decide what is durable.
4. Durable writes after review: `memory_remember` knowledge (fact, decision, procedure, concept, \
…) or work_item (task, bug, follow_up) with kind, title, summary, reason, memory_source, \
scope_refs and evidence_refs ({\"source_id\": \"obs:<n>\"}).
5. Task end: `memory_maintain` mode `report`; promote verified candidates, supersede what \
changed, contest what conflicts.
";

pub const API_SUMMARY: &str = "# MCP API summary

Every call: {\"args\": {\"mode\": ..., \"input_data\": {...}, \"options\": {...}}}; unexpected \
fields fail (\"Extra inputs are not permitted\").

* memory_ingest: repo | file | markdown | web | pdf | conversation
* memory_query: context | expand | page | recent | search | graph
* memory_remember: activity | knowledge | work_item | promote | supersede | contest | batch
* memory_maintain: report (read-only) | structure | audit | reindex | repair | \
promote_candidates | merge_duplicates | decay_stale | cycle (options.apply=true)

Ids: know:<n> knowledge, work:<n> work item, obs:<n> observation, doc:<n> document chunk, \
src:<n> document source. Errors: ValidationError, ValueError, KeyError (with the id), \
StorageError.
";

const RESOURCES: &[(&str, &str, &str, &str)] = &[
    (
        "memory://policy",
        "policy",
        "What belongs in memory and how it is governed",
        POLICY,
    ),
    (
        "memory://agent-playbook",
        "agent-playbook",
        "The query → ingest → remember → review workflow",
        PLAYBOOK,
    ),
    (
        "memory://mcp-api-summary",
        "mcp-api-summary",
        "The four tools, their modes, ids and errors",
        API_SUMMARY,
    ),
];

fn prompt_text(name: &str, args: &Map<String, Value>) -> Option<String> {
    let task = args
        .get("task")
        .and_then(Value::as_str)
        .unwrap_or("the current task");
    match name {
        "memory_task_start" => Some(format!(
            "Before starting on {task}: call memory_query with {{\"args\": {{\"mode\": \"context\", \
            \"input_data\": {{\"task\": {t}}}}}}}. If the items are weak or empty, retry mode search \
            with expanded terms (synonyms, file and function names, error text) before you work \
            from scratch. Respect active decisions and procedures; check possibly_stale items \
            against the code.",
            t = json!(task)
        )),
        "memory_review" => Some(format!(
            "End of {task}: review what should outlive this session. For each durable fact, \
            decision or procedure, call memory_remember mode knowledge with reason, \
            memory_source, scope_refs and evidence_refs; open follow-ups as mode work_item. When a \
            write returns possible_duplicates, read them and supersede, contest or keep both. \
            Then run memory_maintain mode report and promote verified candidates."
        )),
        _ => None,
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Substrate {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .build(),
        );
        info.server_info = Implementation::new("nmem (memory-substrate)", nmem_proto::VERSION);
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            RESOURCES
                .iter()
                .map(|(uri, name, desc, _)| {
                    Resource::new(*uri, *name)
                        .with_description(*desc)
                        .with_mime_type("text/markdown")
                })
                .collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        match RESOURCES.iter().find(|r| r.0 == request.uri) {
            Some((uri, _, _, text)) => Ok(ReadResourceResult::new(vec![
                ResourceContents::text(*text, *uri).with_mime_type("text/markdown"),
            ])
            .into()),
            None => Err(ErrorData::resource_not_found(
                format!(
                    "no resource {}: read memory://policy, memory://agent-playbook or memory://mcp-api-summary",
                    request.uri
                ),
                None,
            )),
        }
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let task = || {
            Some(vec![PromptArgument::new("task")
                .with_description("What you are working on")
                .with_required(false)])
        };
        Ok(ListPromptsResult::with_all_items(vec![
            Prompt::new(
                "memory_task_start",
                Some("Query memory (and retry with expanded terms) before starting work"),
                task(),
            ),
            Prompt::new(
                "memory_review",
                Some("End-of-task memory review, with possible_duplicates handling"),
                task(),
            ),
        ]))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        match prompt_text(&request.name, &args) {
            Some(t) => {
                Ok(GetPromptResult::new(vec![PromptMessage::new_text(Role::User, t)]).into())
            }
            None => Err(ErrorData::invalid_params(
                format!(
                    "no prompt {:?}: use memory_task_start or memory_review",
                    request.name
                ),
                None,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn call(v: Value) -> Call {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_envelope_is_strict() {
        let ok = envelope(
            "memory_query",
            call(json!({"args": {"mode": "search", "input_data": {"query": "x"}}})),
            QUERY_MODES,
        )
        .unwrap();
        assert_eq!(ok.mode, "search");
        for (bad, says) in [
            (json!({}), "args: Field required"),
            (
                json!({"args": {"mode": "search"}}),
                "input_data: Field required",
            ),
            (
                json!({"args": {"input_data": {}}}),
                "args.mode: Field required",
            ),
            (
                json!({"args": {"mode": "search", "input_data": {}, "root": "/x"}}),
                "args.root: Extra inputs are not permitted",
            ),
            (
                json!({"args": {"mode": "search", "input_data": {}}, "root": "/x"}),
                "root: Extra inputs are not permitted",
            ),
            (
                json!({"args": {"mode": "explode", "input_data": {}}}),
                "unsupported memory_query mode",
            ),
            (
                json!({"args": {"mode": "search", "input_data": []}}),
                "must be an object",
            ),
        ] {
            let f = envelope("memory_query", call(bad.clone()), QUERY_MODES).unwrap_err();
            assert!(f.message.contains(says), "{bad}: {}", f.message);
        }
        let f = envelope(
            "memory_maintain",
            call(json!({"args": {"mode": "configure", "input_data": {}}})),
            MAINTAIN_MODES,
        )
        .unwrap_err();
        assert_eq!(f.kind, "ValueError");
        assert!(f.message.contains("does not implement"), "{}", f.message);
    }

    #[test]
    fn ids_carry_their_type() {
        assert_eq!(parse_ref("know:4"), Ok(Ref::Knowledge(4)));
        assert_eq!(parse_ref("work:4"), Ok(Ref::Knowledge(4)));
        assert_eq!(parse_ref("obs:12"), Ok(Ref::Obs(12)));
        assert_eq!(parse_ref("doc:3"), Ok(Ref::Doc(3)));
        for bad in ["4", "know:", "know:-1", "node:x", ""] {
            assert!(parse_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn long_queries_are_reduced() {
        assert_eq!(sanitize("retry policy").method, "passthrough");
        let filler = "You are a careful agent. ".repeat(40);
        let s = sanitize(&format!(
            "{filler}\nQuestion: how are refunds retried\n{filler}"
        ));
        assert_eq!(
            (s.method, s.query.as_str()),
            ("labeled_line", "how are refunds retried")
        );
        let s = sanitize(&format!("{filler} Which database do we use? {filler}"));
        assert_eq!(
            (s.method, s.query.as_str()),
            ("question_sentence", "Which database do we use?")
        );
        let s = sanitize(&filler.repeat(2));
        assert_eq!(s.method, "tail_truncation");
        assert!(s.was_sanitized && s.clean_length == MAX_QUERY && s.original_length > MAX_QUERY);
    }

    #[test]
    fn patterns_match_paths_basenames_and_globs() {
        assert!(pattern_matches(".codex", ".codex/sessions/a.json"));
        assert!(pattern_matches("docs", "docs/guide.md"));
        assert!(pattern_matches("*.lock", "sub/Cargo.lock"));
        assert!(pattern_matches("docs/**/*.md", "docs/a/b.md"));
        assert!(!pattern_matches("docs", "src/docsy.rs"));
        assert!(!pattern_matches("", "a"));
    }

    proptest! {
        #[test]
        fn any_call_is_judged_without_panicking(s in "\\PC{0,400}") {
            let v = json!({"args": {"mode": "search", "input_data": {"query": s.clone()}, "options": {"x": s.clone()}}});
            let _ = envelope("memory_query", call(v), QUERY_MODES);
            let q = sanitize(&s.repeat(3));
            prop_assert!(q.clean_length <= MAX_QUERY.max(q.original_length));
            let _ = parse_ref(&s);
        }
    }
}
