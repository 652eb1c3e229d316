//! `nmem serve`: the MCP stdio server. Its tools are calls to the daemon; it holds no database.
//!
//! Tool failures (bad arguments, no such anchor, a malformed FTS query, the daemon away) are tool
//! results with `isError: true` and a message that says what to do; only unknown tools and broken
//! JSON-RPC are protocol errors. Broken JSON-RPC is answered by a validating layer in front of
//! rmcp ([`judge`]), which rmcp would otherwise drop without a reply.

use crate::daemon_client::{post, CallError};
use crate::render::{self, For, Text};
use nmem_proto::query::{
    GetRequest, Observation, RecentRequest, SaveRequest, SearchReply, SearchRequest, Timeline,
    TimelineRequest,
};
use nmem_proto::wire;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, ErrorData, Implementation, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

const INSTRUCTIONS: &str = "nmem is the memory of past coding sessions: files read and edited, \
commands and their errors, searches, prompts and decisions, across projects. Work from narrow to \
wide: `search` first (short previews, ranked; prompts come back whole), then `timeline` around a \
promising id to see what happened before and after it in that session, then `get_observations` \
for the full records you need. `recent_context` shows the latest work of a project; \
`save_memory` keeps a decision or fact for later sessions. `project` defaults to the current \
project (the client's first root, else the server's folder); pass null to search every project. \
`format: \"text\"` gives one compact line per item instead of JSON.";

/// What `__IMPORTANT` says (CodexMem's tool list, §2.2).
pub const WORKFLOW: &str = "nmem remembers past coding sessions: files read and edited, commands \
and their errors, searches, prompts and decisions. Use it in three steps, narrow to wide, to \
spend few tokens:
1. `search` with words, names, paths or error text: ranked 120-character previews with ids. \
Filter by project, obs_type, files or dates when you know them.
2. `timeline` around a promising id: what happened before and after it in its session (the \
command that failed, the edit that fixed it).
3. `get_observations` with the few ids you need: the full records.
`recent_context` shows a project's latest work; `save_memory` keeps a decision or fact for later \
sessions. Search before re-discovering something: it may already be known.";

#[derive(Clone)]
pub struct Nmem {
    cwd: Option<String>,
    /// The client's first file root, once asked (`None` inside: it offers none); reset when the
    /// client says its roots changed.
    roots: Arc<tokio::sync::Mutex<Option<Option<String>>>>,
    tool_router: ToolRouter<Self>,
}

/// The path of a `file://` URI (percent-decoded), if it is one.
fn file_uri_path(uri: &str) -> Option<String> {
    let rest = uri.strip_prefix("file://")?;
    // file:///home/x or file://localhost/home/x
    let path = match rest.find('/') {
        Some(0) => rest,
        Some(i) if &rest[..i] == "localhost" => &rest[i..],
        _ => return None,
    };
    percent_encoding::percent_decode_str(path)
        .decode_utf8()
        .ok()
        .map(|p| p.into_owned())
}

impl Nmem {
    /// The folder `project` defaults to: the client's first file root when it offers roots,
    /// else the server's working directory. (Roots are deprecated by SEP-2577, but the clients
    /// in use still send them, and they name the project the user has open.)
    #[allow(deprecated)]
    async fn cwd(&self, peer: &Peer<RoleServer>) -> Option<String> {
        let mut cached = self.roots.lock().await;
        if cached.is_none() {
            let offers = peer
                .peer_info()
                .is_some_and(|i| i.capabilities.roots.is_some());
            let root = if offers {
                match tokio::time::timeout(Duration::from_secs(2), peer.list_roots()).await {
                    Ok(Ok(r)) => r.roots.iter().find_map(|r| file_uri_path(&r.uri)),
                    _ => None,
                }
            } else {
                None
            };
            *cached = Some(root);
        }
        cached.clone().flatten().or_else(|| self.cwd.clone())
    }
}

#[tool_router]
impl Nmem {
    pub fn new() -> Nmem {
        Nmem {
            cwd: std::env::current_dir()
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
            roots: Default::default(),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Search past observations and prompts by words and by meaning. Ask in \
        plain words or paste names, paths and error text; FTS5 syntax (AND/OR/NOT, \"phrase\", \
        prefix*) is used as is. mode: hybrid (default with an embedding model) | lexical | \
        semantic. Filters: project (default: current; null: all), obs_type (one or a list), \
        files, date_start/date_end; origin this-device|my-devices|team (synced memory: captured \
        here, on the user's devices, by teammates); order_by relevance|date_desc|date_asc|blended; \
        limit (20, max 100), offset. Returns {items, mode, query, notes}: each item a 120-character \
        preview with its id (for timeline and get_observations), retrieval_sources (how it was \
        found) and origin (where it was captured)."
    )]
    async fn search(
        &self,
        Parameters(mut req): Parameters<SearchRequest>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if req.cwd.is_none() {
            req.cwd = self.cwd(&ctx.peer).await;
        }
        let format = req.format.take();
        call(wire::PATH_SEARCH, req, format, |r: &SearchReply| {
            render::search(r, For::Model, false)
        })
        .await
    }

    #[tool(
        description = "Full observations by id (at most 50), in the order given. Ids that no \
        longer exist are left out."
    )]
    async fn get_observations(
        &self,
        Parameters(mut req): Parameters<GetRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        let format = req.format.take();
        call(
            wire::PATH_OBSERVATIONS,
            req,
            format,
            |o: &Vec<Observation>| render::observations(o, For::Model),
        )
        .await
    }

    #[tool(
        description = "What happened around an observation in its session, in time order: \
        `anchor` (an id) or `query` (anchors on the best match), `before`/`after` (5 each, max 50). \
        `doc_anchor` (a `doc` result's id) instead: the chunks around it in its document, in order."
    )]
    async fn timeline(
        &self,
        Parameters(mut req): Parameters<TimelineRequest>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if req.cwd.is_none() {
            req.cwd = self.cwd(&ctx.peer).await;
        }
        let format = req.format.take();
        call(wire::PATH_TIMELINE, req, format, |t: &Timeline| {
            render::timeline(t, For::Model)
        })
        .await
    }

    #[tool(
        description = "The latest observations of a project (default: current; null: all), \
        newest first, one per file, backfilled from other projects; actions only unless \
        `all` (session bookkeeping too). limit 30, max 100."
    )]
    async fn recent_context(
        &self,
        Parameters(mut req): Parameters<RecentRequest>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if req.cwd.is_none() {
            req.cwd = self.cwd(&ctx.peer).await;
        }
        let format = req.format.take();
        call(wire::PATH_RECENT, req, format, |o: &Vec<Observation>| {
            render::recent(o, For::Model)
        })
        .await
    }

    #[tool(
        name = "__IMPORTANT",
        description = "Read this first: how to use nmem's memory well (the search → timeline → \
        get_observations workflow). Takes no arguments; any given are ignored."
    )]
    async fn important(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![Content::text(WORKFLOW)]))
    }

    #[tool(
        description = "Remember something for later sessions (a decision, a convention, a \
        fact): `text` required, `title` and `project` optional. Returns its id and project."
    )]
    async fn save_memory(
        &self,
        Parameters(mut req): Parameters<SaveRequest>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if req.cwd.is_none() {
            req.cwd = self.cwd(&ctx.peer).await;
        }
        call(wire::PATH_MEMORIES, req, None, render::saved).await
    }
}

impl Default for Nmem {
    fn default() -> Self {
        Nmem::new()
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Nmem {
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(ServerCapabilities::builder().enable_tools().build());
        info.server_info = Implementation::new("nmem", nmem_proto::VERSION);
        info.instructions = Some(INSTRUCTIONS.into());
        info
    }

    async fn on_roots_list_changed(&self, _context: NotificationContext<RoleServer>) {
        *self.roots.lock().await = None;
    }
}

/// One daemon call, off the async threads; every failure becomes a tool error. The JSON format
/// is the daemon's reply as it came; the text format is `text`'s rendering of the typed reply
/// `R` ([`crate::render`], shared with the CLI).
async fn call<B: Serialize + Send + 'static, R: DeserializeOwned>(
    path: &'static str,
    body: B,
    format: Option<String>,
    text_of: impl FnOnce(&R) -> Text,
) -> Result<CallToolResult, ErrorData> {
    let text = match format.as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("json") => false,
        Some("text" | "markdown" | "md" | "compact") => true,
        Some(other) => {
            return Ok(CallToolResult::error(vec![Content::text(format!(
            "format must be \"json\" (structured) or \"text\" (one line per item), not {other:?}"
        ))]))
        }
    };
    let res = tokio::task::spawn_blocking(move || post::<B, Value>(path, &body))
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(match res {
        Ok(v) if text => match serde_json::from_value::<R>(v) {
            Ok(r) => CallToolResult::success(vec![Content::text(text_of(&r).joined())]),
            Err(e) => CallToolResult::error(vec![Content::text(format!(
                "nmemd's reply is not what this nmem reads ({e}); is nmemd the same version \
                 (`nmemctl status`)? Ask with format \"json\" meanwhile"
            ))]),
        },
        Ok(v) => CallToolResult::success(vec![Content::text(
            serde_json::to_string_pretty(&v).unwrap_or_default(),
        )]),
        Err(CallError::Api { code, message, .. }) => {
            CallToolResult::error(vec![Content::text(format!("{message} ({code})"))])
        }
        Err(e) => CallToolResult::error(vec![Content::text(e.to_string())]),
    })
}

/// The longest request line read; a longer one is answered with an error and skipped.
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// What the validating layer does with one line from the client.
#[derive(Debug, PartialEq)]
pub enum Verdict {
    /// A well-formed JSON-RPC message: rmcp handles it.
    Forward,
    /// Nothing to do (a blank line).
    Skip,
    /// Answer this error response (one JSON line) instead.
    Answer(String),
}

/// A JSON-RPC 2.0 error response.
fn error_line(id: &Value, code: i64, message: &str) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
}

/// Judge one line as JSON-RPC 2.0 does: -32700 when it is not JSON (invalid UTF-8, NUL bytes,
/// nesting past the parser's limit included), -32600 when it is not a request, notification or
/// response, -32602 when `params` (or a tool call's `arguments`) is not an object. rmcp drops
/// such lines silently, and a client waiting on the id would wait for ever.
pub fn judge(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let null = Value::Null;
    let Ok(text) = std::str::from_utf8(line) else {
        return Verdict::Answer(error_line(
            &null,
            -32700,
            "Parse error: the line is not UTF-8",
        ));
    };
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => return Verdict::Answer(error_line(&null, -32700, &format!("Parse error: {e}"))),
    };
    let Value::Object(o) = &v else {
        let why = if v.is_array() {
            "Invalid Request: batches are not supported; send one message per line"
        } else {
            "Invalid Request: a message is a JSON object"
        };
        return Verdict::Answer(error_line(&null, -32600, why));
    };
    let id = match o.get("id") {
        None => None,
        Some(id @ (Value::String(_) | Value::Number(_) | Value::Null)) => Some(id),
        Some(_) => {
            return Verdict::Answer(error_line(
                &null,
                -32600,
                "Invalid Request: `id` must be a string, a number or null",
            ))
        }
    };
    let reply_id = id.unwrap_or(&null);
    if o.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Verdict::Answer(error_line(
            reply_id,
            -32600,
            "Invalid Request: `jsonrpc` must be \"2.0\"",
        ));
    }
    match o.get("method") {
        Some(Value::String(method)) => {
            match o.get("params") {
                None | Some(Value::Object(_)) => {}
                Some(_) => {
                    return Verdict::Answer(error_line(
                        reply_id,
                        -32602,
                        "Invalid params: `params` must be an object",
                    ))
                }
            }
            if method == "tools/call" {
                match o.get("params").and_then(|p| p.get("arguments")) {
                    None | Some(Value::Object(_)) | Some(Value::Null) => {}
                    Some(_) => {
                        return Verdict::Answer(error_line(
                            reply_id,
                            -32602,
                            "Invalid params: a tool's `arguments` must be an object",
                        ))
                    }
                }
            }
            Verdict::Forward
        }
        Some(_) => Verdict::Answer(error_line(
            reply_id,
            -32600,
            "Invalid Request: `method` must be a string",
        )),
        // A response to one of the server's requests (roots/list).
        None if id.is_some() && (o.contains_key("result") || o.contains_key("error")) => {
            Verdict::Forward
        }
        None => Verdict::Answer(error_line(
            reply_id,
            -32600,
            "Invalid Request: no `method` (nor `result` or `error`)",
        )),
    }
}

/// Run the server on stdin/stdout until the client goes away. Lines from stdin pass through
/// [`judge`] first: rmcp sees only well-formed messages, and every other line gets its error
/// response here. Both write whole lines to stdout through one task, so replies never mix.
/// Which contract `nmem serve` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// nmem's own tools (ADR-006's five, and `__IMPORTANT`).
    #[default]
    Nmem,
    /// codex-mem's MCP API v1 (`crate::codex_mem`).
    CodexMem,
    /// memory-substrate's four tools (`crate::substrate`).
    Substrate,
}

pub fn run(profile: Profile) -> anyhow::Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let (to_rmcp, rmcp_in) = tokio::io::duplex(1 << 20);
        let (rmcp_out, from_rmcp) = tokio::io::duplex(1 << 20);
        let (answers_tx, mut answers) = tokio::sync::mpsc::channel::<String>(64);

        // stdin → judge → rmcp, or an error answer.
        let reader = tokio::spawn(async move {
            let mut to_rmcp = to_rmcp;
            let mut stdin = BufReader::with_capacity(64 * 1024, tokio::io::stdin());
            loop {
                let mut line = Vec::new();
                let n = (&mut stdin)
                    .take(MAX_LINE as u64 + 1)
                    .read_until(b'\n', &mut line)
                    .await?;
                if n == 0 {
                    break;
                }
                if line.len() > MAX_LINE && line.last() != Some(&b'\n') {
                    // Skip the rest of the line, bounded in memory.
                    let mut rest = Vec::new();
                    loop {
                        rest.clear();
                        let m = (&mut stdin)
                            .take(1 << 20)
                            .read_until(b'\n', &mut rest)
                            .await?;
                        if m == 0 || rest.last() == Some(&b'\n') {
                            break;
                        }
                    }
                    let msg = format!("Invalid Request: a line is at most {MAX_LINE} bytes");
                    let _ = answers_tx
                        .send(error_line(&Value::Null, -32600, &msg))
                        .await;
                    continue;
                }
                match judge(&line) {
                    Verdict::Forward => {
                        if line.last() != Some(&b'\n') {
                            line.push(b'\n');
                        }
                        to_rmcp.write_all(&line).await?;
                    }
                    Verdict::Skip => {}
                    Verdict::Answer(a) => {
                        let _ = answers_tx.send(a).await;
                    }
                }
            }
            // EOF: rmcp sees it and the service ends.
            to_rmcp.shutdown().await?;
            std::io::Result::Ok(())
        });

        // rmcp's lines and the error answers → stdout, one whole line at a time.
        let writer = tokio::spawn(async move {
            let mut stdout = tokio::io::stdout();
            let mut from_rmcp = BufReader::new(from_rmcp);
            let (mut rmcp_open, mut answers_open) = (true, true);
            while rmcp_open || answers_open {
                let mut line = Vec::new();
                tokio::select! {
                    n = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                        if n? == 0 {
                            rmcp_open = false;
                            continue;
                        }
                    }
                    a = answers.recv(), if answers_open => match a {
                        Some(a) => {
                            line = a.into_bytes();
                            line.push(b'\n');
                        }
                        None => {
                            answers_open = false;
                            continue;
                        }
                    },
                }
                stdout.write_all(&line).await?;
                stdout.flush().await?;
            }
            std::io::Result::Ok(())
        });

        match profile {
            Profile::Nmem => {
                Nmem::new()
                    .serve((rmcp_in, rmcp_out))
                    .await?
                    .waiting()
                    .await?;
            }
            Profile::CodexMem => {
                crate::codex_mem::CodexMem::new()
                    .serve((rmcp_in, rmcp_out))
                    .await?
                    .waiting()
                    .await?;
            }
            Profile::Substrate => {
                crate::substrate::Substrate::new()
                    .serve((rmcp_in, rmcp_out))
                    .await?
                    .waiting()
                    .await?;
            }
        }
        // The service ended (the client closed stdin, or broke the protocol): stop reading.
        reader.abort();
        let _ = writer.await;
        anyhow::Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::{judge, Verdict};
    use proptest::prelude::*;

    fn code(v: Verdict) -> (i64, serde_json::Value) {
        match v {
            Verdict::Answer(a) => {
                let v: serde_json::Value = serde_json::from_str(&a).unwrap();
                (v["error"]["code"].as_i64().unwrap(), v["id"].clone())
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn broken_json_rpc_is_answered() {
        assert_eq!(code(judge(b"{not json")).0, -32700);
        assert_eq!(code(judge(b"\xff\xfe{}")).0, -32700);
        assert_eq!(
            code(judge(
                b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\x00\"}"
            ))
            .0,
            -32700
        );
        assert_eq!(code(judge("[".repeat(10_000).as_bytes())).0, -32700);
        assert_eq!(code(judge(b"[]")).0, -32600);
        assert_eq!(code(judge(b"42")).0, -32600);
        assert_eq!(
            code(judge(br#"{"jsonrpc":"1.0","id":3,"method":"ping"}"#)),
            (-32600, 3.into())
        );
        assert_eq!(
            code(judge(br#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#)).0,
            -32600
        );
        assert_eq!(
            code(judge(br#"{"jsonrpc":"2.0","id":4}"#)),
            (-32600, 4.into())
        );
        assert_eq!(
            code(judge(br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"search","arguments":"oops"}}"#)),
            (-32602, 7.into())
        );
        assert_eq!(
            code(judge(
                br#"{"jsonrpc":"2.0","id":"x","method":"ping","params":5}"#
            )),
            (-32602, "x".into())
        );
        assert_eq!(
            judge(br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#),
            Verdict::Forward
        );
        assert_eq!(
            judge(br#"{"jsonrpc":"2.0","id":1,"result":{"roots":[]}}"#),
            Verdict::Forward
        );
        assert_eq!(judge(b"  \r\n"), Verdict::Skip);
    }

    proptest! {
        #[test]
        fn any_line_is_judged_without_panicking(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = judge(&bytes);
        }
    }

    #[test]
    fn file_uris() {
        use super::file_uri_path as f;
        assert_eq!(
            f("file:///home/dev/my%20app").as_deref(),
            Some("/home/dev/my app")
        );
        assert_eq!(f("file://localhost/srv/x").as_deref(), Some("/srv/x"));
        assert_eq!(f("file:///a/%zz%").as_deref(), Some("/a/%zz%"));
        // An escape at the very end is decoded too (the hand-rolled loop stopped one short).
        assert_eq!(f("file:///srv/b%41").as_deref(), Some("/srv/bA"));
        assert_eq!(f("https://example.com/x"), None);
        assert_eq!(f("file://otherhost/x"), None);
    }
}
