//! `nmem search | get | timeline | recent | save`: the MCP tools on the command line. Readable
//! tables by default, `--json` for scripts. Exit 0 on success (an empty result included), 1 when
//! the daemon says the request is wrong, 2 when it cannot be reached. The tables are
//! [`crate::render`]'s, which renders the MCP tools' text too.

use crate::daemon_client::{post, CallError};
use crate::render::{self, For, Text};
use nmem_proto::query::{
    GetRequest, Observation, OneOrMany, OrderBy, OriginFilter, RecentRequest, SaveRequest, Saved,
    SearchMode, SearchReply, SearchRequest, Timeline, TimelineRequest, When,
};
use nmem_proto::wire;
use std::process::ExitCode;

/// Which project: `--project NAME`, `--all-projects`, or (neither) the current directory's.
pub fn project_arg(project: Option<String>, all: bool) -> Option<Option<String>> {
    if all {
        Some(None)
    } else {
        project.map(Some)
    }
}

pub(crate) fn cwd() -> Option<String> {
    std::env::current_dir()
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Print a reply: as JSON, or rendered for a person (notes on stderr, the table on stdout).
pub(crate) fn finish<T: serde::Serialize>(
    res: Result<T, CallError>,
    json: bool,
    human: impl FnOnce(&T) -> Text,
) -> ExitCode {
    match res {
        Ok(v) if json => {
            println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(v) => {
            let text = human(&v);
            for n in &text.notes {
                eprintln!("note: {n}");
            }
            // A body of whole lines (full records) ends with its newline already.
            print!("{}", text.body);
            if !text.body.is_empty() && !text.body.ends_with('\n') {
                println!();
            }
            ExitCode::SUCCESS
        }
        Err(CallError::Api { message, .. }) => {
            eprintln!("nmem: {message}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("nmem: {e}");
            ExitCode::from(2)
        }
    }
}

/// `nmem search`'s arguments.
pub struct SearchArgs {
    pub query: Vec<String>,
    pub project: Option<Option<String>>,
    pub types: Vec<String>,
    pub files: Vec<String>,
    pub since: Option<String>,
    pub until: Option<String>,
    pub order: Option<OrderBy>,
    pub mode: Option<SearchMode>,
    pub limit: Option<i64>,
    pub offset: Option<i64>,
    pub json: bool,
    pub explain: bool,
    pub no_docs: bool,
    pub no_knowledge: bool,
    pub status: Vec<String>,
    pub origin: Option<OriginFilter>,
}

pub fn search(a: SearchArgs) -> ExitCode {
    let req = SearchRequest {
        format: None,
        query: a.query.join(" "),
        project: a.project,
        obs_type: (!a.types.is_empty()).then_some(OneOrMany::Many(a.types)),
        files: (!a.files.is_empty()).then_some(OneOrMany::Many(a.files)),
        date_start: a.since.map(When::Text),
        date_end: a.until.map(When::Text),
        order_by: a.order,
        limit: a.limit,
        offset: a.offset,
        include_prompts: None,
        cwd: cwd(),
        mode: a.mode,
        include_docs: a.no_docs.then_some(false),
        include_knowledge: a.no_knowledge.then_some(false),
        knowledge_status: (!a.status.is_empty()).then_some(OneOrMany::Many(a.status)),
        origin: a.origin,
    };
    let explain = a.explain;
    finish(
        post::<_, SearchReply>(wire::PATH_SEARCH, &req),
        a.json,
        |reply| render::search(reply, For::Terminal, explain),
    )
}

pub fn get(ids: Vec<i64>, doc_ids: Vec<i64>, knowledge_ids: Vec<i64>, json: bool) -> ExitCode {
    let req = GetRequest {
        ids,
        doc_ids,
        knowledge_ids,
        format: None,
    };
    finish(
        post::<_, Vec<Observation>>(wire::PATH_OBSERVATIONS, &req),
        json,
        |obs| render::observations(obs, For::Terminal),
    )
}

pub fn timeline(
    anchor: Option<i64>,
    doc_anchor: Option<i64>,
    query: Option<String>,
    before: Option<i64>,
    after: Option<i64>,
    project: Option<Option<String>>,
    json: bool,
) -> ExitCode {
    let req = TimelineRequest {
        format: None,
        anchor,
        doc_anchor,
        query,
        before,
        after,
        project,
        cwd: cwd(),
    };
    finish(post::<_, Timeline>(wire::PATH_TIMELINE, &req), json, |t| {
        render::timeline(t, For::Terminal)
    })
}

pub fn recent(
    project: Option<Option<String>>,
    limit: Option<i64>,
    all: bool,
    json: bool,
) -> ExitCode {
    let req = RecentRequest {
        format: None,
        project,
        limit,
        all: all.then_some(true),
        cwd: cwd(),
    };
    finish(
        post::<_, Vec<Observation>>(wire::PATH_RECENT, &req),
        json,
        |obs| render::recent(obs, For::Terminal),
    )
}

pub fn save(
    text: Vec<String>,
    title: Option<String>,
    project: Option<String>,
    json: bool,
) -> ExitCode {
    let req = SaveRequest {
        text: text.join(" "),
        title,
        project: project.map(Some),
        cwd: cwd(),
        metadata: None,
    };
    finish(
        post::<_, Saved>(wire::PATH_MEMORIES, &req),
        json,
        render::saved,
    )
}
