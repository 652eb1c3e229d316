//! Codex CLI rollouts (`~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`, `$CODEX_HOME/sessions`).
//!
//! Each line is `{timestamp, type, payload}`. `session_meta` names the session and its folder;
//! `turn_context` / `task_started` the turn; the user's words come as `event_msg/user_message`
//! (older files only have `response_item/message` with role `user`, wrapped in scaffolding);
//! tool calls are `response_item/function_call` (or `local_shell_call`, `custom_tool_call` for
//! `apply_patch`) paired with their `*_output` by `call_id`, and shell results also appear as
//! `event_msg/exec_command_end` with the exit code; `task_complete` (or the last
//! `agent_message`) ends a turn; `compacted` marks a compaction. They are replayed as the hook
//! events Codex sends live (harness `codex`): UserPromptSubmit with the `turn_id` (the prompt's
//! identity), PostToolUse / PostToolUseFailure with `tool_use_id` = `call_id`, Stop with the last
//! assistant message, PreCompact. Unknown kinds are passed over; broken lines are counted.

use super::{event_id, Counts, Options, Synth};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

const HARNESS: &str = "codex";

/// A tool call waiting for its output.
struct Call {
    name: String,
    input: Value,
}

/// The shell command of a call's arguments, whatever the tool's generation calls it.
fn shell_command(args: &Value) -> Option<String> {
    let c = args
        .get("command")
        .or_else(|| args.get("cmd"))
        .or_else(|| args.get("action").and_then(|a| a.get("command")))?;
    match c {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let parts: Vec<&str> = parts.iter().filter_map(Value::as_str).collect();
            // ["bash", "-lc", "cargo test"] → "cargo test"
            match parts.as_slice() {
                [sh, flag, script]
                    if flag.starts_with('-') && flag.contains('c') && is_shell(sh) =>
                {
                    Some(script.to_string())
                }
                _ => Some(parts.join(" ")),
            }
        }
        _ => None,
    }
}

fn is_shell(s: &str) -> bool {
    matches!(
        Path::new(s).file_name().and_then(|f| f.to_str()),
        Some("bash" | "sh" | "zsh" | "dash")
    )
}

fn is_shell_tool(name: &str) -> bool {
    matches!(
        name,
        "shell" | "exec_command" | "shell_command" | "local_shell" | "container.exec"
    )
}

/// The text and exit code of a call's output: a plain string, a JSON string
/// `{"output": …, "metadata": {"exit_code": …}}`, or the newer "Exit code: N … Output:" text.
fn output_text(out: &Value) -> (String, Option<i64>) {
    let raw = match out {
        Value::String(s) => s.clone(),
        Value::Object(o) => o
            .get("content")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| out.to_string()),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    if let Ok(v) = serde_json::from_str::<Value>(&raw) {
        if let Some(text) = v.get("output").and_then(Value::as_str) {
            let code = v["metadata"]["exit_code"].as_i64();
            return (text.to_string(), code);
        }
    }
    let code = raw
        .lines()
        .take(3)
        .find_map(|l| {
            l.strip_prefix("Exit code:")
                .or_else(|| l.strip_prefix("Process exited with code"))
        })
        .and_then(|c| c.trim().parse().ok());
    let text = match raw.split_once("\nOutput:\n") {
        Some((_, body)) if code.is_some() => body.to_string(),
        _ => raw,
    };
    (text, code)
}

/// Scaffolding Codex puts in user messages: instructions, environment, AGENTS.md.
fn is_scaffolding(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<environment_context>",
        "<user_instructions>",
        "<INSTRUCTIONS>",
        "# AGENTS.md",
        "<turn_aborted>",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

fn message_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

pub(super) fn synthesize(
    path: &Path,
    opts: &Options,
    counts: &Counts,
) -> std::io::Result<Vec<Synth>> {
    let text = std::fs::read(path)?;
    let tp = path.to_string_lossy().into_owned();
    // Older rollouts have no `user_message` events; then the user's `message` items are used.
    let needle: &[u8] = b"\"user_message\"";
    let has_user_events = text.windows(needle.len()).any(|w| w == needle);
    let mut session = String::new();
    let mut cwd = String::new();
    let mut turn = String::new();
    let mut calls: HashMap<String, Call> = HashMap::new();
    let mut done: HashSet<String> = HashSet::new();
    let mut last_message: Option<(String, i64)> = None;
    let mut out = Vec::new();
    for (n, line) in text.split(|&c| c == b'\n').enumerate() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        counts.lines.fetch_add(1, Relaxed);
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            counts.skipped.fetch_add(1, Relaxed);
            continue;
        };
        let (Some(kind), Some(p)) = (v["type"].as_str(), v.get("payload")) else {
            counts.skipped.fetch_add(1, Relaxed);
            continue;
        };
        let at = v["timestamp"]
            .as_str()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0);
        if kind == "session_meta" {
            // A resumed or forked rollout repeats its ancestors' meta: keep the first.
            if session.is_empty() {
                session = p["id"].as_str().unwrap_or("").to_string();
                cwd = p["cwd"].as_str().unwrap_or("").to_string();
            }
            continue;
        }
        if session.is_empty() || cwd.is_empty() {
            // Lines before the header cannot be placed.
            counts.skipped.fetch_add(1, Relaxed);
            continue;
        }
        let ptype = p["type"].as_str().unwrap_or("");
        if let Some(t) = p["turn_id"].as_str().filter(|t| !t.is_empty()) {
            if kind == "turn_context" || ptype == "task_started" || ptype == "user_message" {
                turn = t.to_string();
            }
        }
        // Calls are remembered even before `--since`: their results may come after the cut.
        if let ("response_item", "function_call" | "custom_tool_call" | "local_shell_call") =
            (kind, ptype)
        {
            let id = p["call_id"].as_str().or(p["id"].as_str()).unwrap_or("");
            let name = p["name"]
                .as_str()
                .unwrap_or(if ptype == "local_shell_call" {
                    "local_shell"
                } else {
                    "tool"
                });
            let input = match (&p["arguments"], &p["input"], &p["action"]) {
                (Value::String(a), _, _) => {
                    serde_json::from_str(a).unwrap_or(json!({ "arguments": a }))
                }
                (_, Value::String(patch), _) => json!({ "command": patch }),
                (_, _, a) if !a.is_null() => json!({ "action": a }),
                (a, _, _) => a.clone(),
            };
            calls.insert(
                id.to_string(),
                Call {
                    name: name.to_string(),
                    input,
                },
            );
            continue;
        }
        if !opts.wants(at, &cwd) {
            continue;
        }
        let base = |event: &str| {
            let mut e = json!({
                "session_id": session,
                "cwd": cwd,
                "hook_event_name": event,
                "transcript_path": tp,
            });
            if !turn.is_empty() {
                e["turn_id"] = json!(turn);
            }
            e
        };
        let mut tool_event = |id: &str, text: String, code: Option<i64>, out: &mut Vec<Synth>| {
            let Some(call) = calls.get(id) else {
                return;
            };
            if id.is_empty() || !done.insert(id.to_string()) {
                return; // shell results come twice (event and mirror): the first wins
            }
            let shell = is_shell_tool(&call.name) || call.name == "local_shell";
            let (name, input) = if shell {
                let cmd = shell_command(&call.input).unwrap_or_default();
                ("Bash".to_string(), json!({ "command": cmd }))
            } else {
                (call.name.clone(), call.input.clone())
            };
            let mut e = match code.filter(|&c| c != 0) {
                Some(c) => {
                    let mut e = base("PostToolUseFailure");
                    e["error"] = json!(format!("Exit code {c}\n{text}"));
                    e
                }
                None => {
                    let mut e = base("PostToolUse");
                    e["tool_response"] = json!(text);
                    e
                }
            };
            e["tool_name"] = json!(name);
            e["tool_input"] = input;
            e["tool_use_id"] = json!(id);
            out.push(Synth::new(
                event_id(&[&session, id, "tool"]),
                at,
                HARNESS,
                &e,
            ));
        };
        match (kind, ptype) {
            ("event_msg", "user_message") | ("response_item", "message")
                if kind == "event_msg" || (!has_user_events && p["role"] == "user") =>
            {
                let text = match kind {
                    "event_msg" => p["message"].as_str().unwrap_or("").to_string(),
                    _ => message_text(&p["content"]),
                };
                if text.trim().is_empty() || is_scaffolding(&text) {
                    continue;
                }
                flush_turn(&mut last_message, &session, &base, &mut out);
                let mut e = base("UserPromptSubmit");
                e["prompt"] = json!(text);
                out.push(Synth::new(
                    event_id(&[&session, &n.to_string(), "prompt"]),
                    at,
                    HARNESS,
                    &e,
                ));
            }
            ("event_msg", "exec_command_end") => {
                let id = p["call_id"].as_str().unwrap_or("");
                let text = p["aggregated_output"]
                    .as_str()
                    .or(p["formatted_output"].as_str())
                    .map(str::to_string)
                    .unwrap_or_else(|| {
                        format!(
                            "{}{}",
                            p["stdout"].as_str().unwrap_or(""),
                            p["stderr"].as_str().unwrap_or("")
                        )
                    });
                tool_event(id, text, p["exit_code"].as_i64(), &mut out);
            }
            ("response_item", "function_call_output" | "custom_tool_call_output") => {
                let id = p["call_id"].as_str().unwrap_or("");
                let (text, code) = output_text(&p["output"]);
                tool_event(id, text, code, &mut out);
            }
            ("response_item", "web_search_call") => {
                let query = p["action"]["query"].as_str().unwrap_or("");
                if query.is_empty() {
                    continue;
                }
                let mut e = base("PostToolUse");
                e["tool_name"] = json!("WebSearch");
                e["tool_input"] = json!({ "query": query });
                e["tool_response"] = json!({ "results": [] });
                let id = p["id"]
                    .as_str()
                    .map(str::to_string)
                    .unwrap_or(n.to_string());
                e["tool_use_id"] = json!(id);
                out.push(Synth::new(
                    event_id(&[&session, &id, "tool"]),
                    at,
                    HARNESS,
                    &e,
                ));
            }
            ("response_item", "message") if !has_user_events && p["role"] == "assistant" => {
                let text = message_text(&p["content"]);
                if !text.trim().is_empty() {
                    last_message = Some((text, at));
                }
            }
            ("event_msg", "agent_message") => {
                if let Some(m) = p["message"].as_str().filter(|m| !m.trim().is_empty()) {
                    last_message = Some((m.to_string(), at));
                }
            }
            ("event_msg", "task_complete") => {
                if let Some(m) = p["last_agent_message"]
                    .as_str()
                    .filter(|m| !m.trim().is_empty())
                {
                    last_message = Some((m.to_string(), at));
                }
                flush_turn(&mut last_message, &session, &base, &mut out);
            }
            ("compacted", _) => {
                let mut e = base("PreCompact");
                e["trigger"] = json!("auto");
                out.push(Synth::new(
                    event_id(&[&session, &n.to_string(), "compact"]),
                    at,
                    HARNESS,
                    &e,
                ));
            }
            ("session_meta" | "turn_context" | "response_item" | "event_msg", _) => {}
            // A record kind this version of nmem does not know.
            _ => {
                counts.skipped.fetch_add(1, Relaxed);
            }
        }
    }
    if !session.is_empty() {
        let base = |event: &str| json!({"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": tp});
        flush_turn(&mut last_message, &session, &base, &mut out);
    }
    Ok(out)
}

/// The turn's end (a Stop with the agent's last message), once per turn.
fn flush_turn(
    last: &mut Option<(String, i64)>,
    session: &str,
    base: &dyn Fn(&str) -> Value,
    out: &mut Vec<Synth>,
) {
    if let Some((message, at)) = last.take() {
        let mut e = base("Stop");
        e["last_assistant_message"] = json!(message);
        let key = format!("{at}:{}", message.len());
        out.push(Synth::new(
            event_id(&[session, &key, "stop"]),
            at,
            HARNESS,
            &e,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shell_commands_of_every_generation() {
        assert_eq!(
            shell_command(&json!({"command": ["bash", "-lc", "cargo test -p x"]})).as_deref(),
            Some("cargo test -p x")
        );
        assert_eq!(
            shell_command(&json!({"command": ["ls", "-la"]})).as_deref(),
            Some("ls -la")
        );
        assert_eq!(
            shell_command(&json!({"cmd": "rg foo"})).as_deref(),
            Some("rg foo")
        );
        assert_eq!(shell_command(&json!({"x": 1})), None);
    }

    #[test]
    fn outputs_of_every_generation() {
        let (t, c) = output_text(&json!(
            "{\"output\":\"FAIL x\\n\",\"metadata\":{\"exit_code\":1,\"duration_seconds\":0.2}}"
        ));
        assert_eq!((t.as_str(), c), ("FAIL x\n", Some(1)));
        let (t, c) = output_text(&json!(
            "Exit code: 2\nWall time: 0.1 seconds\nOutput:\nboom\n"
        ));
        assert_eq!((t.as_str(), c), ("boom\n", Some(2)));
        let (t, c) = output_text(&json!("Success. Updated the following files:\nM a.rs\n"));
        assert_eq!(
            (t.as_str(), c),
            ("Success. Updated the following files:\nM a.rs\n", None)
        );
    }
}
