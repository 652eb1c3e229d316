//! Claude Code: the names and shapes the tool extractors are written for; a failed call is its
//! own event (PostToolUseFailure) whose error text starts "Exit code N".

use super::{borrowed, last_assistant_message, Ingest};
use crate::ingest::{Cx, ToolCall};
use nmem_proto::harness::Event;
use std::borrow::Cow;

pub(super) const INGEST: Ingest = Ingest {
    tool_call,
    turn_end: last_assistant_message,
    transcript: true,
};

/// Claude Code's tool call, and Codex's (which copies its hook schema).
pub(super) fn tool_call<'a>(cx: &Cx<'a>) -> Option<ToolCall<'a>> {
    let name = cx.str("tool_name")?.to_string();
    let failure = (cx.event == Event::ToolFailure).then(|| {
        let err = cx.str("error").unwrap_or("").to_string();
        let code = exit_code_prefix(&err);
        (err, code)
    });
    Some(ToolCall {
        name,
        input: borrowed(cx.obj.get("tool_input")),
        response: cx.obj.get("tool_response").map(Cow::Borrowed),
        tool_use_id: cx.str("tool_use_id"),
        failure,
    })
}

/// "Exit code 2\n…" (Claude Code's failure text).
fn exit_code_prefix(err: &str) -> Option<i64> {
    let rest = err.strip_prefix("Exit code ")?;
    rest.split(|c: char| !c.is_ascii_digit() && c != '-')
        .next()?
        .parse()
        .ok()
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
    }
}
