//! Gemini CLI: Claude Code's payload fields under its own event names.

use super::{claude_fields, hook_specific_output, no_verdict, Event, Harness, Hook, Spec};

pub(super) const SPEC: Spec = Spec {
    harness: Harness::Gemini,
    name: "gemini",
    aliases: &[],
    title: "Gemini CLI",
    event,
    envelope: claude_fields,
    payload_in_argument: false,
    verdict: no_verdict,
    session_start_output: hook_specific_output,
    hooks: &[
        Hook::on("SessionStart"),
        Hook::on("BeforeAgent"),
        Hook::on("AfterTool"),
        Hook::on("AfterAgent"),
        Hook::on("PreCompress"),
        Hook::on("SessionEnd"),
    ],
    imports: true,
};

fn event(name: &str) -> Option<Event> {
    use Event::*;
    Some(match name {
        "SessionStart" => SessionStart,
        "BeforeAgent" => UserPrompt,
        "AfterTool" => ToolUse,
        "PreCompress" => PreCompact,
        "AfterAgent" => Stop,
        "SessionEnd" => SessionEnd,
        _ => return None,
    })
}
