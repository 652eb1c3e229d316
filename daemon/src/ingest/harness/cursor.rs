//! Cursor: one event per kind of action (shell, file edit, MCP call) plus a generic
//! postToolUse with its own tool names; `afterAgentResponse` carries the answer, `stop` only a
//! status.

use super::{borrowed, Ingest, TurnEnd};
use crate::ingest::{Cx, ToolCall};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

pub(super) const INGEST: Ingest = Ingest {
    tool_call: cursor,
    turn_end,
    transcript: false,
};

/// Cursor's `stop` carries only a status: a count, not a row.
fn turn_end<'a>(cx: &Cx<'a>) -> TurnEnd<'a> {
    match cx.str("hook_event_name") {
        Some("afterAgentResponse") => (cx.str("text"), Map::new()),
        _ => (None, Map::new()),
    }
}

/// Cursor: one event per kind of action, plus a generic postToolUse.
fn cursor<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    let event = cx.str("hook_event_name")?;
    let (name, input, response): (String, Cow<'a, Value>, Option<Cow<'a, Value>>) = match event {
        "afterShellExecution" => (
            "Bash".into(),
            Cow::Owned(json!({ "command": cx.str("command").unwrap_or("") })),
            Some(Cow::Owned(
                json!({ "stdout": cx.str("output").unwrap_or("") }),
            )),
        ),
        "afterFileEdit" => (
            "MultiEdit".into(),
            Cow::Owned(json!({
                "file_path": cx.str("file_path").unwrap_or(""),
                "edits": cx.obj.get("edits").cloned().unwrap_or(Value::Null),
            })),
            None,
        ),
        "afterMCPExecution" => {
            let tool = cx.str("tool_name").unwrap_or("tool");
            let input = cx
                .str("tool_input")
                .and_then(|s| serde_json::from_str(s).ok())
                .unwrap_or(Value::Null);
            (format!("mcp__cursor__{tool}"), Cow::Owned(input), None)
        }
        "postToolUse" => {
            let raw = cx.str("tool_name")?;
            let name = match raw {
                "Shell" | "run_terminal_cmd" => "Bash".to_string(),
                "read_file" => "Read".to_string(),
                "write" | "create_file" => "Write".to_string(),
                "edit_file" | "search_replace" | "StrReplace" => "Edit".to_string(),
                "grep_search" | "codebase_search" => "Grep".to_string(),
                "file_search" | "glob_file_search" => "Glob".to_string(),
                "list_dir" => "LS".to_string(),
                "web_search" => "WebSearch".to_string(),
                "todo_write" => "TodoWrite".to_string(),
                // `MCP:server:tool` is an MCP call like any other.
                other => match other.strip_prefix("MCP:").and_then(|r| r.split_once(':')) {
                    Some((server, tool)) => format!("mcp__{server}__{tool}"),
                    None => other.to_string(),
                },
            };
            let output = cx.obj.get("tool_output");
            let response =
                output.map(
                    |o| match o.as_str().and_then(|s| serde_json::from_str(s).ok()) {
                        Some(parsed) => Cow::Owned(parsed),
                        None => Cow::Borrowed(o),
                    },
                );
            // Cursor sends `tool_input` as a JSON string on some builds.
            let input = match cx.obj.get("tool_input") {
                Some(Value::String(t)) => serde_json::from_str(t)
                    .map(Cow::Owned)
                    .unwrap_or_else(|_| borrowed(cx.obj.get("tool_input"))),
                other => borrowed(other),
            };
            (name, input, response)
        }
        _ => return None,
    };
    let failure = response.as_deref().and_then(|r| {
        let code = r.get("exitCode").and_then(Value::as_i64)?;
        (code != 0).then(|| {
            let err = r
                .get("stderr")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            (err, Some(code))
        })
    });
    Some(ToolCall {
        name,
        input,
        response,
        tool_use_id: None,
        failure,
    })
}
