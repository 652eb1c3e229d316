//! Claude Code transcripts (`~/.claude/projects/**/*.jsonl`, subagent transcripts included).
//!
//! Each line is one message of the session; tool calls (`tool_use` blocks of assistant
//! messages) are paired with their results (`tool_result` blocks of the next user message) by
//! id, and replayed as the PostToolUse / PostToolUseFailure events Claude Code sends live. The
//! daemon reads the thinking blocks from the transcript itself (`transcript_path`).
//!
//! A prompt is a user line whose content is a string or (current and IDE Claude Code) an array of
//! text blocks; a user line that carries tool results is never a prompt, and blocks the harness
//! wrote (IDE notes, reminders, command wrappers) are left out of it. Subagent lines
//! (`isSidechain`) give their tool calls but not their prompt (the parent agent's words, already
//! stored with its Task call). Each line names its own session, so a file may hold several.
//! Every line is counted: used, or not stored under a `Reason`.

use super::{event_id, Counts, Head, Importer, Options, Reason, Synth};
use nmem_proto::harness::Harness;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<command-",
        "<local-command-",
        "<system-reminder>",
        "<task-notification>",
        "<ide_",
        "<user-prompt-submit-hook>",
        "Caveat:",
        "[Request interrupted by user",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Line types that hold nothing to remember (titles, checkpoints, hook notices, queue and mode
/// changes; `system` lines other than a compaction are hook and timing notices).
fn is_bookkeeping(kind: &str) -> bool {
    matches!(
        kind,
        "file-history-snapshot"
            | "file-history-delta"
            | "summary"
            | "ai-title"
            | "custom-title"
            | "last-prompt"
            | "agent-name"
            | "attachment"
            | "queue-operation"
            | "progress"
            | "mode"
            | "pr-link"
            | "system"
    )
}

/// What a user line's `message.content` holds.
enum UserLine {
    /// Words typed by someone: a string, or (current and IDE Claude Code) an array of text blocks,
    /// with the harness's own blocks (IDE notes, reminders) left out.
    Text(String),
    /// Only text the harness wrote.
    Injected,
    /// Tool results (a user line that carries any is a result line, never a prompt).
    Results,
    /// Nothing readable (images only, empty).
    Empty,
}

fn user_line(content: &Value) -> UserLine {
    match content {
        Value::String(t) if t.trim().is_empty() => UserLine::Empty,
        Value::String(t) if is_injected(t) => UserLine::Injected,
        Value::String(t) => UserLine::Text(t.clone()),
        Value::Array(blocks) => {
            if blocks.iter().any(|b| b["type"] == "tool_result") {
                return UserLine::Results;
            }
            let texts: Vec<&str> = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .filter(|t| !t.trim().is_empty())
                .collect();
            let typed: Vec<&str> = texts.iter().copied().filter(|t| !is_injected(t)).collect();
            if !typed.is_empty() {
                UserLine::Text(typed.join("\n"))
            } else if !texts.is_empty() {
                UserLine::Injected
            } else {
                UserLine::Empty
            }
        }
        _ => UserLine::Empty,
    }
}

/// Claude Code's importer.
pub(super) struct Claude;

impl Importer for Claude {
    fn harness(&self) -> Harness {
        Harness::ClaudeCode
    }

    fn default_root(&self) -> Option<PathBuf> {
        let dir = std::env::var_os("CLAUDE_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
        dir.map(|p| p.join("projects"))
    }

    /// Any JSON-lines file the other importers did not claim.
    fn claims(&self, file: &Head) -> bool {
        !file.json
    }

    fn synthesize(
        &self,
        path: &Path,
        opts: &Options,
        counts: &Counts,
    ) -> std::io::Result<Vec<Synth>> {
        let file = std::fs::File::open(path)?;
        parse(
            std::io::BufReader::new(file),
            &path.to_string_lossy(),
            opts,
            counts,
        )
    }
}

/// The transcript's lines as hook events; every line is counted as used or under a `Reason`.
/// The session is each line's own `sessionId`: one file may hold several sessions.
pub(super) fn parse(
    reader: impl BufRead,
    tp: &str,
    opts: &Options,
    counts: &Counts,
) -> std::io::Result<Vec<Synth>> {
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    // Lines that made tool calls (by line number), and whether any of their calls got a result.
    let mut call_lines: HashMap<usize, bool> = HashMap::new();
    // Which call came from which line.
    let mut call_line: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (n, line) in reader.split(b'\n').enumerate() {
        let line = line?;
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        counts.line();
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            counts.skip(Reason::NotJson, 1);
            continue;
        };
        let kind = v["type"].as_str().unwrap_or("");
        let at = v["timestamp"]
            .as_str()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0);
        let session = v["sessionId"].as_str().unwrap_or("").to_string();
        let cwd = v["cwd"].as_str().unwrap_or("").to_string();
        let uuid = v["uuid"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| n.to_string());
        let compaction = kind == "system" && v["subtype"] == "compact_boundary";
        if is_bookkeeping(kind) && !compaction {
            counts.skip(Reason::Bookkeeping, 1);
            continue;
        }
        if !matches!(kind, "user" | "assistant" | "system") {
            counts.skip(Reason::UnknownKind, 1);
            continue;
        }
        if session.is_empty() || cwd.is_empty() {
            counts.skip(Reason::NoSession, 1);
            continue;
        }
        if opts.since_ms.is_some_and(|s| at < s) {
            // Still remember tool calls: their results may come after the cut.
            if kind == "assistant" {
                remember(&v, &mut calls);
            }
            counts.skip(Reason::Filtered, 1);
            continue;
        }
        if let Some(p) = &opts.project {
            if Path::new(&cwd).file_name().and_then(|f| f.to_str()) != Some(p.as_str()) {
                counts.skip(Reason::Filtered, 1);
                continue;
            }
        }
        let base = |event: &str| json!({"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": tp});
        match kind {
            "user" => match user_line(&v["message"]["content"]) {
                UserLine::Text(_) | UserLine::Injected
                    if v["isMeta"] == true || v["isCompactSummary"] == true =>
                {
                    counts.skip(Reason::Injected, 1);
                }
                UserLine::Injected => counts.skip(Reason::Injected, 1),
                UserLine::Empty => counts.skip(Reason::Empty, 1),
                // A subagent's prompt is the task its parent agent wrote, and that task is already
                // stored with the Task/Agent call that started it (`task_spawn`). Storing it
                // again as a user prompt would put words in the user's mouth, and its own source
                // would need a schema change for a second copy nobody asked for: it is counted,
                // and the subagent's tool calls are still imported like the live hooks send them.
                UserLine::Text(_) if v["isSidechain"] == true => {
                    counts.skip(Reason::SubagentPrompt, 1);
                }
                UserLine::Text(text) => {
                    let mut e = base("UserPromptSubmit");
                    e["prompt"] = json!(text);
                    if let Some(pid) = v["promptId"].as_str() {
                        e["prompt_id"] = json!(pid);
                    }
                    out.push(Synth::new(
                        event_id(&[&session, &uuid, "prompt"]),
                        at,
                        "claude-code",
                        &e,
                    ));
                    counts.used(1);
                }
                UserLine::Results => {
                    let before = out.len();
                    let blocks = v["message"]["content"].as_array().into_iter().flatten();
                    for b in blocks.filter(|b| b["type"] == "tool_result") {
                        let id = b["tool_use_id"].as_str().unwrap_or_default();
                        let Some((name, input)) = calls.get(id) else {
                            continue;
                        };
                        if let Some(answered) =
                            call_line.get(id).and_then(|l| call_lines.get_mut(l))
                        {
                            *answered = true;
                        }
                        let mut e;
                        if b["is_error"] == true {
                            e = base("PostToolUseFailure");
                            e["error"] = match &b["content"] {
                                Value::String(s) => json!(s),
                                other => json!(crate_text(other)),
                            };
                        } else {
                            e = base("PostToolUse");
                            e["tool_response"] = v["toolUseResult"].clone();
                        }
                        e["tool_name"] = json!(name);
                        e["tool_input"] = input.clone();
                        e["tool_use_id"] = json!(id);
                        out.push(Synth::new(
                            event_id(&[&session, id, "tool"]),
                            at,
                            "claude-code",
                            &e,
                        ));
                    }
                    if out.len() > before {
                        counts.used(1);
                    } else {
                        counts.skip(Reason::ResultWithoutCall, 1);
                    }
                }
            },
            "assistant" => {
                let ids = remember(&v, &mut calls);
                if ids.is_empty() {
                    counts.skip(Reason::AssistantText, 1);
                } else {
                    call_lines.insert(n, false);
                    for id in ids {
                        call_line.insert(id, n);
                    }
                }
            }
            _ if compaction => {
                let mut e = base("PreCompact");
                e["trigger"] = v["compactMetadata"]["trigger"].clone();
                out.push(Synth::new(
                    event_id(&[&session, &uuid, "compact"]),
                    at,
                    "claude-code",
                    &e,
                ));
                counts.used(1);
            }
            _ => counts.skip(Reason::Bookkeeping, 1),
        }
    }
    // A line of tool calls is stored with its results; one whose calls all went unanswered is not.
    let answered = call_lines.values().filter(|a| **a).count() as u64;
    counts.used(answered);
    counts.skip(
        Reason::CallWithoutResult,
        call_lines.len() as u64 - answered,
    );
    Ok(out)
}

fn crate_text(v: &Value) -> String {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_else(|| v.to_string())
}

/// Remember an assistant line's tool calls until their results come; returns their ids.
fn remember(v: &Value, calls: &mut HashMap<String, (String, Value)>) -> Vec<String> {
    let mut ids = Vec::new();
    for b in v["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
    {
        if let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str()) {
            calls.insert(id.to_string(), (name.to_string(), b["input"].clone()));
            ids.push(id.to_string());
        }
    }
    ids
}
