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
        _ if rejection(call).is_some() => rejected(call),
        "Bash" | "shell" | "shell_command" | "exec_command" | "local_shell" => {
            shell::extract(cx, call)
        }
        // A background command's output, read later (`run_in_background`).
        "BashOutput" | "TaskOutput" => shell::background_output(cx, call),
        _ if call.failure.is_some() => tool_error(cx, call),
        "Read" => files::read(cx, call),
        "Write" => files::write(cx, call),
        "Edit" | "MultiEdit" => files::edit(cx, call),
        "NotebookEdit" => files::notebook_edit(cx, call),
        "apply_patch" => files::apply_patch(cx, call),
        "Grep" | "Glob" | "LS" => search::extract(cx, call),
        "WebFetch" => web::fetch(cx, call),
        "WebSearch" => web::search(cx, call),
        "Task" | "Agent" | "spawn_agent" => agent::task_spawn(cx, call),
        "TodoWrite" | "update_plan" => agent::plan(cx, call),
        "TaskCreate" | "TaskUpdate" => agent::plan_step(cx, call),
        // Reading the plan changes nothing: nothing to remember.
        "TaskList" | "TaskGet" => None,
        "Skill" => agent::skill(cx, call),
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

/// What the harnesses say when the user declines a tool call: Claude Code's "The user doesn't want to proceed with this tool use…", Codex's
/// "… rejected by user", Gemini's and Cursor's denials. A declined call is not an error: it gets
/// its own type and stays out of "Recent errors".
const REJECTION_MARKERS: &[&str] = &[
    "doesn't want to proceed with this tool use",
    "doesn't want to take this action",
    "tool use was rejected",
    "rejected by user",
    "rejected by the user",
    "declined by user",
    "declined by the user",
    "denied by user",
    "denied by the user",
    "user denied",
    "user rejected",
    "user declined",
    "user did not allow",
    "cancelled by user",
    "canceled by user",
    "cancelled by the user",
    "canceled by the user",
    "request interrupted by user for tool use",
];

/// The declining message, when this call was declined.
fn rejection<'a>(call: &'a ToolCall) -> Option<&'a str> {
    let text = match (&call.failure, call.response.as_deref()) {
        (Some((err, _)), _) => err.as_str(),
        // Codex reports a declined command as its (short) output.
        (None, Some(serde_json::Value::String(s))) if s.len() < 500 => s.as_str(),
        _ => return None,
    };
    is_rejection_text(text).then_some(text)
}

/// Does this tool result say the user declined the call? (Also used to reclassify rows stored
/// before `tool_rejected` existed.)
pub fn is_rejection_text(text: &str) -> bool {
    let lower = text.to_lowercase();
    REJECTION_MARKERS.iter().any(|m| lower.contains(m))
}

/// A declined tool call: the tool, what it would have done, and the user's reason if given.
fn rejected(call: &ToolCall) -> Option<Obs> {
    let text = rejection(call)?;
    let what = match call.input.get("command") {
        Some(serde_json::Value::String(c)) => truncate(c.trim(), 300),
        _ => summarize_args(&call.input, 300),
    };
    let mut content = format!("{} declined by the user", call.name);
    if !what.is_empty() {
        content.push_str(": ");
        content.push_str(&what);
    }
    // Claude Code appends what the user typed after "the user said:".
    let reason = text
        .find("the user said:")
        .map(|i| text[i + "the user said:".len()..].trim())
        .filter(|r| !r.is_empty());
    if let Some(r) = reason {
        content.push_str("\nreason: ");
        content.push_str(&truncate(r, 500));
    }
    let file = call
        .input
        .get("file_path")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    Some(Obs {
        obs_type: "tool_rejected",
        file_path: file,
        content,
        metadata: meta([("message", json!(truncate(text.trim(), 300)))]),
        ..Obs::default()
    })
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
