//! Claude Code transcripts (`~/.claude/projects/**/*.jsonl`, subagent transcripts included).
//!
//! Each line is one message of the session; tool calls (`tool_use` blocks of assistant
//! messages) are paired with their results (`tool_result` blocks of the next user message) by
//! id, and replayed as the PostToolUse / PostToolUseFailure events Claude Code sends live. The
//! daemon reads the thinking blocks from the transcript itself (`transcript_path`).

use super::{event_id, Counts, Options, Synth};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;

fn is_injected(text: &str) -> bool {
    let t = text.trim_start();
    [
        "<command-",
        "<local-command-",
        "<system-reminder>",
        "<task-notification>",
        "<ide_",
        "Caveat:",
    ]
    .iter()
    .any(|p| t.starts_with(p))
}

/// Replay one transcript file as hook events. Returns the events and how many lines were skipped.
pub(super) fn synthesize(
    path: &Path,
    opts: &Options,
    counts: &Counts,
) -> std::io::Result<Vec<Synth>> {
    let file = std::fs::File::open(path)?;
    let tp = path.to_string_lossy().into_owned();
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line?;
        counts.lines.fetch_add(1, Relaxed);
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            counts.skipped.fetch_add(1, Relaxed);
            continue;
        };
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
        if session.is_empty() || cwd.is_empty() {
            if !matches!(
                v["type"].as_str(),
                Some(
                    "file-history-snapshot"
                        | "summary"
                        | "ai-title"
                        | "custom-title"
                        | "last-prompt"
                        | "agent-name"
                )
            ) {
                counts.skipped.fetch_add(1, Relaxed);
            }
            continue;
        }
        if opts.since_ms.is_some_and(|s| at < s) {
            // Still remember tool calls: their results may come after the cut.
            if v["type"] == "assistant" {
                remember(&v, &mut calls);
            }
            continue;
        }
        if let Some(p) = &opts.project {
            if Path::new(&cwd).file_name().and_then(|f| f.to_str()) != Some(p.as_str()) {
                continue;
            }
        }
        let base = |event: &str| json!({"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": tp});
        match v["type"].as_str() {
            Some("user") => match &v["message"]["content"] {
                Value::String(text)
                    if v["isMeta"] != true
                        && v["isCompactSummary"] != true
                        && !is_injected(text) =>
                {
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
                }
                Value::Array(blocks) => {
                    for b in blocks.iter().filter(|b| b["type"] == "tool_result") {
                        let id = b["tool_use_id"].as_str().unwrap_or_default();
                        let Some((name, input)) = calls.get(id) else {
                            continue;
                        };
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
                }
                _ => {}
            },
            Some("assistant") => remember(&v, &mut calls),
            Some("system") if v["subtype"] == "compact_boundary" => {
                let mut e = base("PreCompact");
                e["trigger"] = v["compactMetadata"]["trigger"].clone();
                out.push(Synth::new(
                    event_id(&[&session, &uuid, "compact"]),
                    at,
                    "claude-code",
                    &e,
                ));
            }
            Some(_) => {}
            None => {
                counts.skipped.fetch_add(1, Relaxed);
            }
        }
    }
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

fn remember(v: &Value, calls: &mut HashMap<String, (String, Value)>) {
    for b in v["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_use")
    {
        if let (Some(id), Some(name)) = (b["id"].as_str(), b["name"].as_str()) {
            calls.insert(id.to_string(), (name.to_string(), b["input"].clone()));
        }
    }
}
