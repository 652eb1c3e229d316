//! Session and turn events: starts, prompts, compaction, turn ends, session end.
//!
//! Bookkeeping is kept small: a turn or subagent end without a message only counts on its
//! session (no row), and a SessionStart `compact` after a recorded PreCompact adds no second row
//! (the writer checks, see `store::writer`).

use super::text::{first_line, truncate};
use super::{Cx, NewPrompt, Obs, Record, SessionEffect};
use nmem_proto::harness::Event;
use serde_json::{json, Map, Value};

pub(crate) fn extract(cx: &Cx) -> (Record, SessionEffect) {
    match cx.event {
        Event::SessionStart => session_start(cx),
        Event::UserPrompt => user_prompt(cx),
        Event::PreCompact => {
            let trigger = cx.str("trigger").unwrap_or("auto");
            let instructions = cx.str("custom_instructions").unwrap_or("").trim();
            let mut content = format!("compaction ({trigger})");
            if !instructions.is_empty() {
                content.push_str(": ");
                content.push_str(&truncate(instructions, cx.limits.message_chars));
            }
            let meta = meta([("trigger", json!(trigger))]);
            (obs("compaction", content, meta), SessionEffect::Compaction)
        }
        Event::PostCompact => {
            let summary = cx.str("compact_summary").unwrap_or("").trim();
            let content = if summary.is_empty() {
                "compaction summary (empty)".to_string()
            } else {
                truncate(summary, cx.limits.summary_chars)
            };
            let meta = meta([("trigger", json!(cx.str("trigger")))]);
            (obs("compact_summary", content, meta), SessionEffect::None)
        }
        // A turn end is worth a row only when it says something (the last assistant message:
        // decisions are often only there); otherwise it only counts, on the session.
        Event::Stop => {
            let (message, meta) = super::harness::turn_end(cx);
            match message.map(str::trim).filter(|m| !m.is_empty()) {
                Some(m) => (
                    obs("turn_end", truncate(m, cx.limits.message_chars), meta),
                    SessionEffect::TurnEnd,
                ),
                None => (Record::Nothing, SessionEffect::TurnEnd),
            }
        }
        Event::SubagentStop => {
            let message = cx.str("last_assistant_message").unwrap_or("").trim();
            if message.is_empty() {
                return (Record::Nothing, SessionEffect::SubagentEnd);
            }
            let meta = meta([
                (
                    "agent_type",
                    json!(cx.str("agent_type").filter(|a| !a.is_empty())),
                ),
                ("agent_id", json!(cx.str("agent_id"))),
            ]);
            (
                obs(
                    "subagent_end",
                    truncate(message, cx.limits.message_chars),
                    meta,
                ),
                SessionEffect::SubagentEnd,
            )
        }
        Event::StopFailure => {
            let kind = cx.str("error").unwrap_or("unknown");
            let mut content = format!("API error: {kind}");
            if let Some(d) = cx.str("error_details").filter(|d| !d.is_empty()) {
                content.push_str(" (");
                content.push_str(&first_line(d, 200));
                content.push(')');
            }
            let meta = meta([("error", json!(kind))]);
            (obs("api_error", content, meta), SessionEffect::None)
        }
        Event::SessionEnd => {
            let reason = cx.str("reason").map(str::to_string);
            let content = format!("session ended ({})", reason.as_deref().unwrap_or("unknown"));
            let meta = meta([("reason", json!(reason))]);
            (
                obs("session_end", content, meta),
                SessionEffect::End { reason },
            )
        }
        Event::ToolUse | Event::ToolFailure => (Record::Nothing, SessionEffect::None),
    }
}

fn session_start(cx: &Cx) -> (Record, SessionEffect) {
    let source = cx.str("source").unwrap_or("startup").to_string();
    let obs_type = match source.as_str() {
        "resume" => "session_resume",
        "clear" => "session_clear",
        "compact" => "session_compact",
        "fork" => "session_fork",
        _ => "session_start",
    };
    let model = cx.str("model").map(str::to_string);
    let title = cx.str("session_title").map(str::to_string);
    let meta = meta([("model", json!(model)), ("title", json!(title))]);
    let effect = SessionEffect::Start {
        source: source.clone(),
        model,
        title,
        transcript_path: cx.str("transcript_path").map(str::to_string),
    };
    (obs(obs_type, source, meta), effect)
}

fn user_prompt(cx: &Cx) -> (Record, SessionEffect) {
    let text = cx.str("prompt").unwrap_or("").trim();
    if text.is_empty() {
        return (Record::Nothing, SessionEffect::None);
    }
    let uid = cx
        .str("prompt_id")
        .or_else(|| cx.str("turn_id"))
        .or_else(|| cx.str("generation_id"));
    let prompt = NewPrompt {
        source: "user",
        content: truncate(text, cx.limits.prompt_chars),
        prompt_uid: uid.map(str::to_string),
    };
    (Record::Prompt(prompt), SessionEffect::None)
}

fn obs(obs_type: &'static str, content: String, metadata: Map<String, Value>) -> Record {
    Record::Observation(Obs {
        obs_type,
        content,
        metadata,
        ..Obs::default()
    })
}

/// A metadata object without its null fields.
pub(crate) fn meta<const N: usize>(pairs: [(&str, Value); N]) -> Map<String, Value> {
    pairs
        .into_iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
}
