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

use super::{event_id, Counts, Head, Importer, Options, Reason, Synth};
use nmem_proto::harness::codex::shell_output;
use nmem_proto::harness::Harness;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

const HARNESS: &str = "codex";

/// A tool call waiting for its output.
struct Call {
    name: String,
    input: Value,
    /// The line that made the call.
    line: usize,
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
    // The same reading as the daemon's for live hooks.
    match nmem_proto::harness::codex::exit_code(&raw) {
        Some(code) => (shell_output(&raw).to_string(), Some(code)),
        None => (raw, None),
    }
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

/// Codex CLI's importer.
pub(super) struct Codex;

impl Importer for Codex {
    fn harness(&self) -> Harness {
        Harness::Codex
    }

    fn default_root(&self) -> Option<PathBuf> {
        let dir = std::env::var_os("CODEX_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".codex")));
        dir.map(|p| p.join("sessions"))
    }

    /// `{timestamp, type, payload}` lines, or (older rollouts) a bare first line
    /// `{id, timestamp, instructions, git?}`, or a file named like a rollout.
    fn claims(&self, file: &Head) -> bool {
        let v = &file.first;
        let legacy = v.get("type").is_none()
            && v.get("sessionId").is_none()
            && v["id"].is_string()
            && v["timestamp"].is_string()
            && (v.get("instructions").is_some() || v.get("git").is_some());
        !file.json
            && ((v.get("payload").is_some() && v.get("type").is_some())
                || legacy
                || (file.name.starts_with("rollout-") && v.get("sessionId").is_none()))
    }

    fn synthesize(
        &self,
        path: &Path,
        opts: &Options,
        counts: &Counts,
    ) -> std::io::Result<Vec<Synth>> {
        let text = std::fs::read(path)?;
        Ok(parse(&text, &path.to_string_lossy(), opts, counts))
    }
}

/// The milliseconds a UUIDv7 carries (Codex's thread and turn ids), if it is one.
fn uuid7_ms(id: &str) -> Option<i64> {
    let hex: String = id.chars().filter(|c| *c != '-').collect();
    if hex.len() != 32 || !hex.is_ascii() || hex.as_bytes()[12] != b'7' {
        return None;
    }
    i64::from_str_radix(&hex[..12], 16).ok()
}

/// The working folder of an older rollout, which has no `session_meta`: from the environment
/// message (`<cwd>…</cwd>` or "Current working directory: …"), else a shell call's `workdir`.
fn legacy_cwd(items: &[Value]) -> Option<String> {
    let from_text = items.iter().find_map(|v| {
        if v["type"] != "message" || v["role"] != "user" {
            return None;
        }
        let text = message_text(&v["content"]);
        if let Some((_, rest)) = text.split_once("<cwd>") {
            let cwd = rest.split("</cwd>").next()?.trim();
            return (!cwd.is_empty()).then(|| cwd.to_string());
        }
        text.lines().find_map(|l| {
            let cwd = l.trim().strip_prefix("Current working directory:")?.trim();
            (!cwd.is_empty()).then(|| cwd.to_string())
        })
    });
    from_text.or_else(|| {
        items.iter().find_map(|v| {
            let args: Value = serde_json::from_str(v["arguments"].as_str()?).ok()?;
            let w = args["workdir"].as_str()?.trim();
            (!w.is_empty()).then(|| w.to_string())
        })
    })
}

/// A turn's answer waiting for the turn to end: its text, time and line.
struct Answer {
    text: String,
    at: i64,
    line: usize,
}

/// The rollout's lines as hook events; every line is counted as used or under a `Reason`.
///
/// Three shapes are read: the current `{timestamp, type, payload}` lines; the older one, a bare
/// header `{id, timestamp, instructions, git?}` followed by bare response items, with or without
/// `{"record_type": "state"}` lines between them (no times: the header's is used for all, no
/// folder: it is read from the environment message); and a forked rollout, whose own header is
/// followed by a copy of the parent's lines (the parent's `session_meta` first). The copy is the
/// parent's history, which the parent's own file holds and which Codex did not run again: it is
/// counted, not stored. Codex rewrites the copy's times to the moment of the fork, so the copy
/// ends at the first turn started after the fork began (turn ids are UUIDv7, which carry their
/// time), or, without such ids, at the first line written more than 2 s after the copy began.
pub(super) fn parse(text: &[u8], tp: &str, opts: &Options, counts: &Counts) -> Vec<Synth> {
    let lines: Vec<(usize, &[u8])> = text
        .split(|&c| c == b'\n')
        .enumerate()
        .filter(|(_, l)| !l.iter().all(u8::is_ascii_whitespace))
        .collect();
    let parsed: Vec<Option<Value>> = lines
        .iter()
        .map(|(_, l)| serde_json::from_slice::<Value>(l).ok())
        .collect();
    // The older shape: the first line is a bare header, not a `{type, payload}` line.
    let legacy_header = parsed
        .first()
        .and_then(Option::as_ref)
        .filter(|v| v.get("payload").is_none() && v.get("type").is_none() && v["id"].is_string());
    let legacy = legacy_header.is_some();
    let legacy_at = legacy_header
        .and_then(|h| h["timestamp"].as_str())
        .and_then(nmem_proto::time::parse_rfc3339_ms)
        .unwrap_or(0);
    let legacy_meta = legacy_header.map(|h| {
        let items: Vec<Value> = parsed.iter().skip(1).flatten().cloned().collect();
        json!({"id": h["id"], "cwd": legacy_cwd(&items)})
    });
    if let Some(meta) = &legacy_meta {
        if meta["cwd"].is_null() {
            // Nothing says where this session ran: it cannot be given a project.
            for _ in &lines {
                counts.line();
            }
            counts.skip(Reason::NoFolder, lines.len() as u64);
            return Vec::new();
        }
    }
    // Older rollouts have no `user_message` events; then the user's `message` items are used.
    let needle: &[u8] = b"\"user_message\"";
    let has_user_events = text.windows(needle.len()).any(|w| w == needle);
    let mut session = String::new();
    let mut cwd = String::new();
    let mut turn = String::new();
    // When this session began (its own header), for telling a fork's copy from its own turns.
    let mut own_start = 0i64;
    let mut own_header_at = 0i64;
    // A subagent's rollout: its prompts are the spawning agent's words.
    let mut subagent = false;
    // Inside a fork's copy of its parent: the latest time a copied line can have.
    let mut copy_bound: Option<i64> = None;
    let mut calls: HashMap<String, Call> = HashMap::new();
    // Lines that made tool calls, and whether their call got a result.
    let mut call_lines: HashMap<usize, bool> = HashMap::new();
    let mut done: HashSet<String> = HashSet::new();
    let mut last_message: Option<Answer> = None;
    let mut out = Vec::new();
    let turn_end_key = |a: &Answer| {
        if legacy {
            // One time for the whole file: the line tells the turns apart.
            format!("L{}", a.line)
        } else {
            format!("{}:{}", a.at, a.text.len())
        }
    };
    for (i, ((n, _), v)) in lines.iter().zip(&parsed).enumerate() {
        let n = *n;
        counts.line();
        let Some(v) = v else {
            counts.skip(Reason::NotJson, 1);
            continue;
        };
        let (kind, p, at) = if legacy {
            if i == 0 {
                let meta = legacy_meta.as_ref().expect("legacy header");
                ("session_meta", meta, legacy_at)
            } else if v.get("record_type").is_some() {
                counts.skip(Reason::Bookkeeping, 1);
                continue;
            } else {
                ("response_item", v, legacy_at)
            }
        } else {
            let (Some(kind), Some(p)) = (v["type"].as_str(), v.get("payload")) else {
                counts.skip(Reason::UnknownKind, 1);
                continue;
            };
            let at = v["timestamp"]
                .as_str()
                .and_then(nmem_proto::time::parse_rfc3339_ms)
                .unwrap_or(0);
            (kind, p, at)
        };
        if kind == "session_meta" {
            let id = p["id"].as_str().unwrap_or("");
            if session.is_empty() {
                session = id.to_string();
                cwd = p["cwd"].as_str().unwrap_or("").to_string();
                subagent = p["source"].get("subagent").is_some();
                own_header_at = at;
                own_start = uuid7_ms(id).unwrap_or(at);
                // A fork names its parent: its copy follows, with or without the parent's header.
                if p["forked_from_id"].as_str().is_some_and(|f| !f.is_empty()) {
                    copy_bound = Some(at.saturating_add(2_000));
                }
                counts.used(1);
            } else if id != session && !id.is_empty() {
                // An ancestor's header: what follows is its history, copied by a fork.
                copy_bound =
                    Some(copy_bound.unwrap_or(at.max(own_header_at).saturating_add(2_000)));
                counts.skip(Reason::CopiedFromParent, 1);
            } else {
                // A resumed rollout repeats its own header.
                counts.skip(Reason::Bookkeeping, 1);
            }
            continue;
        }
        if session.is_empty() || cwd.is_empty() {
            // Lines before the header cannot be placed.
            counts.skip(Reason::NoSession, 1);
            continue;
        }
        if let Some(bound) = copy_bound {
            let ended = match p["turn_id"].as_str().and_then(uuid7_ms) {
                Some(t) => t >= own_start,
                None => at > bound,
            };
            if !ended {
                counts.skip(Reason::CopiedFromParent, 1);
                continue;
            }
            copy_bound = None;
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
                    line: n,
                },
            );
            if opts.wants(at, &cwd) {
                call_lines.insert(n, false);
            } else {
                counts.skip(Reason::Filtered, 1);
            }
            continue;
        }
        if !opts.wants(at, &cwd) {
            counts.skip(Reason::Filtered, 1);
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
                counts.skip(Reason::ResultWithoutCall, 1);
                return;
            };
            if id.is_empty() || !done.insert(id.to_string()) {
                // Shell results come twice (event and mirror): the first wins.
                counts.skip(Reason::Mirror, 1);
                return;
            }
            if let Some(answered) = call_lines.get_mut(&call.line) {
                *answered = true;
            }
            counts.used(1);
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
        // A newer answer of the same turn replaces the pending one, which is then not stored.
        let answer = |a: Answer, last: &mut Option<Answer>| {
            if last.replace(a).is_some() {
                counts.skip(Reason::AssistantText, 1);
            }
        };
        match (kind, ptype) {
            ("event_msg", "user_message") | ("response_item", "message")
                if kind == "event_msg" || (!has_user_events && p["role"] == "user") =>
            {
                let text = match kind {
                    "event_msg" => p["message"].as_str().unwrap_or("").to_string(),
                    _ => message_text(&p["content"]),
                };
                if text.trim().is_empty() {
                    counts.skip(Reason::Empty, 1);
                    continue;
                }
                if is_scaffolding(&text) {
                    counts.skip(Reason::Injected, 1);
                    continue;
                }
                if subagent {
                    // The task the parent agent gave: stored with its spawn_agent call.
                    counts.skip(Reason::SubagentPrompt, 1);
                    continue;
                }
                flush_turn(
                    &mut last_message,
                    &session,
                    &base,
                    &turn_end_key,
                    counts,
                    &mut out,
                );
                let mut e = base("UserPromptSubmit");
                e["prompt"] = json!(text);
                out.push(Synth::new(
                    event_id(&[&session, &n.to_string(), "prompt"]),
                    at,
                    HARNESS,
                    &e,
                ));
                counts.used(1);
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
                    counts.skip(Reason::Empty, 1);
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
                counts.used(1);
            }
            ("response_item", "message") if !has_user_events && p["role"] == "assistant" => {
                let text = message_text(&p["content"]);
                if text.trim().is_empty() {
                    counts.skip(Reason::Empty, 1);
                } else {
                    answer(Answer { text, at, line: n }, &mut last_message);
                }
            }
            ("response_item", "message") => {
                // With user events, messages mirror them (user, assistant); developer and system
                // messages are the harness's instructions.
                let why = match p["role"].as_str() {
                    Some("user") if is_scaffolding(&message_text(&p["content"])) => {
                        Reason::Injected
                    }
                    Some("user" | "assistant") => Reason::Mirror,
                    _ => Reason::Injected,
                };
                counts.skip(why, 1);
            }
            ("event_msg", "agent_message") => {
                match p["message"].as_str().filter(|m| !m.trim().is_empty()) {
                    Some(m) => answer(
                        Answer {
                            text: m.to_string(),
                            at,
                            line: n,
                        },
                        &mut last_message,
                    ),
                    None => counts.skip(Reason::Empty, 1),
                }
            }
            ("event_msg", "task_complete") => {
                match p["last_agent_message"]
                    .as_str()
                    .filter(|m| !m.trim().is_empty())
                {
                    Some(m) => answer(
                        Answer {
                            text: m.to_string(),
                            at,
                            line: n,
                        },
                        &mut last_message,
                    ),
                    None => counts.skip(Reason::Bookkeeping, 1),
                }
                flush_turn(
                    &mut last_message,
                    &session,
                    &base,
                    &turn_end_key,
                    counts,
                    &mut out,
                );
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
                counts.used(1);
            }
            // Turn settings, the display log's other events (token counts, reasoning summaries,
            // command starts), encrypted reasoning and undo snapshots.
            ("turn_context" | "event_msg", _)
            | ("response_item", "reasoning" | "ghost_snapshot" | "compaction") => {
                counts.skip(Reason::Bookkeeping, 1);
            }
            // A record kind, or a response item, this version of nmem does not know.
            _ => counts.skip(Reason::UnknownKind, 1),
        }
    }
    if !session.is_empty() {
        let base = |event: &str| json!({"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": tp});
        flush_turn(
            &mut last_message,
            &session,
            &base,
            &turn_end_key,
            counts,
            &mut out,
        );
    }
    // A call line is stored with its result; one whose result never came is not.
    let answered = call_lines.values().filter(|a| **a).count() as u64;
    counts.used(answered);
    counts.skip(
        Reason::CallWithoutResult,
        call_lines.len() as u64 - answered,
    );
    out
}

/// The turn's end (a Stop with the agent's last message), once per turn.
fn flush_turn(
    last: &mut Option<Answer>,
    session: &str,
    base: &dyn Fn(&str) -> Value,
    key: &dyn Fn(&Answer) -> String,
    counts: &Counts,
    out: &mut Vec<Synth>,
) {
    if let Some(a) = last.take() {
        let mut e = base("Stop");
        e["last_assistant_message"] = json!(a.text);
        out.push(Synth::new(
            event_id(&[session, &key(&a), "stop"]),
            a.at,
            HARNESS,
            &e,
        ));
        counts.used(1);
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
    fn uuid7_times() {
        // 2026-09-02T10:00:00Z
        assert_eq!(
            uuid7_ms("01a0618f-a900-71b8-c2d3-e4f5a6b7c8d9"),
            Some(1_788_343_200_000)
        );
        // A v4 uuid carries no time; nor does a short or non-hex id.
        assert_eq!(uuid7_ms("5973b6c0-94b8-487b-a530-2aeb6098ae0e"), None);
        assert_eq!(uuid7_ms("0"), None);
        assert_eq!(uuid7_ms("zzzzzzzz-zzzz-7zzz-zzzz-zzzzzzzzzzzz"), None);
        assert_eq!(uuid7_ms("ééééééééééééééé7"), None);
    }

    #[test]
    fn the_folder_of_an_older_rollout() {
        let msg = |t: &str| json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]});
        assert_eq!(
            legacy_cwd(&[msg(
                "<environment_context>\n  <cwd>/a/b</cwd>\n</environment_context>"
            )])
            .as_deref(),
            Some("/a/b")
        );
        assert_eq!(
            legacy_cwd(&[msg(
                "<environment_context>\nCurrent working directory: /c/d\n</environment_context>"
            )])
            .as_deref(),
            Some("/c/d")
        );
        assert_eq!(
            legacy_cwd(&[json!({"type": "function_call", "arguments": "{\"command\":[\"ls\"],\"workdir\":\"/e\"}"})]).as_deref(),
            Some("/e")
        );
        assert_eq!(legacy_cwd(&[msg("hello")]), None);
    }

    /// A fork whose turn ids carry no time (older Codex): the copy ends at the first line written
    /// more than 2 s after it began.
    #[test]
    fn a_fork_without_timed_turn_ids_ends_its_copy_by_time() {
        let line = |ts: &str, kind: &str, payload: Value| {
            json!({"timestamp": ts, "type": kind, "payload": payload}).to_string()
        };
        let prompt = |text: &str| json!({"type": "user_message", "message": text, "turn_id": "1"});
        let text = [
            line(
                "2026-01-01T10:00:00.000Z",
                "session_meta",
                json!({"id": "fork", "cwd": "/p", "forked_from_id": "parent"}),
            ),
            line(
                "2026-01-01T10:00:00.010Z",
                "session_meta",
                json!({"id": "parent", "cwd": "/p"}),
            ),
            line(
                "2026-01-01T10:00:00.011Z",
                "event_msg",
                prompt("the parent's"),
            ),
            line(
                "2026-01-01T10:00:00.012Z",
                "event_msg",
                json!({"type": "task_complete", "last_agent_message": "done"}),
            ),
            line(
                "2026-01-01T10:00:30.000Z",
                "event_msg",
                prompt("the fork's own"),
            ),
        ]
        .join("\n");
        let counts = Counts::default();
        let events = parse(text.as_bytes(), "t", &super::super::tests::opts(), &counts);
        let prompts: Vec<&Synth> = events
            .iter()
            .filter(|e| e.event == "UserPromptSubmit")
            .collect();
        assert_eq!(prompts.len(), 1);
        assert!(String::from_utf8_lossy(&prompts[0].payload).contains("the fork's own"));
        assert_eq!(prompts[0].session, "fork");
        assert_eq!(counts.skipped(Reason::CopiedFromParent), 3);
        assert!(!events.iter().any(|e| e.event == "Stop"));
        // The same without the parent's header in the copy: `forked_from_id` says a copy follows.
        let without_header: Vec<&str> = text
            .lines()
            .enumerate()
            .filter(|(i, _)| *i != 1)
            .map(|(_, l)| l)
            .collect();
        let counts = Counts::default();
        let events = parse(
            without_header.join("\n").as_bytes(),
            "t",
            &super::super::tests::opts(),
            &counts,
        );
        let prompts: Vec<&Synth> = events
            .iter()
            .filter(|e| e.event == "UserPromptSubmit")
            .collect();
        assert_eq!(prompts.len(), 1);
        assert!(String::from_utf8_lossy(&prompts[0].payload).contains("the fork's own"));
        assert_eq!(counts.skipped(Reason::CopiedFromParent), 2);
    }

    /// A subagent's rollout (spawned by `spawn_agent`): its prompt is the parent agent's task,
    /// counted, not stored as the user's; its tool calls are kept.
    #[test]
    fn a_subagents_rollout_gives_its_calls_but_not_its_prompt() {
        let line = |kind: &str, payload: Value| {
            json!({"timestamp": "2026-01-01T10:00:00.000Z", "type": kind, "payload": payload})
                .to_string()
        };
        let text = [
            line("session_meta", json!({"id": "child", "cwd": "/p",
                "source": {"subagent": {"thread_spawn": {"parent_thread_id": "parent", "depth": 1}}}})),
            line("event_msg", json!({"type": "user_message", "message": "list the refund call sites"})),
            line("response_item", json!({"type": "function_call", "name": "exec_command",
                "arguments": "{\"cmd\":\"rg refunds\"}", "call_id": "c1"})),
            line("response_item", json!({"type": "function_call_output", "call_id": "c1",
                "output": "Exit code: 0\nOutput:\nsrc/a.ts:1\n"})),
        ]
        .join("\n");
        let counts = Counts::default();
        let events = parse(text.as_bytes(), "t", &super::super::tests::opts(), &counts);
        assert!(!events.iter().any(|e| e.event == "UserPromptSubmit"));
        assert_eq!(counts.skipped(Reason::SubagentPrompt), 1);
        assert_eq!(
            events
                .iter()
                .filter(|e| e.event == "PostToolUse" && e.session == "child")
                .count(),
            1
        );
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
