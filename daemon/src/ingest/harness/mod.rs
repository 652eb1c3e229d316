//! What the daemon does differently per harness, one module each: its tool calls normalised to
//! Claude Code's names and shapes (so one set of tool extractors under `tools/` serves them
//! all), where its turn end keeps the last answer, and whether its payload names a transcript
//! to read reasoning from. The names, event mapping and envelope are the contract's
//! (`nmem_proto::harness`); this is the daemon's half of the same harness.

mod claude_code;
mod codex;
mod cursor;
mod gemini;

use super::{Cx, ToolCall};
use nmem_proto::harness::Harness;
use serde_json::{Map, Value};
use std::borrow::Cow;

/// A turn end's last assistant message, and metadata to keep with it.
pub(crate) type TurnEnd<'a> = (Option<&'a str>, Map<String, Value>);

/// One harness's ingest row.
pub(crate) struct Ingest {
    /// The tool call of a ToolUse or ToolFailure event, or `None` when it is not one.
    pub tool_call: for<'a, 'b> fn(&'b Cx<'a>) -> Option<ToolCall<'a>>,
    /// A turn end's last assistant message, and metadata to keep with it.
    pub turn_end: for<'a, 'b> fn(&'b Cx<'a>) -> TurnEnd<'a>,
    /// Its payloads carry `transcript_path`, a Claude Code transcript whose thinking blocks
    /// are read (`ingest::reasoning`).
    pub transcript: bool,
}

/// The harness's row: the daemon's one `match` over harnesses.
pub(crate) fn of(h: Harness) -> &'static Ingest {
    match h {
        Harness::ClaudeCode => &claude_code::INGEST,
        Harness::Codex => &codex::INGEST,
        Harness::CodexNotify => &codex::NOTIFY_INGEST,
        Harness::Gemini => &gemini::INGEST,
        Harness::Cursor => &cursor::INGEST,
    }
}

/// The tool call of the event, in Claude Code's names.
pub(crate) fn tool_call<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    (of(cx.harness).tool_call)(cx)
}

/// The turn end's last assistant message, wherever the harness puts it.
pub(crate) fn turn_end<'a>(cx: &Cx<'a>) -> TurnEnd<'a> {
    (of(cx.harness).turn_end)(cx)
}

/// No tool calls (Codex's notify reports turns only).
fn no_tool_call<'a>(_: &Cx<'a>) -> Option<ToolCall<'a>> {
    None
}

/// Claude Code's turn end, which Codex's hooks copy.
fn last_assistant_message<'a>(cx: &Cx<'a>) -> TurnEnd<'a> {
    (cx.str("last_assistant_message"), Map::new())
}

fn borrowed(v: Option<&Value>) -> Cow<'_, Value> {
    match v {
        Some(v) => Cow::Borrowed(v),
        None => Cow::Owned(Value::Null),
    }
}
