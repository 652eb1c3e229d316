//! Subagents (`Agent`, formerly `Task`) and plans (`TodoWrite`, `TaskCreate`/`Update`/`List`/`Get`).

use super::super::lifecycle::meta;
use super::super::text::{str_of, summarize_args, truncate};
use super::super::{Cx, Obs, ToolCall};
use serde_json::{json, Value};

pub(super) fn task_spawn(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let resp = call.response.as_deref();
    let description = str_of(input, "description")
        .or_else(|| str_of(input, "prompt"))
        .unwrap_or("subagent");
    let agent_type =
        str_of(input, "subagent_type").or_else(|| resp.and_then(|r| str_of(r, "agentType")));
    Some(Obs {
        obs_type: "task_spawn",
        content: truncate(description, 500),
        metadata: meta([
            ("agent_type", json!(agent_type)),
            ("status", json!(resp.and_then(|r| str_of(r, "status")))),
            (
                "prompt",
                json!(str_of(input, "prompt").map(|p| truncate(p, 300))),
            ),
        ]),
        ..Obs::default()
    })
}

pub(super) fn plan(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let content = match input.get("todos").and_then(Value::as_array) {
        Some(todos) => todos
            .iter()
            .map(|t| {
                let status = str_of(t, "status").unwrap_or("pending");
                let text = str_of(t, "content")
                    .or_else(|| str_of(t, "description"))
                    .unwrap_or("");
                format!("[{status}] {}", truncate(text, 200))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        None => {
            let subject = str_of(input, "subject").or_else(|| str_of(input, "description"));
            match subject {
                Some(s) => format!("{}: {}", call.name, truncate(s, 300)),
                None => format!("{} {}", call.name, summarize_args(input, 300)),
            }
        }
    };
    let items = input.get("todos").and_then(Value::as_array).map(Vec::len);
    Some(Obs {
        obs_type: "plan",
        content: truncate(content.trim(), 2_000),
        metadata: meta([("items", json!(items))]),
        ..Obs::default()
    })
}
