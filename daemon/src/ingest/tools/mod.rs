//! One extractor per tool family. `extract` routes a normalised [`ToolCall`] by name.

mod agent;
mod files;
mod mcp;
mod search;
mod shell;
mod web;

use super::lifecycle::meta;
use super::text::{head_tail, summarize_args, truncate};
use super::{project, Cx, Obs, ToolCall};
use serde_json::json;

pub(crate) fn extract(cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let name = call.name.as_str();
    if mcp::is_own_tool(name) {
        // nmem's own MCP tools: recording them would feed memory back into memory.
        return None;
    }
    let mut obs = match name {
        "Bash" | "shell" | "exec_command" | "local_shell" => shell::extract(cx, call),
        _ if call.failure.is_some() => tool_error(cx, call),
        "Read" => files::read(cx, call),
        "Write" => files::write(cx, call),
        "Edit" | "MultiEdit" => files::edit(cx, call),
        "NotebookEdit" => files::notebook_edit(cx, call),
        "apply_patch" => files::apply_patch(cx, call),
        "Grep" | "Glob" | "LS" => search::extract(cx, call),
        "WebFetch" => web::fetch(cx, call),
        "WebSearch" => web::search(cx, call),
        "Task" | "Agent" => agent::task_spawn(cx, call),
        "TodoWrite" | "TaskCreate" | "TaskUpdate" | "TaskList" | "TaskGet" => agent::plan(cx, call),
        _ if name.starts_with("mcp__") => mcp::extract(cx, call),
        _ => tool_other(cx, call),
    }?;
    obs.tool_name = Some(call.name.clone());
    obs.tool_use_id = call.tool_use_id.map(str::to_string);
    if let Some(path) = obs.file_path.take() {
        let abs = absolute(&path, cx.cwd);
        obs.rel_path = project::relative(&abs, cx.project.checkout());
        obs.file_path = Some(abs);
    }
    Some(obs)
}

/// A failed call of any tool but the shell.
fn tool_error(cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let (err, code) = call.failure.as_ref()?;
    let head = err
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("failed");
    let mut content = format!("{}: {}", call.name, truncate(head.trim(), 300));
    let args = summarize_args(&call.input, 200);
    if !args.is_empty() {
        content.push('\n');
        content.push_str(&args);
    }
    let file = call
        .input
        .get("file_path")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Some(Obs {
        obs_type: "tool_error",
        file_path: file,
        content,
        metadata: meta([
            ("exit_code", json!(code)),
            (
                "error",
                json!(head_tail(err, cx.limits.output_head, cx.limits.output_tail)),
            ),
        ]),
        ..Obs::default()
    })
}

/// A tool nmem has no extractor for: its name and a short summary of its input.
fn tool_other(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let args = summarize_args(&call.input, 300);
    let content = if args.is_empty() {
        call.name.clone()
    } else {
        format!("{} {args}", call.name)
    };
    Some(Obs {
        obs_type: "tool_other",
        content,
        ..Obs::default()
    })
}

/// Paths are stored absolute: a relative one is taken from the cwd.
fn absolute(path: &str, cwd: &str) -> String {
    if path.starts_with('/') || cwd.is_empty() {
        path.to_string()
    } else {
        let p = path.strip_prefix("./").unwrap_or(path);
        format!("{}/{p}", cwd.trim_end_matches('/'))
    }
}
