//! Subagents (`Agent`, formerly `Task`; Codex `spawn_agent`), plans (`TodoWrite`, Codex
//! `update_plan`, `TaskCreate`/`TaskUpdate`) and skills (`Skill`).

use super::super::lifecycle::meta;
use super::super::text::{str_of, summarize_args, truncate};
use super::super::{Cx, Obs, ToolCall};
use serde_json::{json, Value};

pub(super) fn task_spawn(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let resp = call.response.as_deref();
    // Codex's `spawn_agent` says `message` (or `task`), Gemini's `delegate_to_agent` `objective`.
    let description = str_of(input, "description")
        .or_else(|| str_of(input, "prompt"))
        .or_else(|| str_of(input, "message"))
        .or_else(|| str_of(input, "task"))
        .or_else(|| str_of(input, "objective"))
        .unwrap_or("subagent");
    let agent_type = str_of(input, "subagent_type")
        .or_else(|| str_of(input, "agent_type"))
        .or_else(|| str_of(input, "agent_name"))
        .or_else(|| resp.and_then(|r| str_of(r, "agentType")));
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

/// A plan, as `(key, text, status)` items: TodoWrite's `todos` (`content`/`status`, older
/// versions an `id`), Gemini's `write_todos` (`description`), Codex's `update_plan`
/// (`plan[{step, status}]`).
fn plan_items(v: &Value) -> Option<Vec<(String, String, String)>> {
    let list = v
        .get("todos")
        .or_else(|| v.get("newTodos"))
        .or_else(|| v.get("plan"))
        .and_then(Value::as_array)?;
    Some(
        list.iter()
            .map(|t| {
                let text = str_of(t, "content")
                    .or_else(|| str_of(t, "description"))
                    .or_else(|| str_of(t, "step"))
                    .unwrap_or("")
                    .trim()
                    .to_string();
                let key = t
                    .get("id")
                    .map(|id| match id {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    })
                    .unwrap_or_else(|| text.clone());
                let status = str_of(t, "status").unwrap_or("pending").to_string();
                (key, text, status)
            })
            .filter(|(_, text, _)| !text.is_empty())
            .collect(),
    )
}

/// A plan update (TodoWrite, `update_plan`, `write_todos`): what changed since the plan before it
/// (items added, started, completed, dropped), not the whole list again. The plan before is the
/// call's own `oldTodos` when the harness sends it, else the last plan seen in this session.
/// An update that changes nothing stores nothing.
pub(super) fn plan(cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let Some(new) = plan_items(input) else {
        return plan_step(cx, call);
    };
    let from_response = call
        .response
        .as_deref()
        .and_then(|r| r.get("oldTodos"))
        .map(|old| plan_items(&serde_json::json!({ "todos": old })).unwrap_or_default());
    // Always remember the new plan, for a harness that does not send the old one.
    let remembered = cx.plans.swap(cx.session_id, new.clone());
    let old = from_response.or(remembered);
    let mut lines = Vec::new();
    let (mut added, mut started, mut completed, mut dropped) = (0, 0, 0, 0);
    match &old {
        None => {
            // The first plan of the session: every item is new.
            for (_, text, status) in &new {
                lines.push(format!("[{status}] {}", truncate(text, 200)));
            }
            added = new.len();
        }
        Some(old) => {
            for (key, text, status) in &new {
                match old.iter().find(|(k, _, _)| k == key) {
                    None => {
                        added += 1;
                        lines.push(format!("added: {}", truncate(text, 200)));
                    }
                    Some((_, _, was)) if was != status => match status.as_str() {
                        "completed" => {
                            completed += 1;
                            lines.push(format!("completed: {}", truncate(text, 200)));
                        }
                        "in_progress" => {
                            started += 1;
                            lines.push(format!("started: {}", truncate(text, 200)));
                        }
                        other => lines.push(format!("{other}: {}", truncate(text, 200))),
                    },
                    Some(_) => {}
                }
            }
            for (key, text, _) in old {
                if !new.iter().any(|(k, _, _)| k == key) {
                    dropped += 1;
                    lines.push(format!("dropped: {}", truncate(text, 200)));
                }
            }
        }
    }
    if lines.is_empty() {
        return None;
    }
    let done = new.iter().filter(|(_, _, s)| s == "completed").count();
    let head = match old {
        None => format!("plan: {} items", new.len()),
        Some(_) => format!("plan update ({done}/{} done)", new.len()),
    };
    Some(Obs {
        obs_type: "plan",
        content: truncate(&format!("{head}\n{}", lines.join("\n")), 2_000),
        metadata: meta([
            ("items", json!(new.len())),
            ("done", json!(done)),
            ("added", json!(added)),
            ("started", json!(started)),
            ("completed", json!(completed)),
            ("dropped", json!(dropped)),
        ]),
        ..Obs::default()
    })
}

/// One step of a plan (`TaskCreate`, `TaskUpdate`): its subject or what changed.
pub(super) fn plan_step(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let subject = str_of(input, "subject").or_else(|| str_of(input, "description"));
    let mut content = match subject {
        Some(s) => format!("{}: {}", call.name, truncate(s, 300)),
        None => format!("{} {}", call.name, summarize_args(input, 300)),
    };
    if subject.is_some() {
        if let Some(status) = str_of(input, "status") {
            content.push_str(&format!(" ({status})"));
        }
    }
    Some(Obs {
        obs_type: "plan",
        content: truncate(content.trim(), 2_000),
        ..Obs::default()
    })
}

/// `Skill`: a skill the agent invoked, by name, with its arguments.
pub(super) fn skill(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let name = str_of(input, "skill")
        .or_else(|| str_of(input, "name"))
        .or_else(|| str_of(input, "command"))
        .unwrap_or("skill")
        .trim();
    let args = match input.get("args").or_else(|| input.get("arguments")) {
        Some(Value::String(s)) => s.replace('\n', " "),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    };
    let mut content = format!("skill {name}");
    if !args.trim().is_empty() {
        content.push(' ');
        content.push_str(&truncate(args.trim(), 500));
    }
    Some(Obs {
        obs_type: "skill",
        content,
        metadata: meta([("skill", json!(name))]),
        ..Obs::default()
    })
}
