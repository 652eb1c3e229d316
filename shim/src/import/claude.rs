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

use super::{event_id, typed, Counts, Head, Importer, Lax, Options, Reason, Synth};
use nmem_proto::harness::Harness;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// One line of a transcript, by its `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
enum Line {
    User(Entry),
    Assistant(Entry),
    /// A compaction (`subtype` `compact_boundary`); any other is a hook or timing notice.
    System(Entry),
    /// Lines that hold nothing to remember: titles, checkpoints, hook notices, queue and mode
    /// changes.
    #[serde(
        rename = "file-history-snapshot",
        alias = "file-history-delta",
        alias = "summary",
        alias = "ai-title",
        alias = "custom-title",
        alias = "last-prompt",
        alias = "agent-name",
        alias = "attachment",
        alias = "queue-operation",
        alias = "progress",
        alias = "mode",
        alias = "pr-link"
    )]
    Bookkeeping,
    /// A kind this version of nmem does not know (also: no `type`, or not an object).
    #[serde(other)]
    Unknown,
}

/// The fields of a user, assistant or system line that the importer reads.
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Entry {
    timestamp: Lax<String>,
    session_id: Lax<String>,
    cwd: Lax<String>,
    uuid: Lax<String>,
    subtype: Lax<String>,
    #[serde(deserialize_with = "super::object")]
    message: Option<Message>,
    is_meta: Lax<bool>,
    is_compact_summary: Lax<bool>,
    is_sidechain: Lax<bool>,
    prompt_id: Lax<String>,
    /// The structured result of the line's tool call, passed on as Claude Code's hook does.
    tool_use_result: Value,
    compact_metadata: Value,
}

impl Entry {
    fn compaction(&self) -> bool {
        self.subtype.str() == "compact_boundary"
    }

    fn blocks(&self) -> &[Block] {
        match self.message.as_ref().map(|m| &m.content) {
            Some(Content::Blocks(b)) => b,
            _ => &[],
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Message {
    content: Content,
}

/// A message's `content`: a string, or an array of blocks.
#[derive(Default)]
enum Content {
    Text(String),
    Blocks(Vec<Block>),
    #[default]
    Other,
}

impl<'de> Deserialize<'de> for Content {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => Content::Text(s),
            // A block nmem cannot read is one it does not know: it never spoils the line.
            Value::Array(a) => Content::Blocks(
                a.into_iter()
                    .map(|b| typed(&b).unwrap_or(Block::Other))
                    .collect(),
            ),
            _ => Content::Other,
        })
    }
}

/// One block of a message's content array, by its `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block {
    Text {
        #[serde(default)]
        text: Lax<String>,
    },
    ToolUse {
        #[serde(default)]
        id: Lax<String>,
        #[serde(default)]
        name: Lax<String>,
        #[serde(default)]
        input: Value,
    },
    ToolResult {
        #[serde(default)]
        tool_use_id: Lax<String>,
        #[serde(default)]
        is_error: Lax<bool>,
        #[serde(default)]
        content: Value,
    },
    /// Images, thinking, anything else.
    #[serde(other)]
    Other,
}

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

fn user_line(content: Option<&Content>) -> UserLine {
    match content {
        Some(Content::Text(t)) if t.trim().is_empty() => UserLine::Empty,
        Some(Content::Text(t)) if is_injected(t) => UserLine::Injected,
        Some(Content::Text(t)) => UserLine::Text(t.clone()),
        Some(Content::Blocks(blocks)) => {
            if blocks.iter().any(|b| matches!(b, Block::ToolResult { .. })) {
                return UserLine::Results;
            }
            let texts: Vec<&str> = blocks
                .iter()
                .filter_map(|b| match b {
                    Block::Text { text } => text.0.as_deref(),
                    _ => None,
                })
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
        super::root_under(Some("CLAUDE_CONFIG_DIR"), ".claude", "projects")
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

/// The lines that can become events.
#[derive(PartialEq, Clone, Copy)]
enum Kind {
    User,
    Assistant,
    Compaction,
}

/// What the replay of one transcript holds between its lines.
struct Replay<'a> {
    tp: &'a str,
    opts: &'a Options,
    counts: &'a Counts,
    /// Tool calls by id, waiting for their results: name and input.
    calls: HashMap<String, (String, Value)>,
    /// Lines that made tool calls (by line number), and whether any of their calls got a result.
    call_lines: HashMap<usize, bool>,
    /// Which call came from which line.
    call_line: HashMap<String, usize>,
    out: Vec<Synth>,
}

/// The transcript's lines as hook events; every line is counted as used or under a `Reason`.
/// The session is each line's own `sessionId`: one file may hold several sessions.
pub(super) fn parse(
    reader: impl BufRead,
    tp: &str,
    opts: &Options,
    counts: &Counts,
) -> std::io::Result<Vec<Synth>> {
    let mut r = Replay {
        tp,
        opts,
        counts,
        calls: HashMap::new(),
        call_lines: HashMap::new(),
        call_line: HashMap::new(),
        out: Vec::new(),
    };
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
        r.line(n, typed(&v).unwrap_or(Line::Unknown));
    }
    Ok(r.finish())
}

impl Replay<'_> {
    fn line(&mut self, n: usize, line: Line) {
        let counts = self.counts;
        let (e, kind) = match line {
            Line::Bookkeeping => return counts.skip(Reason::Bookkeeping, 1),
            Line::System(e) if !e.compaction() => return counts.skip(Reason::Bookkeeping, 1),
            Line::Unknown => return counts.skip(Reason::UnknownKind, 1),
            Line::Assistant(e) => (e, Kind::Assistant),
            Line::User(e) => (e, Kind::User),
            Line::System(e) => (e, Kind::Compaction),
        };
        let (session, cwd) = (e.session_id.str(), e.cwd.str());
        if session.is_empty() || cwd.is_empty() {
            return counts.skip(Reason::NoSession, 1);
        }
        let at = e
            .timestamp
            .0
            .as_deref()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0);
        if self.opts.since_ms.is_some_and(|s| at < s) {
            // Still remember tool calls: their results may come after the cut.
            if kind == Kind::Assistant {
                self.remember(&e);
            }
            return counts.skip(Reason::Filtered, 1);
        }
        if let Some(p) = &self.opts.project {
            if Path::new(cwd).file_name().and_then(|f| f.to_str()) != Some(p.as_str()) {
                return counts.skip(Reason::Filtered, 1);
            }
        }
        let uuid = e.uuid.0.clone().unwrap_or_else(|| n.to_string());
        match kind {
            Kind::Assistant => {
                let ids = self.remember(&e);
                if ids.is_empty() {
                    counts.skip(Reason::AssistantText, 1);
                } else {
                    self.call_lines.insert(n, false);
                    for id in ids {
                        self.call_line.insert(id, n);
                    }
                }
            }
            Kind::Compaction => {
                let mut p = self.base(&e, "PreCompact");
                p["trigger"] = e.compact_metadata["trigger"].clone();
                let id = event_id(&[session, &uuid, "compact"]);
                self.out.push(Synth::new(id, at, Harness::ClaudeCode, &p));
                counts.used(1);
            }
            Kind::User => self.user(&e, at, &uuid),
        }
    }

    fn user(&mut self, e: &Entry, at: i64, uuid: &str) {
        let counts = self.counts;
        let session = e.session_id.str();
        match user_line(e.message.as_ref().map(|m| &m.content)) {
            UserLine::Text(_) | UserLine::Injected
                if e.is_meta.yes() || e.is_compact_summary.yes() =>
            {
                counts.skip(Reason::Injected, 1);
            }
            UserLine::Injected => counts.skip(Reason::Injected, 1),
            UserLine::Empty => counts.skip(Reason::Empty, 1),
            // A subagent's prompt is the task its parent agent wrote, and that task is already
            // stored with the Task/Agent call that started it (`task_spawn`). Storing it again
            // as a user prompt would put words in the user's mouth, and its own source would
            // need a schema change for a second copy nobody asked for: it is counted, and the
            // subagent's tool calls are still imported like the live hooks send them.
            UserLine::Text(_) if e.is_sidechain.yes() => {
                counts.skip(Reason::SubagentPrompt, 1);
            }
            UserLine::Text(text) => {
                let mut p = self.base(e, "UserPromptSubmit");
                p["prompt"] = json!(text);
                if let Some(pid) = &e.prompt_id.0 {
                    p["prompt_id"] = json!(pid);
                }
                let id = event_id(&[session, uuid, "prompt"]);
                self.out.push(Synth::new(id, at, Harness::ClaudeCode, &p));
                counts.used(1);
            }
            UserLine::Results => {
                let before = self.out.len();
                for b in e.blocks() {
                    let Block::ToolResult {
                        tool_use_id,
                        is_error,
                        content,
                    } = b
                    else {
                        continue;
                    };
                    let id = tool_use_id.str();
                    let Some((name, input)) = self.calls.get(id) else {
                        continue;
                    };
                    if let Some(answered) = self
                        .call_line
                        .get(id)
                        .and_then(|l| self.call_lines.get_mut(l))
                    {
                        *answered = true;
                    }
                    let mut p;
                    if is_error.yes() {
                        p = self.base(e, "PostToolUseFailure");
                        p["error"] = match content {
                            Value::String(s) => json!(s),
                            other => json!(crate_text(other)),
                        };
                    } else {
                        p = self.base(e, "PostToolUse");
                        p["tool_response"] = e.tool_use_result.clone();
                    }
                    p["tool_name"] = json!(name);
                    p["tool_input"] = input.clone();
                    p["tool_use_id"] = json!(id);
                    let id = event_id(&[session, id, "tool"]);
                    self.out.push(Synth::new(id, at, Harness::ClaudeCode, &p));
                }
                if self.out.len() > before {
                    counts.used(1);
                } else {
                    counts.skip(Reason::ResultWithoutCall, 1);
                }
            }
        }
    }

    /// The hook payload's envelope, as Claude Code's hooks send it.
    fn base(&self, e: &Entry, event: &str) -> Value {
        json!({"session_id": e.session_id.str(), "cwd": e.cwd.str(), "hook_event_name": event, "transcript_path": self.tp})
    }

    /// Remember an assistant line's tool calls until their results come; returns their ids.
    fn remember(&mut self, e: &Entry) -> Vec<String> {
        let mut ids = Vec::new();
        for b in e.blocks() {
            if let Block::ToolUse {
                id: Lax(Some(id)),
                name: Lax(Some(name)),
                input,
            } = b
            {
                self.calls.insert(id.clone(), (name.clone(), input.clone()));
                ids.push(id.clone());
            }
        }
        ids
    }

    fn finish(self) -> Vec<Synth> {
        self.counts.call_lines(&self.call_lines);
        self.out
    }
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

#[cfg(test)]
mod tests {
    use super::super::tests::{jsonl, opts, outcome};
    use super::*;

    /// A line of the session `s` in `/p`, of `kind`, with more fields.
    fn line(kind: &str, more: Value) -> Value {
        let mut v = json!({"type": kind, "sessionId": "s", "cwd": "/p", "uuid": "u",
            "timestamp": "2026-01-01T10:00:00.000Z"});
        for (k, x) in more.as_object().unwrap() {
            v[k] = x.clone();
        }
        v
    }

    fn said(content: Value) -> Value {
        json!({"message": {"role": "user", "content": content}})
    }

    fn merge(a: Value, b: Value) -> Value {
        let mut a = a;
        for (k, x) in b.as_object().unwrap() {
            a[k] = x.clone();
        }
        a
    }

    fn call(id: &str) -> Value {
        line(
            "assistant",
            json!({"message": {"content": [{"type": "tool_use", "id": id, "name": "Bash",
                "input": {"command": "ls"}}]}}),
        )
    }

    fn result(id: &str, error: bool) -> Value {
        line(
            "user",
            json!({"message": {"content": [{"type": "tool_result", "tool_use_id": id,
                "is_error": error, "content": "out"}]}, "toolUseResult": {"stdout": "out"}}),
        )
    }

    /// Every line kind the format knows, and what it becomes: events, or a reason.
    #[test]
    fn every_line_kind() {
        use Reason::*;
        let cases: Vec<super::super::tests::Case> = vec![
            (
                "a typed prompt",
                vec![line("user", said(json!("fix the bug")))],
                &["UserPromptSubmit"],
                1,
                &[],
            ),
            (
                "a prompt of text blocks",
                vec![line(
                    "user",
                    said(
                        json!([{"type": "text", "text": "<ide_opened_file>x</ide_opened_file>"}, {"type": "text", "text": "why?"}]),
                    ),
                )],
                &["UserPromptSubmit"],
                1,
                &[],
            ),
            (
                "a reminder",
                vec![line(
                    "user",
                    said(json!("<system-reminder>x</system-reminder>")),
                )],
                &[],
                0,
                &[(Injected, 1)],
            ),
            (
                "a meta line",
                vec![line(
                    "user",
                    merge(said(json!("hi")), json!({"isMeta": true})),
                )],
                &[],
                0,
                &[(Injected, 1)],
            ),
            (
                "a compaction summary",
                vec![line(
                    "user",
                    merge(said(json!("summary")), json!({"isCompactSummary": true})),
                )],
                &[],
                0,
                &[(Injected, 1)],
            ),
            (
                "an image",
                vec![line("user", said(json!([{"type": "image"}])))],
                &[],
                0,
                &[(Empty, 1)],
            ),
            (
                "a subagent's task",
                vec![line(
                    "user",
                    merge(said(json!("do x")), json!({"isSidechain": true})),
                )],
                &[],
                0,
                &[(SubagentPrompt, 1)],
            ),
            (
                "assistant text",
                vec![line(
                    "assistant",
                    json!({"message": {"content": [{"type": "text", "text": "done"}]}}),
                )],
                &[],
                0,
                &[(AssistantText, 1)],
            ),
            (
                "a call and its result",
                vec![call("t1"), result("t1", false)],
                &["PostToolUse"],
                2,
                &[],
            ),
            (
                "a call and its failure",
                vec![call("t1"), result("t1", true)],
                &["PostToolUseFailure"],
                2,
                &[],
            ),
            (
                "a call without result",
                vec![call("t1")],
                &[],
                0,
                &[(CallWithoutResult, 1)],
            ),
            (
                "a result without call",
                vec![result("t1", false)],
                &[],
                0,
                &[(ResultWithoutCall, 1)],
            ),
            (
                "a compaction",
                vec![line(
                    "system",
                    json!({"subtype": "compact_boundary", "compactMetadata": {"trigger": "auto"}}),
                )],
                &["PreCompact"],
                1,
                &[],
            ),
            (
                "a hook notice",
                vec![line("system", json!({"subtype": "stop_hook_summary"}))],
                &[],
                0,
                &[(Bookkeeping, 1)],
            ),
            (
                "no session",
                vec![merge(
                    line("user", said(json!("hi"))),
                    json!({"sessionId": null}),
                )],
                &[],
                0,
                &[(NoSession, 1)],
            ),
            (
                "an unknown kind",
                vec![line("hologram", json!({}))],
                &[],
                0,
                &[(UnknownKind, 1)],
            ),
            (
                "no kind",
                vec![json!({"sessionId": "s"})],
                &[],
                0,
                &[(UnknownKind, 1)],
            ),
            (
                "not an object",
                vec![json!(["user"])],
                &[],
                0,
                &[(UnknownKind, 1)],
            ),
        ];
        for (what, lines, events, used, reasons) in cases {
            let c = Counts::default();
            let out = parse(jsonl(&lines).as_bytes(), "t", &opts(), &c).unwrap();
            assert_eq!(
                outcome(&out, &c),
                (
                    events.iter().map(|e| e.to_string()).collect(),
                    used,
                    reasons.to_vec()
                ),
                "{what}"
            );
        }
        // Every bookkeeping kind, and a line that is not JSON.
        for kind in [
            "file-history-snapshot",
            "file-history-delta",
            "summary",
            "ai-title",
            "custom-title",
            "last-prompt",
            "agent-name",
            "attachment",
            "queue-operation",
            "progress",
            "mode",
            "pr-link",
        ] {
            let c = Counts::default();
            let out = parse(jsonl(&[line(kind, json!({}))]).as_bytes(), "t", &opts(), &c).unwrap();
            assert_eq!(
                outcome(&out, &c),
                (vec![], 0, vec![(Bookkeeping, 1)]),
                "{kind}"
            );
        }
        let c = Counts::default();
        let out = parse(&b"{\"type\": \"user\", \"sess"[..], "t", &opts(), &c).unwrap();
        assert_eq!(outcome(&out, &c), (vec![], 0, vec![(NotJson, 1)]));
    }

    /// The events carry what the hook would: the prompt, the call's name, input and result.
    #[test]
    fn events_carry_the_hooks_fields() {
        let c = Counts::default();
        let text = jsonl(&[
            line(
                "user",
                merge(said(json!("fix it")), json!({"promptId": "p1"})),
            ),
            call("t1"),
            result("t1", false),
        ]);
        let out = parse(text.as_bytes(), "t.jsonl", &opts(), &c).unwrap();
        let p: Value = serde_json::from_slice(&out[0].payload).unwrap();
        assert_eq!(p["prompt"], "fix it");
        assert_eq!(p["prompt_id"], "p1");
        assert_eq!(p["transcript_path"], "t.jsonl");
        let t: Value = serde_json::from_slice(&out[1].payload).unwrap();
        assert_eq!(t["tool_name"], "Bash");
        assert_eq!(t["tool_input"]["command"], "ls");
        assert_eq!(t["tool_response"]["stdout"], "out");
        assert_eq!(t["tool_use_id"], "t1");
        assert_eq!(out[1].harness, Harness::ClaudeCode);
    }
}
