//! Tool calls of each harness, normalised to Claude Code's names and shapes so one set of tool
//! extractors serves them all.

use super::{Cx, ToolCall};
use nmem_proto::harness::{Event, Harness};
use serde_json::{json, Value};
use std::borrow::Cow;

pub(crate) fn tool_call<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    match cx.harness {
        Harness::ClaudeCode | Harness::Codex => claude_like(cx),
        Harness::Gemini => gemini(cx),
        Harness::Cursor => cursor(cx),
        Harness::CodexNotify => None,
    }
}

/// Claude Code, and Codex CLI which copies its hook schema.
fn claude_like<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    let name = cx.str("tool_name")?.to_string();
    let mut failure = (cx.event == Event::ToolFailure).then(|| {
        let err = cx.str("error").unwrap_or("").to_string();
        let code = exit_code_prefix(&err);
        (err, code)
    });
    // Codex reports a failed shell command as a PostToolUse whose text starts "Exit code: N".
    if failure.is_none() && cx.harness == Harness::Codex {
        if let Some(text) = cx.str("tool_response") {
            if let Some(code) = codex_exit_code(text).filter(|&c| c != 0) {
                let body = text.split_once("\nOutput:\n").map_or(text, |x| x.1);
                failure = Some((format!("Exit code {code}\n{body}"), Some(code)));
            }
        }
    }
    Some(ToolCall {
        name,
        input: borrowed(cx.obj.get("tool_input")),
        response: cx.obj.get("tool_response").map(Cow::Borrowed),
        tool_use_id: cx.str("tool_use_id"),
        failure,
    })
}

/// "Exit code 2\n…" (Claude Code's failure text).
/// "Exit code: 1\nWall time: …\nOutput:\n…" (Codex's shell tool output).
fn codex_exit_code(text: &str) -> Option<i64> {
    text.lines()
        .next()?
        .strip_prefix("Exit code:")?
        .trim()
        .parse()
        .ok()
}

fn exit_code_prefix(err: &str) -> Option<i64> {
    let rest = err.strip_prefix("Exit code ")?;
    rest.split(|c: char| !c.is_ascii_digit() && c != '-')
        .next()?
        .parse()
        .ok()
}

/// Gemini CLI: its own tool names; the output is `llmContent`, and a shell failure is only an
/// `Exit Code: N` line inside it.
fn gemini<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    let raw = cx.str("tool_name")?;
    let name = match raw {
        "run_shell_command" => "Bash",
        "read_file" | "read_many_files" => "Read",
        "write_file" => "Write",
        "replace" | "edit" => "Edit",
        "glob" => "Glob",
        "search_file_content" | "grep" => "Grep",
        "list_directory" => "LS",
        "google_web_search" => "WebSearch",
        "web_fetch" => "WebFetch",
        "write_todos" => "TodoWrite",
        "delegate_to_agent" => "Agent",
        other => other,
    }
    .to_string();
    let response = cx.obj.get("tool_response");
    let llm = response.and_then(|r| r.get("llmContent"));
    let llm_text = llm.and_then(super::text::content_text);
    let mut failure = None;
    if name == "Bash" {
        if let Some(text) = &llm_text {
            let code = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("Exit Code:"))
                .and_then(|c| c.trim().parse::<i64>().ok());
            if let Some(c) = code.filter(|&c| c != 0) {
                failure = Some((text.clone(), Some(c)));
            }
        }
    }
    if let Some(err) = response
        .and_then(|r| r.get("error"))
        .filter(|e| !e.is_null())
    {
        let msg = err
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| err.to_string());
        failure = Some((msg, None));
    }
    if let Some((err, _)) = &mut failure {
        if name == "Bash" {
            *err = gemini_shell_output(err);
        }
    }
    let response = match (&llm_text, name.as_str()) {
        (Some(t), "Bash") => Some(Cow::Owned(json!({ "stdout": gemini_shell_output(t) }))),
        (Some(t), _) => Some(Cow::Owned(json!(t))),
        (None, _) => response.map(Cow::Borrowed),
    };
    Some(ToolCall {
        name,
        input: borrowed(cx.obj.get("tool_input")),
        response,
        tool_use_id: None,
        failure,
    })
}

/// The output of Gemini's shell tool without its report around it (`Command:`, `Directory:`,
/// `Exit Code:`, `Signal:`, `Background PIDs:`, `Process Group PGID:`), which would otherwise be
/// taken for the command's last lines; an `Error:` other than `(none)` is kept.
fn gemini_shell_output(text: &str) -> String {
    const AFTER: &[&str] = &[
        "Error:",
        "Exit Code:",
        "Signal:",
        "Background PIDs:",
        "Process Group PGID:",
    ];
    let mut lines = text.lines();
    let Some(first) = lines.by_ref().find_map(|l| l.strip_prefix("Output:")) else {
        return text.to_string();
    };
    let mut out = vec![first.trim_start()];
    let mut error = None;
    for l in lines.by_ref() {
        if AFTER.iter().any(|a| l.starts_with(a)) {
            if let Some(e) = l.strip_prefix("Error:").map(str::trim) {
                error = (e != "(none)" && !e.is_empty()).then_some(l);
            }
            break;
        }
        out.push(l);
    }
    for l in lines {
        if let Some(e) = l.strip_prefix("Error:").map(str::trim) {
            if e != "(none)" && !e.is_empty() {
                error = Some(l);
            }
        }
    }
    if let Some(e) = error {
        out.push(e);
    }
    out.join("\n")
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

fn borrowed(v: Option<&Value>) -> Cow<'_, Value> {
    match v {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(Value::Null),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn exit_code_from_error_text() {
        assert_eq!(
            super::exit_code_prefix("Exit code 2\nsrc/x.ts: error"),
            Some(2)
        );
        assert_eq!(super::exit_code_prefix("Exit code 127"), Some(127));
        assert_eq!(super::exit_code_prefix("boom"), None);
        assert_eq!(
            super::codex_exit_code("Exit code: 1\nWall time: 0.2 seconds\nOutput:\nFAIL"),
            Some(1)
        );
        assert_eq!(super::codex_exit_code("Exit code: 0\nOutput:\nok"), Some(0));
        assert_eq!(super::codex_exit_code("src/a.rs:1: Exit code: 3"), None);
    }

    #[test]
    fn gemini_shell_report_is_not_output() {
        let t = "Command: npm test\nDirectory: (root)\nOutput: first\n Tests  13 passed (13)\nError: (none)\nExit Code: 0\nSignal: (none)\nBackground PIDs: (none)\nProcess Group PGID: 48213";
        assert_eq!(
            super::gemini_shell_output(t),
            "first\n Tests  13 passed (13)"
        );
        let t = "Command: x\nOutput: boom\nError: spawn ENOENT\nExit Code: 127";
        assert_eq!(super::gemini_shell_output(t), "boom\nError: spawn ENOENT");
        assert_eq!(super::gemini_shell_output("plain"), "plain");
    }
}
