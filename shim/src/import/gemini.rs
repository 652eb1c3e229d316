//! Gemini CLI chats (`~/.gemini/tmp/<project>/chats/session-*.json`, newer `*.jsonl`).
//!
//! A chat is a ConversationRecord `{sessionId, projectHash, startTime, messages[]}`; messages are
//! `user` (the prompt) or `gemini` (the answer, with `toolCalls[{id, name, args, result, status,
//! resultDisplay}]`), plus `info`/`error`/`warning`. The JSON-lines form has one record per line:
//! a header, messages, `{"$set": {…}}` updates and `{"$rewindTo": id}` (drop that message and
//! what followed). They are replayed as the hook events Gemini CLI sends live (harness `gemini`):
//! BeforeAgent (prompt), AfterTool (each call, with `llmContent` and any error), AfterAgent (the
//! turn's last answer).
//!
//! The chat names its project only by `projectHash` = sha256(project root). The folder is found
//! from a `.project_root` file beside the chats (newer Gemini CLI), else by hashing the folders
//! Gemini knows (`~/.gemini/projects.json`, `trustedFolders.json`) and the current folder and
//! its parents; a chat whose folder cannot be found is skipped and counted.

use super::{event_id, Counts, Head, Importer, Options, Reason, Synth};
use nmem_proto::harness::Harness;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const HARNESS: &str = "gemini";

/// Known project folders by their Gemini project hash.
struct Roots(HashMap<String, String>);

fn sha256_hex(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Roots {
    pub(super) fn discover() -> Roots {
        let mut candidates: Vec<String> = Vec::new();
        if let Ok(dir) = std::env::current_dir() {
            candidates.extend(dir.ancestors().map(|a| a.to_string_lossy().into_owned()));
        }
        if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
            let g = home.join(".gemini");
            for file in ["projects.json", "trustedFolders.json"] {
                let Ok(text) = std::fs::read_to_string(g.join(file)) else {
                    continue;
                };
                let v: Value = serde_json::from_str(&text).unwrap_or_default();
                // {"projects": {"/path": "slug"}} or {"/path": "TRUST_FOLDER"}
                let map = v.get("projects").unwrap_or(&v);
                if let Some(o) = map.as_object() {
                    candidates.extend(o.keys().cloned());
                }
            }
        }
        Roots(
            candidates
                .into_iter()
                .map(|c| (sha256_hex(&c), c))
                .collect(),
        )
    }

    fn folder(&self, chat: &Path, hash: &str) -> Option<String> {
        // chats/<file> → <project dir>/.project_root
        let dir = chat.parent()?.parent()?;
        if let Ok(root) = std::fs::read_to_string(dir.join(".project_root")) {
            let root = root.trim();
            if !root.is_empty() {
                return Some(root.to_string());
            }
        }
        self.0.get(hash).cloned()
    }
}

/// The chat's header fields, how many lines made them, and its messages, from either form.
/// Lines that hold no message are counted here (bookkeeping, corrupt, rewound or rewritten).
fn read_chat(path: &Path, counts: &Counts) -> std::io::Result<(Value, u64, Vec<Value>)> {
    let text = std::fs::read(path)?;
    Ok(parse_chat(
        &text,
        path.extension().is_some_and(|e| e == "json"),
        counts,
    ))
}

fn parse_chat(text: &[u8], whole: bool, counts: &Counts) -> (Value, u64, Vec<Value>) {
    if whole {
        counts.line();
        let Ok(mut v) = serde_json::from_slice::<Value>(text) else {
            counts.skip(Reason::NotJson, 1);
            return (Value::Null, 0, Vec::new());
        };
        let messages = match v.get_mut("messages").map(Value::take) {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        for _ in &messages {
            counts.line();
        }
        return (v, 1, messages);
    }
    let mut header = json!({});
    let mut header_lines = 0;
    let mut messages: Vec<Value> = Vec::new();
    for line in text.split(|&c| c == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        counts.line();
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            counts.skip(Reason::NotJson, 1);
            continue;
        };
        if let Some(set) = v.get("$set").and_then(Value::as_object) {
            for (k, val) in set {
                header[k] = val.clone();
            }
            counts.skip(Reason::Bookkeeping, 1);
        } else if let Some(id) = v.get("$rewindTo").and_then(Value::as_str) {
            if let Some(i) = messages.iter().position(|m| m["id"] == id) {
                counts.skip(Reason::Rewound, (messages.len() - i) as u64);
                messages.truncate(i);
            }
            counts.skip(Reason::Bookkeeping, 1);
        } else if v.get("type").is_some() && v.get("id").is_some() {
            // A message written again (updated) replaces the earlier copy.
            match messages.iter().position(|m| m["id"] == v["id"]) {
                Some(i) => {
                    messages[i] = v;
                    counts.skip(Reason::Mirror, 1);
                }
                None => messages.push(v),
            }
        } else if v.get("sessionId").is_some() {
            if let Some(o) = v.as_object() {
                for (k, val) in o {
                    header[k] = val.clone();
                }
            }
            header_lines += 1;
        } else {
            counts.skip(Reason::UnknownKind, 1);
        }
    }
    (header, header_lines, messages)
}

/// The text of a message's content or a tool's result (strings, parts, function responses).
fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(text_of)
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
        Value::Object(o) => {
            if let Some(t) = o.get("text").and_then(Value::as_str) {
                t.to_string()
            } else if let Some(r) = o.get("functionResponse") {
                let resp = &r["response"];
                resp.get("output")
                    .or_else(|| resp.get("error"))
                    .or_else(|| resp.get("content"))
                    .map(text_of)
                    .unwrap_or_else(|| resp.to_string())
            } else {
                String::new()
            }
        }
        _ => String::new(),
    }
}

/// Gemini CLI's importer.
pub(super) struct Gemini;

impl Importer for Gemini {
    fn harness(&self) -> Harness {
        Harness::Gemini
    }

    fn default_root(&self) -> Option<PathBuf> {
        std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".gemini").join("tmp"))
    }

    /// A chat (one JSON object; other `.json` files, settings and logs, are not sessions), or
    /// its JSON-lines form.
    fn claims(&self, file: &Head) -> bool {
        if file.json {
            file.name.starts_with("session-") || file.text.contains("\"projectHash\"")
        } else {
            file.first.get("projectHash").is_some() || file.first.get("$set").is_some()
        }
    }

    fn synthesize(
        &self,
        path: &Path,
        opts: &Options,
        counts: &Counts,
    ) -> std::io::Result<Vec<Synth>> {
        // The folders Gemini knows, looked up once per run.
        static ROOTS: std::sync::OnceLock<Roots> = std::sync::OnceLock::new();
        let roots = ROOTS.get_or_init(Roots::discover);
        let (header, header_lines, messages) = read_chat(path, counts)?;
        Ok(replay(
            &header,
            header_lines,
            &messages,
            roots.folder(path, header["projectHash"].as_str().unwrap_or("")),
            &path.to_string_lossy(),
            opts,
            counts,
        ))
    }

    /// Its hooks carry no ids at all.
    fn live_ids(&self) -> bool {
        false
    }
}

/// Both steps on bytes, with a folder for any chat (for the property tests).
#[cfg(test)]
pub(super) fn parse_all_for_tests(
    text: &[u8],
    whole: bool,
    opts: &Options,
    counts: &Counts,
) -> Vec<Synth> {
    let (header, header_lines, messages) = parse_chat(text, whole, counts);
    replay(
        &header,
        header_lines,
        &messages,
        Some("/p".to_string()),
        "t",
        opts,
        counts,
    )
}

/// A chat's messages as hook events; every message is counted as used or under a `Reason`.
fn replay(
    header: &Value,
    header_lines: u64,
    messages: &[Value],
    folder: Option<String>,
    tp: &str,
    opts: &Options,
    counts: &Counts,
) -> Vec<Synth> {
    let session = header["sessionId"].as_str().unwrap_or("").to_string();
    let Some(cwd) = folder.filter(|_| !session.is_empty()) else {
        // Without a session id or a folder nothing can be placed.
        let why = if session.is_empty() {
            Reason::NoSession
        } else {
            Reason::NoFolder
        };
        counts.skip(why, messages.len() as u64 + header_lines);
        return Vec::new();
    };
    counts.used(header_lines);
    let time = |v: &Value| {
        v.as_str()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0)
    };
    let base = |event: &str| json!({"session_id": session, "cwd": cwd, "hook_event_name": event, "transcript_path": tp});
    let mut out = Vec::new();
    // The turn's latest answer: its text, time, id, and whether its message was already counted
    // (it made tool calls).
    let mut answer: Option<(String, i64, String, bool)> = None;
    let flush = |answer: &mut Option<(String, i64, String, bool)>, out: &mut Vec<Synth>| {
        if let Some((text, at, id, counted)) = answer.take() {
            let mut e = base("AfterAgent");
            e["prompt_response"] = json!(text);
            out.push(Synth::new(
                event_id(&[&session, &id, "answer"]),
                at,
                HARNESS,
                &e,
            ));
            if !counted {
                counts.used(1);
            }
        }
    };
    for m in messages {
        let at = time(&m["timestamp"]);
        let id = m["id"].as_str().unwrap_or("");
        let wanted = opts.wants(at, &cwd);
        match m["type"].as_str() {
            Some("user") => {
                flush(&mut answer, &mut out);
                let text = text_of(&m["content"]);
                // Slash commands and shell-mode lines are not prompts to the agent.
                let why = if !wanted {
                    Some(Reason::Filtered)
                } else if text.trim().is_empty() {
                    Some(Reason::Empty)
                } else if text.starts_with('/') {
                    Some(Reason::Injected)
                } else {
                    None
                };
                if let Some(why) = why {
                    counts.skip(why, 1);
                    continue;
                }
                let mut e = base("BeforeAgent");
                e["prompt"] = json!(text);
                out.push(Synth::new(
                    event_id(&[&session, id, "prompt"]),
                    at,
                    HARNESS,
                    &e,
                ));
                counts.used(1);
            }
            Some("gemini") => {
                let before = out.len();
                for call in m["toolCalls"].as_array().into_iter().flatten() {
                    let at = match time(&call["timestamp"]) {
                        0 => at,
                        t => t,
                    };
                    let call_id = call["id"].as_str().unwrap_or("");
                    if !opts.wants(at, &cwd) || call_id.is_empty() {
                        continue;
                    }
                    let mut result = text_of(&call["result"]);
                    if result.is_empty() {
                        result = call["resultDisplay"].as_str().unwrap_or("").to_string();
                    }
                    let mut response = json!({ "llmContent": result });
                    if matches!(call["status"].as_str(), Some("error" | "cancelled")) {
                        response["error"] = json!({ "message": result });
                    }
                    let mut e = base("AfterTool");
                    e["tool_name"] = call["name"].clone();
                    e["tool_input"] = call["args"].clone();
                    e["tool_response"] = response;
                    out.push(Synth::new(
                        event_id(&[&session, call_id, "tool"]),
                        at,
                        HARNESS,
                        &e,
                    ));
                }
                let called = out.len() > before;
                if called {
                    counts.used(1);
                }
                let text = text_of(&m["content"]);
                if wanted && !text.trim().is_empty() {
                    // Only the turn's last answer is stored; an earlier one is replaced.
                    if let Some((.., false)) = answer.replace((text, at, id.to_string(), called)) {
                        counts.skip(Reason::AssistantText, 1);
                    }
                } else if !called {
                    counts.skip(
                        if wanted {
                            Reason::Empty
                        } else {
                            Reason::Filtered
                        },
                        1,
                    );
                }
            }
            // Notices of the CLI itself.
            Some("info" | "error" | "warning") => counts.skip(Reason::Bookkeeping, 1),
            _ => counts.skip(Reason::UnknownKind, 1),
        }
    }
    flush(&mut answer, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn text_of_parts_and_function_responses() {
        let r = json!([{"functionResponse": {"id": "x", "name": "run_shell_command",
            "response": {"output": "Command: ls\nExit Code: 1"}}}]);
        assert_eq!(super::text_of(&r), "Command: ls\nExit Code: 1");
        assert_eq!(
            super::text_of(&json!([{"text": "a"}, {"text": "b"}])),
            "a\nb"
        );
        assert_eq!(super::text_of(&json!("plain")), "plain");
    }
}
