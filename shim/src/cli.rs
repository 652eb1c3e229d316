//! `nmem search | get | timeline | recent | save`: the MCP tools on the command line. Readable
//! tables by default, `--json` for scripts. Exit 0 on success (an empty result included), 1 when
//! the daemon says the request is wrong, 2 when it cannot be reached.

use crate::daemon_client::{post, CallError};
use nmem_proto::query::{
    GetRequest, Observation, OneOrMany, OrderBy, RecentRequest, RetrievalSource, SaveRequest,
    Saved, SearchMode, SearchReply, SearchRequest, Timeline, TimelineRequest, When,
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

fn cwd() -> Option<String> {
    std::env::current_dir()
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

fn finish<T: serde::Serialize>(
    res: Result<T, CallError>,
    json: bool,
    human: impl FnOnce(&T),
) -> ExitCode {
    match res {
        Ok(v) if json => {
            println!("{}", serde_json::to_string_pretty(&v).expect("serialises"));
            ExitCode::SUCCESS
        }
        Ok(v) => {
            human(&v);
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
    };
    let explain = a.explain;
    finish(
        post::<_, SearchReply>(wire::PATH_SEARCH, &req),
        a.json,
        |reply| {
            for n in &reply.notes {
                eprintln!("note: {n}");
            }
            if reply.items.is_empty() {
                println!("no results");
            }
            for h in &reply.items {
                let id = if h.kind == "prompt" {
                    format!("p{}", h.id)
                } else {
                    format!("#{}", h.id)
                };
                println!(
                    "{id:>8}  {}  {:<15} {:<14} {}",
                    when(h.timestamp),
                    h.obs_type.as_deref().unwrap_or(""),
                    h.project,
                    one_line(&h.content_preview)
                );
                if explain {
                    println!("{:>10}{}", "", found_by(&h.retrieval_sources));
                }
            }
        },
    )
}

/// How a result was found, in one line: `lexical all_words #1 · semantic #3 (0.61)`.
pub fn found_by(sources: &[RetrievalSource]) -> String {
    sources
        .iter()
        .map(|s| {
            let mut t = s.source.clone();
            if let Some(tier) = &s.tier {
                t.push(' ');
                t.push_str(tier);
            }
            t.push_str(&format!(" #{}", s.rank));
            if let Some(sim) = s.similarity {
                t.push_str(&format!(" ({sim:.2})"));
            }
            if let Some(p) = s.prompt_id {
                t.push_str(&format!(" (prompt p{p})"));
            }
            t
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

pub fn get(ids: Vec<i64>, json: bool) -> ExitCode {
    finish(
        post::<_, Vec<Observation>>(wire::PATH_OBSERVATIONS, &GetRequest { ids, format: None }),
        json,
        |obs| {
            for o in obs {
                print_full(o);
            }
        },
    )
}

pub fn timeline(
    anchor: Option<i64>,
    query: Option<String>,
    before: Option<i64>,
    after: Option<i64>,
    project: Option<Option<String>>,
    json: bool,
) -> ExitCode {
    let req = TimelineRequest {
        format: None,
        anchor,
        query,
        before,
        after,
        project,
        cwd: cwd(),
    };
    finish(post::<_, Timeline>(wire::PATH_TIMELINE, &req), json, |t| {
        for o in &t.before {
            print_row("  ", o);
        }
        print_row("▶ ", &t.anchor);
        for o in &t.after {
            print_row("  ", o);
        }
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
        |obs| {
            if obs.is_empty() {
                println!("nothing recorded yet");
            }
            for o in obs {
                print_row("", o);
            }
        },
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
    };
    finish(post::<_, Saved>(wire::PATH_MEMORIES, &req), json, |s| {
        println!("saved as #{} in {}", s.id, s.project);
    })
}

fn print_row(prefix: &str, o: &Observation) {
    println!(
        "{prefix}#{:<8} {}  {:<15} {}",
        o.id,
        when(o.timestamp),
        o.obs_type,
        one_line(&o.content)
    );
}

fn print_full(o: &Observation) {
    println!(
        "#{} {} {} ({}, session {})",
        o.id,
        o.obs_type,
        when(o.timestamp),
        o.project,
        o.session_id
    );
    if let Some(f) = &o.file_path {
        println!("  file: {f}");
    }
    for line in o.content.lines() {
        println!("  {line}");
    }
    if let Some(m) = &o.metadata {
        println!("  metadata: {m}");
    }
    println!();
}

fn one_line(s: &str) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > 100 {
        format!("{}…", flat.chars().take(99).collect::<String>())
    } else {
        flat
    }
}

/// `2026-08-20 09:14` (UTC).
pub fn when(ms: i64) -> String {
    let t = nmem_proto::time::format_rfc3339_ms(ms);
    format!("{} {}", &t[..10], &t[11..16])
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::when(0), "1970-01-01 00:00");
        assert_eq!(super::when(1_787_217_247_630), "2026-08-20 09:14");
    }
}
