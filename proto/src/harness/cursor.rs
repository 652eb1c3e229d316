//! Cursor: camelCase events, one per kind of action; the session is `conversation_id`, the
//! folder the first workspace root; it waits for a verdict on beforeSubmitPrompt, and takes the
//! digest as `additional_context`. It keeps its chats in a database, so `nmem import` has no
//! reader for it.

use super::{session, string, Event, Fields, Harness, Hook, Rejection, Spec};
use serde_json::{Map, Value};

pub(super) const SPEC: Spec = Spec {
    harness: Harness::Cursor,
    name: "cursor",
    aliases: &[],
    title: "Cursor",
    event,
    envelope,
    payload_in_argument: false,
    verdict,
    session_start_output: |wrapped| serde_json::json!({ "additional_context": wrapped }),
    // Cursor's hooks take no timeout: `timeout_s` is not written.
    hooks: &[
        Hook::on("sessionStart"),
        Hook::on("sessionEnd"),
        Hook::on("beforeSubmitPrompt"),
        Hook::on("afterShellExecution"),
        Hook::on("afterFileEdit"),
        Hook::on("afterMCPExecution"),
        Hook::on("postToolUse"),
        Hook::on("afterAgentResponse"),
        Hook::on("stop"),
    ],
    imports: false,
};

fn event(name: &str) -> Option<Event> {
    use Event::*;
    Some(match name {
        "sessionStart" => SessionStart,
        "beforeSubmitPrompt" => UserPrompt,
        "afterShellExecution" | "afterFileEdit" | "afterMCPExecution" | "postToolUse" => ToolUse,
        "afterAgentResponse" | "stop" => Stop,
        "sessionEnd" => SessionEnd,
        _ => return None,
    })
}

fn envelope(obj: &Map<String, Value>) -> Result<Fields<'_>, Rejection> {
    // Cursor names the session `conversation_id`; some builds' sessionStart says `session_id`.
    let session_id = match obj.contains_key("conversation_id") {
        true => session(obj, "conversation_id")?,
        false => session(obj, "session_id")?,
    };
    // Cursor has no cwd on most events: the first workspace root is the project.
    let cwd = match obj.get("workspace_roots") {
        Some(Value::Array(roots)) if !roots.is_empty() => match &roots[0] {
            Value::String(s) => s.as_str(),
            _ => return Err(Rejection::WrongType("workspace_roots", "a list of strings")),
        },
        Some(Value::Array(_)) | None | Some(Value::Null) => string(obj, "cwd")?,
        Some(_) => return Err(Rejection::WrongType("workspace_roots", "a list of strings")),
    };
    Ok(Fields {
        session_id,
        cwd,
        event_name: string(obj, "hook_event_name")?,
    })
}

/// Cursor waits for a verdict on beforeSubmitPrompt.
fn verdict(event: Event) -> Option<&'static str> {
    (event == Event::UserPrompt).then_some(r#"{"continue":true}"#)
}
