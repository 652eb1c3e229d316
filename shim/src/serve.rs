//! `nmem serve`: the MCP stdio server. Its tools are calls to the daemon; it holds no database.
//!
//! Tool failures (bad arguments, no such anchor, a malformed FTS query, the daemon away) are tool
//! results with `isError: true` and a message that says what to do; only unknown tools and broken
//! JSON-RPC are protocol errors.

use crate::daemon_client::{post, CallError};
use nmem_proto::query::{GetRequest, RecentRequest, SaveRequest, SearchRequest, TimelineRequest};
use nmem_proto::wire;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, ErrorData, Implementation, ServerCapabilities,
    ServerConfig,
};
use rmcp::{tool, tool_handler, tool_router, ServerHandler, ServiceExt};
use serde::Serialize;

const INSTRUCTIONS: &str = "nmem is the memory of past coding sessions: files read and edited, \
commands and their errors, searches, prompts and decisions, across projects. Work from narrow to \
wide: `search` first (short previews, ranked; prompts come back whole), then `timeline` around a \
promising id to see what happened before and after it in that session, then `get_observations` \
for the full records you need. `recent_context` shows the latest work of a project; \
`save_memory` keeps a decision or fact for later sessions. `project` defaults to the current \
project; pass null to search every project.";

#[derive(Clone)]
pub struct Nmem {
    cwd: Option<String>,
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Nmem {
    pub fn new() -> Nmem {
        Nmem {
            cwd: std::env::current_dir()
                .ok()
                .map(|p| p.to_string_lossy().into_owned()),
            tool_router: Self::tool_router(),
        }
    }

    #[tool(
        description = "Full-text search of past observations and prompts (BM25). Plain words, \
        paths and identifiers match as written; FTS5 syntax (AND/OR/NOT, \"phrase\", prefix*) is \
        used as is. Filters: project (default: current; null: all), obs_type (one or a list), \
        files, date_start/date_end; order_by relevance|date_desc|date_asc|blended; limit (20, max \
        100), offset. Returns 120-character previews with ids for timeline and get_observations."
    )]
    async fn search(
        &self,
        Parameters(mut req): Parameters<SearchRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        req.cwd = req.cwd.or_else(|| self.cwd.clone());
        call(wire::PATH_SEARCH, req).await
    }

    #[tool(
        description = "Full observations by id (at most 50), in the order given. Ids that no \
        longer exist are left out."
    )]
    async fn get_observations(
        &self,
        Parameters(req): Parameters<GetRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        call(wire::PATH_OBSERVATIONS, req).await
    }

    #[tool(
        description = "What happened around an observation in its session, in time order: \
        `anchor` (an id) or `query` (anchors on the best match), `before`/`after` (5 each, max 50)."
    )]
    async fn timeline(
        &self,
        Parameters(mut req): Parameters<TimelineRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        req.cwd = req.cwd.or_else(|| self.cwd.clone());
        call(wire::PATH_TIMELINE, req).await
    }

    #[tool(
        description = "The latest observations of a project (default: current; null: all), \
        newest first, one per file, backfilled from other projects. limit 30, max 100."
    )]
    async fn recent_context(
        &self,
        Parameters(mut req): Parameters<RecentRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        req.cwd = req.cwd.or_else(|| self.cwd.clone());
        call(wire::PATH_RECENT, req).await
    }

    #[tool(
        description = "Remember something for later sessions (a decision, a convention, a \
        fact): `text` required, `title` and `project` optional. Returns its id and project."
    )]
    async fn save_memory(
        &self,
        Parameters(mut req): Parameters<SaveRequest>,
    ) -> Result<CallToolResult, ErrorData> {
        req.cwd = req.cwd.or_else(|| self.cwd.clone());
        call(wire::PATH_MEMORIES, req).await
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
}

/// One daemon call, off the async threads; every failure becomes a tool error.
async fn call<B: Serialize + Send + 'static>(
    path: &'static str,
    body: B,
) -> Result<CallToolResult, ErrorData> {
    let res = tokio::task::spawn_blocking(move || post::<B, serde_json::Value>(path, &body))
        .await
        .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
    Ok(match res {
        Ok(v) => CallToolResult::success(vec![Content::text(
            serde_json::to_string_pretty(&v).unwrap_or_default(),
        )]),
        Err(CallError::Api { code, message }) => {
            CallToolResult::error(vec![Content::text(format!("{message} ({code})"))])
        }
        Err(e @ CallError::Unavailable(_)) => {
            CallToolResult::error(vec![Content::text(e.to_string())])
        }
    })
}

/// Run the server on stdin/stdout until the client goes away.
pub fn run() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let service = Nmem::new().serve(rmcp::transport::stdio()).await?;
        service.waiting().await?;
        anyhow::Ok(())
    })
}
