//! Claude Code: the hook schema the others copy (`session_id`, `cwd`, `hook_event_name`;
//! `hookSpecificOutput` for the SessionStart digest).

use super::{claude_fields, hook_specific_output, no_verdict, Event, Harness, Hook, Spec};

pub(super) const SPEC: Spec = Spec {
    harness: Harness::ClaudeCode,
    name: "claude-code",
    aliases: &["claude"],
    title: "Claude Code",
    event,
    envelope: claude_fields,
    payload_in_argument: false,
    verdict: no_verdict,
    session_start_output: hook_specific_output,
    hooks: &[
        Hook {
            timeout_s: 10,
            ..Hook::on("SessionStart")
        },
        Hook::on("UserPromptSubmit"),
        Hook {
            tools: true,
            ..Hook::on("PostToolUse")
        },
        Hook {
            tools: true,
            ..Hook::on("PostToolUseFailure")
        },
        Hook::on("PreCompact"),
        Hook::on("PostCompact"),
        Hook::on("Stop"),
        Hook::on("SubagentStop"),
        Hook::on("StopFailure"),
        Hook {
            timeout_s: 2,
            ..Hook::on("SessionEnd")
        },
    ],
    imports: true,
};

/// Claude Code's event names, which Codex CLI's hooks use as well.
pub(super) fn event(name: &str) -> Option<Event> {
    use Event::*;
    Some(match name {
        "SessionStart" => SessionStart,
        "UserPromptSubmit" => UserPrompt,
        "PostToolUse" => ToolUse,
        "PostToolUseFailure" => ToolFailure,
        "PreCompact" => PreCompact,
        "PostCompact" => PostCompact,
        "Stop" => Stop,
        "SubagentStop" => SubagentStop,
        "StopFailure" => StopFailure,
        "SessionEnd" => SessionEnd,
        _ => return None,
    })
}
