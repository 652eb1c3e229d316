//! Gemini CLI: its own tool names; the output is `llmContent`, a shell failure only an
//! `Exit Code: N` line inside it, and the turn's last answer is `prompt_response`.

use super::{borrowed, Ingest, TurnEnd};
use crate::ingest::{Cx, ToolCall};
use serde_json::{json, Map, Value};
use std::borrow::Cow;

pub(super) const INGEST: Ingest = Ingest {
    tool_call: gemini,
    turn_end,
    transcript: false,
};

fn turn_end<'a>(cx: &Cx<'a>) -> TurnEnd<'a> {
    (cx.str("prompt_response"), Map::new())
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
    let llm_text = llm.and_then(crate::ingest::text::content_text);
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

#[cfg(test)]
mod tests {
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
