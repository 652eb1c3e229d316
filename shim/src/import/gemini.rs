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

use super::{event_id, typed, Counts, Head, Importer, Lax, Options, Reason, Synth};
use nmem_proto::harness::Harness;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

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

/// The chat's header: what names its session and its project.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Header {
    session_id: Lax<String>,
    project_hash: Lax<String>,
}

impl Header {
    fn of(fields: Value) -> Header {
        typed(&fields).unwrap_or_default()
    }
}

/// One line of the JSON-lines form. Its kinds are told apart by their keys, not by a tag.
enum Record {
    /// `{"$set": {…}}`: header fields set or changed.
    Set(Map<String, Value>),
    /// `{"$rewindTo": id}`: that message and all after it are dropped.
    Rewind(String),
    /// `{type, id, …}`: a message, new or written again.
    Message(Value),
    /// `{sessionId, projectHash, …}`: the header.
    Header(Map<String, Value>),
    Unknown,
}

impl Record {
    fn of(v: Value) -> Record {
        let Value::Object(mut o) = v else {
            return Record::Unknown;
        };
        if let Some(Value::Object(_)) = o.get("$set") {
            if let Some(Value::Object(set)) = o.remove("$set") {
                return Record::Set(set);
            }
        }
        if let Some(Value::String(id)) = o.get("$rewindTo") {
            return Record::Rewind(id.clone());
        }
        if o.contains_key("type") && o.contains_key("id") {
            Record::Message(Value::Object(o))
        } else if o.contains_key("sessionId") {
            Record::Header(o)
        } else {
            Record::Unknown
        }
    }
}

/// One message of a chat, by its `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Message {
    /// The prompt.
    User(Said),
    /// The answer, with the tool calls it made.
    Gemini(Said),
    /// Notices of the CLI itself.
    #[serde(rename = "info", alias = "error", alias = "warning")]
    Notice,
    #[serde(other)]
    Unknown,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Said {
    id: Lax<String>,
    timestamp: Lax<String>,
    /// A string or parts (`text_of`).
    content: Value,
    /// Read call by call (`ToolCall`): one unreadable call spoils nothing else.
    tool_calls: Value,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ToolCall {
    id: Lax<String>,
    name: Value,
    args: Value,
    result: Value,
    result_display: Lax<String>,
    status: Lax<String>,
    timestamp: Lax<String>,
}

/// The chat's header fields, how many lines made them, and its messages, from either form.
/// Lines that hold no message are counted here (bookkeeping, corrupt, rewound or rewritten).
fn read_chat(path: &Path, counts: &Counts) -> std::io::Result<(Header, u64, Vec<Value>)> {
    let text = std::fs::read(path)?;
    Ok(parse_chat(
        &text,
        path.extension().is_some_and(|e| e == "json"),
        counts,
    ))
}

fn parse_chat(text: &[u8], whole: bool, counts: &Counts) -> (Header, u64, Vec<Value>) {
    if whole {
        counts.line();
        let Ok(mut v) = serde_json::from_slice::<Value>(text) else {
            counts.skip(Reason::NotJson, 1);
            return (Header::default(), 0, Vec::new());
        };
        let messages = match v.get_mut("messages").map(Value::take) {
            Some(Value::Array(m)) => m,
            _ => Vec::new(),
        };
        for _ in &messages {
            counts.line();
        }
        return (Header::of(v), 1, messages);
    }
    let mut header = Map::new();
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
        match Record::of(v) {
            Record::Set(set) => {
                header.extend(set);
                counts.skip(Reason::Bookkeeping, 1);
            }
            Record::Rewind(id) => {
                if let Some(i) = messages.iter().position(|m| m["id"] == id.as_str()) {
                    counts.skip(Reason::Rewound, (messages.len() - i) as u64);
                    messages.truncate(i);
                }
                counts.skip(Reason::Bookkeeping, 1);
            }
            Record::Message(m) => {
                // A message written again (updated) replaces the earlier copy.
                match messages.iter().position(|old| old["id"] == m["id"]) {
                    Some(i) => {
                        messages[i] = m;
                        counts.skip(Reason::Mirror, 1);
                    }
                    None => messages.push(m),
                }
            }
            Record::Header(fields) => {
                header.extend(fields);
                header_lines += 1;
            }
            Record::Unknown => counts.skip(Reason::UnknownKind, 1),
        }
    }
    (Header::of(Value::Object(header)), header_lines, messages)
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
        super::root_under(None, ".gemini", "tmp")
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
            messages,
            roots.folder(path, header.project_hash.str()),
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
        messages,
        Some("/p".to_string()),
        "t",
        opts,
        counts,
    )
}

/// A chat's messages as hook events; every message is counted as used or under a `Reason`.
fn replay(
    header: &Header,
    header_lines: u64,
    messages: Vec<Value>,
    folder: Option<String>,
    tp: &str,
    opts: &Options,
    counts: &Counts,
) -> Vec<Synth> {
    let session = header.session_id.str().to_string();
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
    let time = |v: &Lax<String>| {
        v.0.as_deref()
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
                Harness::Gemini,
                &e,
            ));
            if !counted {
                counts.used(1);
            }
        }
    };
    for m in messages {
        let (said, answer_line) = match typed::<Message>(&m) {
            Some(Message::User(said)) => (said, false),
            Some(Message::Gemini(said)) => (said, true),
            Some(Message::Notice) => {
                counts.skip(Reason::Bookkeeping, 1);
                continue;
            }
            Some(Message::Unknown) | None => {
                counts.skip(Reason::UnknownKind, 1);
                continue;
            }
        };
        let at = time(&said.timestamp);
        let id = said.id.str();
        let wanted = opts.wants(at, &cwd);
        if !answer_line {
            flush(&mut answer, &mut out);
            let text = text_of(&said.content);
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
                Harness::Gemini,
                &e,
            ));
            counts.used(1);
            continue;
        }
        let before = out.len();
        let calls = said
            .tool_calls
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        for call in calls.iter().filter_map(typed::<ToolCall>) {
            let at = match time(&call.timestamp) {
                0 => at,
                t => t,
            };
            let call_id = call.id.str();
            if !opts.wants(at, &cwd) || call_id.is_empty() {
                continue;
            }
            let mut result = text_of(&call.result);
            if result.is_empty() {
                result = call.result_display.str().to_string();
            }
            let mut response = json!({ "llmContent": result });
            if matches!(call.status.str(), "error" | "cancelled") {
                response["error"] = json!({ "message": result });
            }
            let mut e = base("AfterTool");
            e["tool_name"] = call.name;
            e["tool_input"] = call.args;
            e["tool_response"] = response;
            out.push(Synth::new(
                event_id(&[&session, call_id, "tool"]),
                at,
                Harness::Gemini,
                &e,
            ));
        }
        let called = out.len() > before;
        if called {
            counts.used(1);
        }
        let text = text_of(&said.content);
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
    flush(&mut answer, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{jsonl, opts, outcome};
    use super::*;
    use serde_json::json;

    fn header() -> Value {
        json!({"sessionId": "s", "projectHash": "h", "startTime": "2026-01-01T10:00:00.000Z"})
    }

    fn user(id: &str, text: &str) -> Value {
        json!({"id": id, "type": "user", "timestamp": "2026-01-01T10:00:00.000Z", "content": [{"text": text}]})
    }

    fn gemini(id: &str, text: &str, calls: Value) -> Value {
        json!({"id": id, "type": "gemini", "timestamp": "2026-01-01T10:00:01.000Z", "content": text, "toolCalls": calls})
    }

    fn call(id: &str, status: &str) -> Value {
        json!({"id": id, "name": "run_shell_command", "args": {"command": "ls"}, "status": status,
            "result": [{"functionResponse": {"response": {"output": "a.rs"}}}]})
    }

    /// Every record and message kind the format knows, in both forms, and what it becomes.
    #[test]
    fn every_line_kind() {
        use Reason::*;
        let cases: Vec<super::super::tests::Case> = vec![
            ("a header", vec![header()], &[], 1, &[]),
            (
                "a prompt",
                vec![header(), user("m1", "fix it")],
                &["BeforeAgent"],
                2,
                &[],
            ),
            (
                "a slash command",
                vec![header(), user("m1", "/stats")],
                &[],
                1,
                &[(Injected, 1)],
            ),
            (
                "an empty prompt",
                vec![header(), user("m1", " ")],
                &[],
                1,
                &[(Empty, 1)],
            ),
            (
                "an answer",
                vec![header(), gemini("m2", "done", json!([]))],
                &["AfterAgent"],
                2,
                &[],
            ),
            (
                "an empty answer",
                vec![header(), gemini("m2", "", json!([]))],
                &[],
                1,
                &[(Empty, 1)],
            ),
            (
                "two answers of a turn",
                vec![
                    header(),
                    gemini("m2", "a", json!([])),
                    gemini("m3", "b", json!([])),
                ],
                &["AfterAgent"],
                2,
                &[(AssistantText, 1)],
            ),
            (
                "tool calls",
                vec![
                    header(),
                    gemini(
                        "m2",
                        "",
                        json!([call("c1", "success"), call("c2", "error"), {"name": "x"}]),
                    ),
                ],
                &["AfterTool", "AfterTool"],
                2,
                &[],
            ),
            (
                "a notice",
                vec![
                    header(),
                    json!({"id": "m4", "type": "info", "content": "x"}),
                ],
                &[],
                1,
                &[(Bookkeeping, 1)],
            ),
            (
                "an unknown message",
                vec![header(), json!({"id": "m4", "type": "hologram"})],
                &[],
                1,
                &[(UnknownKind, 1)],
            ),
            (
                "no session",
                vec![
                    json!({"sessionId": null, "projectHash": "h"}),
                    user("m1", "fix"),
                ],
                &[],
                0,
                &[(NoSession, 2)],
            ),
        ];
        for (what, lines, events, used, reasons) in &cases {
            let want = (
                events.iter().map(|e| e.to_string()).collect(),
                *used,
                reasons.to_vec(),
            );
            // The JSON-lines form, and the whole-chat one.
            let c = Counts::default();
            let out = parse_all_for_tests(jsonl(lines).as_bytes(), false, &opts(), &c);
            assert_eq!(outcome(&out, &c), want, "{what} (.jsonl)");
            let mut chat = lines[0].clone();
            chat["messages"] = json!(lines[1..]);
            let c = Counts::default();
            let out = parse_all_for_tests(chat.to_string().as_bytes(), true, &opts(), &c);
            assert_eq!(outcome(&out, &c), want, "{what} (.json)");
        }
        // The JSON-lines form's own records: updates, rewinds, rewritten messages.
        let lines = [
            header(),
            json!({"$set": {"summary": "x"}}),
            user("m1", "first"),
            user("m1", "first, edited"),
            user("m2", "second"),
            json!({"$rewindTo": "m2"}),
            json!({"unknown": 1}),
            json!(5),
        ];
        let c = Counts::default();
        let out = parse_all_for_tests(jsonl(&lines).as_bytes(), false, &opts(), &c);
        assert_eq!(
            outcome(&out, &c),
            (
                vec!["BeforeAgent".to_string()],
                2,
                vec![
                    (UnknownKind, 2),
                    (Bookkeeping, 2),
                    (Mirror, 1),
                    (Rewound, 1)
                ]
            )
        );
        assert!(String::from_utf8_lossy(&out[0].payload).contains("first, edited"));
    }

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
