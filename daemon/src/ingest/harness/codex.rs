//! Codex CLI: Claude Code's tool calls, except that a failed shell command is a PostToolUse
//! whose text starts "Exit code: N" (read by `nmem_proto::harness::codex`, which `nmem import`
//! uses for rollouts too). Its legacy `notify` reports turn ends only.

use super::{last_assistant_message, no_tool_call, Ingest, TurnEnd};
use crate::ingest::lifecycle::meta;
use crate::ingest::{Cx, ToolCall};
use nmem_proto::harness::codex::{exit_code, shell_output};
use serde_json::json;

pub(super) const INGEST: Ingest = Ingest {
    tool_call,
    turn_end: last_assistant_message,
    transcript: false,
};

pub(super) const NOTIFY_INGEST: Ingest = Ingest {
    tool_call: no_tool_call,
    turn_end: notify_turn_end,
    transcript: false,
};

fn notify_turn_end<'a>(cx: &Cx<'a>) -> TurnEnd<'a> {
    (
        cx.str("last-assistant-message"),
        meta([("turn_id", json!(cx.str("turn-id")))]),
    )
}

fn tool_call<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    let mut call = super::claude_code::tool_call(cx)?;
    if call.failure.is_none() {
        if let Some(text) = cx.str("tool_response") {
            if let Some(code) = exit_code(text).filter(|&c| c != 0) {
                let body = shell_output(text);
                call.failure = Some((format!("Exit code {code}\n{body}"), Some(code)));
            }
        }
    }
    Some(call)
}
