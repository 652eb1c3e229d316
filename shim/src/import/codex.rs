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

use super::{event_id, typed, Counts, Head, Importer, Lax, Options, Reason, Synth};
use nmem_proto::harness::codex::shell_output;
use nmem_proto::harness::Harness;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

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
        super::root_under(Some("CODEX_HOME"), ".codex", "sessions")
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

/// The kinds of line a current rollout holds (`{timestamp, type, payload}`), by `type`, each
/// with its payload read as the importer needs it.
enum Record {
    SessionMeta(Meta),
    TurnContext,
    EventMsg(Event),
    ResponseItem(Item),
    Compacted,
    Unknown,
}

impl Record {
    fn of(kind: &str, payload: &Value) -> Record {
        match kind {
            "session_meta" => Record::SessionMeta(typed(payload).unwrap_or_default()),
            "turn_context" => Record::TurnContext,
            "event_msg" => Record::EventMsg(typed(payload).unwrap_or(Event::Other)),
            "response_item" => Record::ResponseItem(Item::of(payload)),
            "compacted" => Record::Compacted,
            _ => Record::Unknown,
        }
    }
}

/// A session's header (`session_meta`; an older rollout's bare first line is read as one).
#[derive(Deserialize, Default)]
#[serde(default)]
struct Meta {
    id: Lax<String>,
    cwd: Lax<String>,
    /// `{"subagent": …}` in a subagent's rollout.
    source: Value,
    /// Set in a fork, whose copy of its parent's lines follows.
    forked_from_id: Lax<String>,
}

/// What every payload may carry: its own `type` and the turn it belongs to.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Common {
    #[serde(rename = "type")]
    kind: Lax<String>,
    turn_id: Lax<String>,
}

/// An `event_msg` payload (the display log), by its `type`.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    /// The user's words.
    UserMessage {
        #[serde(default)]
        message: Lax<String>,
    },
    /// A shell call's result, with its exit code.
    ExecCommandEnd {
        #[serde(default)]
        call_id: Lax<String>,
        #[serde(default)]
        aggregated_output: Lax<String>,
        #[serde(default)]
        formatted_output: Lax<String>,
        #[serde(default)]
        stdout: Lax<String>,
        #[serde(default)]
        stderr: Lax<String>,
        #[serde(default)]
        exit_code: Lax<i64>,
    },
    AgentMessage {
        #[serde(default)]
        message: Lax<String>,
    },
    /// The turn's end.
    TaskComplete {
        #[serde(default)]
        last_agent_message: Lax<String>,
    },
    /// Token counts, reasoning summaries, command starts, turn starts.
    #[serde(other)]
    Other,
}

/// A `response_item` payload (what the model saw and said), by its `type`; an older rollout's
/// lines are bare response items.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Item {
    Message {
        #[serde(default)]
        role: Lax<String>,
        #[serde(default)]
        content: Value,
    },
    FunctionCall(CallItem),
    /// `apply_patch` (its input is the patch).
    CustomToolCall(CallItem),
    LocalShellCall(CallItem),
    FunctionCallOutput(OutputItem),
    CustomToolCallOutput(OutputItem),
    WebSearchCall {
        #[serde(default)]
        id: Lax<String>,
        #[serde(default)]
        action: Value,
    },
    /// Encrypted reasoning, undo snapshots, compaction markers.
    #[serde(rename = "reasoning", alias = "ghost_snapshot", alias = "compaction")]
    Bookkeeping,
    #[serde(other)]
    Unknown,
}

impl Item {
    fn of(p: &Value) -> Item {
        typed(p).unwrap_or(Item::Unknown)
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct CallItem {
    call_id: Lax<String>,
    id: Lax<String>,
    name: Lax<String>,
    /// A JSON string (function calls).
    arguments: Value,
    /// The patch (custom tool calls).
    input: Value,
    /// The command (local shell calls).
    action: Value,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct OutputItem {
    call_id: Lax<String>,
    output: Value,
}

/// What the replay of one rollout holds between its lines.
struct Replay<'a> {
    tp: &'a str,
    opts: &'a Options,
    counts: &'a Counts,
    /// The older shape: one time for the whole file.
    legacy: bool,
    /// Older rollouts have no `user_message` events; then the user's `message` items are used.
    has_user_events: bool,
    session: String,
    cwd: String,
    turn: String,
    /// When this session began (its own header), for telling a fork's copy from its own turns.
    own_start: i64,
    own_header_at: i64,
    /// A subagent's rollout: its prompts are the spawning agent's words.
    subagent: bool,
    /// Inside a fork's copy of its parent: the latest time a copied line can have.
    copy_bound: Option<i64>,
    calls: HashMap<String, Call>,
    /// Lines that made tool calls, and whether their call got a result.
    call_lines: HashMap<usize, bool>,
    /// Calls whose result was used (shell results come twice).
    done: HashSet<String>,
    last_message: Option<Answer>,
    out: Vec<Synth>,
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
    // Its time stands for every line's.
    let legacy_at = legacy_header.map(|h| {
        h["timestamp"]
            .as_str()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0)
    });
    let mut legacy_meta = legacy_header.map(|h| {
        let items: Vec<Value> = parsed.iter().skip(1).flatten().cloned().collect();
        Meta {
            id: Lax(h["id"].as_str().map(str::to_string)),
            cwd: Lax(legacy_cwd(&items)),
            ..Meta::default()
        }
    });
    if let Some(meta) = &legacy_meta {
        if meta.cwd.0.is_none() {
            // Nothing says where this session ran: it cannot be given a project.
            for _ in &lines {
                counts.line();
            }
            counts.skip(Reason::NoFolder, lines.len() as u64);
            return Vec::new();
        }
    }
    let needle: &[u8] = b"\"user_message\"";
    let mut r = Replay {
        tp,
        opts,
        counts,
        legacy: legacy_at.is_some(),
        has_user_events: text.windows(needle.len()).any(|w| w == needle),
        session: String::new(),
        cwd: String::new(),
        turn: String::new(),
        own_start: 0,
        own_header_at: 0,
        subagent: false,
        copy_bound: None,
        calls: HashMap::new(),
        call_lines: HashMap::new(),
        done: HashSet::new(),
        last_message: None,
        out: Vec::new(),
    };
    for (i, ((n, _), v)) in lines.iter().zip(parsed).enumerate() {
        counts.line();
        let Some(v) = v else {
            counts.skip(Reason::NotJson, 1);
            continue;
        };
        if let Some(at) = legacy_at {
            match legacy_meta.take().filter(|_| i == 0) {
                Some(meta) => r.meta(meta, at),
                None if v.get("record_type").is_some() => counts.skip(Reason::Bookkeeping, 1),
                None => {
                    let common = typed(&v).unwrap_or_default();
                    r.line(*n, at, &common, Record::ResponseItem(Item::of(&v)));
                }
            }
            continue;
        }
        let (Some(kind), Some(p)) = (v["type"].as_str(), v.get("payload")) else {
            counts.skip(Reason::UnknownKind, 1);
            continue;
        };
        let at = v["timestamp"]
            .as_str()
            .and_then(nmem_proto::time::parse_rfc3339_ms)
            .unwrap_or(0);
        let common = typed(p).unwrap_or_default();
        match Record::of(kind, p) {
            Record::SessionMeta(meta) => r.meta(meta, at),
            record => r.line(*n, at, &common, record),
        }
    }
    r.finish()
}

impl Replay<'_> {
    /// A `session_meta` line: the session's own header, an ancestor's (a fork's copy follows),
    /// or its own again (a resumed rollout).
    fn meta(&mut self, p: Meta, at: i64) {
        let id = p.id.str();
        if self.session.is_empty() {
            self.session = id.to_string();
            self.cwd = p.cwd.str().to_string();
            self.subagent = p.source.get("subagent").is_some();
            self.own_header_at = at;
            self.own_start = uuid7_ms(id).unwrap_or(at);
            // A fork names its parent: its copy follows, with or without the parent's header.
            if !p.forked_from_id.str().is_empty() {
                self.copy_bound = Some(at.saturating_add(2_000));
            }
            self.counts.used(1);
        } else if id != self.session && !id.is_empty() {
            // An ancestor's header: what follows is its history, copied by a fork.
            self.copy_bound = Some(
                self.copy_bound
                    .unwrap_or(at.max(self.own_header_at).saturating_add(2_000)),
            );
            self.counts.skip(Reason::CopiedFromParent, 1);
        } else {
            self.counts.skip(Reason::Bookkeeping, 1);
        }
    }

    /// Any other line, at line `n` of the file.
    fn line(&mut self, n: usize, at: i64, common: &Common, record: Record) {
        let counts = self.counts;
        if self.session.is_empty() || self.cwd.is_empty() {
            // Lines before the header cannot be placed.
            return counts.skip(Reason::NoSession, 1);
        }
        if let Some(bound) = self.copy_bound {
            let ended = match common.turn_id.0.as_deref().and_then(uuid7_ms) {
                Some(t) => t >= self.own_start,
                None => at > bound,
            };
            if !ended {
                return counts.skip(Reason::CopiedFromParent, 1);
            }
            self.copy_bound = None;
        }
        if let Some(t) = common.turn_id.0.as_deref().filter(|t| !t.is_empty()) {
            if matches!(record, Record::TurnContext)
                || matches!(common.kind.str(), "task_started" | "user_message")
            {
                self.turn = t.to_string();
            }
        }
        // Calls are remembered even before `--since`: their results may come after the cut.
        if let Record::ResponseItem(
            Item::FunctionCall(c) | Item::CustomToolCall(c) | Item::LocalShellCall(c),
        ) = &record
        {
            let shell = common.kind.str() == "local_shell_call";
            return self.call(n, at, c, shell);
        }
        if !self.opts.wants(at, &self.cwd) {
            return counts.skip(Reason::Filtered, 1);
        }
        match record {
            Record::EventMsg(Event::UserMessage { message }) => {
                self.prompt(n, at, message.str().to_string());
            }
            Record::ResponseItem(Item::Message { role, content })
                if !self.has_user_events && role.str() == "user" =>
            {
                self.prompt(n, at, message_text(&content));
            }
            Record::EventMsg(Event::ExecCommandEnd {
                call_id,
                aggregated_output,
                formatted_output,
                stdout,
                stderr,
                exit_code,
            }) => {
                let text = aggregated_output
                    .0
                    .or(formatted_output.0)
                    .unwrap_or_else(|| format!("{}{}", stdout.str(), stderr.str()));
                self.tool_event(call_id.str(), at, text, exit_code.0);
            }
            Record::ResponseItem(Item::FunctionCallOutput(o) | Item::CustomToolCallOutput(o)) => {
                let (text, code) = output_text(&o.output);
                self.tool_event(o.call_id.str(), at, text, code);
            }
            Record::ResponseItem(Item::WebSearchCall { id, action }) => {
                let query = action["query"].as_str().unwrap_or("");
                if query.is_empty() {
                    return counts.skip(Reason::Empty, 1);
                }
                let mut e = self.base("PostToolUse");
                e["tool_name"] = json!("WebSearch");
                e["tool_input"] = json!({ "query": query });
                e["tool_response"] = json!({ "results": [] });
                let id = id.0.unwrap_or(n.to_string());
                e["tool_use_id"] = json!(id);
                let id = event_id(&[&self.session, &id, "tool"]);
                self.out.push(Synth::new(id, at, Harness::Codex, &e));
                counts.used(1);
            }
            Record::ResponseItem(Item::Message { role, content })
                if !self.has_user_events && role.str() == "assistant" =>
            {
                let text = message_text(&content);
                if text.trim().is_empty() {
                    counts.skip(Reason::Empty, 1);
                } else {
                    self.answer(Answer { text, at, line: n });
                }
            }
            Record::ResponseItem(Item::Message { role, content }) => {
                // With user events, messages mirror them (user, assistant); developer and system
                // messages are the harness's instructions.
                let why = match role.str() {
                    "user" if is_scaffolding(&message_text(&content)) => Reason::Injected,
                    "user" | "assistant" => Reason::Mirror,
                    _ => Reason::Injected,
                };
                counts.skip(why, 1);
            }
            Record::EventMsg(Event::AgentMessage { message }) => {
                match message.0.filter(|m| !m.trim().is_empty()) {
                    Some(text) => self.answer(Answer { text, at, line: n }),
                    None => counts.skip(Reason::Empty, 1),
                }
            }
            Record::EventMsg(Event::TaskComplete { last_agent_message }) => {
                match last_agent_message.0.filter(|m| !m.trim().is_empty()) {
                    Some(text) => self.answer(Answer { text, at, line: n }),
                    None => counts.skip(Reason::Bookkeeping, 1),
                }
                self.flush_turn(true);
            }
            Record::Compacted => {
                let mut e = self.base("PreCompact");
                e["trigger"] = json!("auto");
                let id = event_id(&[&self.session, &n.to_string(), "compact"]);
                self.out.push(Synth::new(id, at, Harness::Codex, &e));
                counts.used(1);
            }
            // Turn settings, the display log's other events (token counts, reasoning summaries,
            // command starts), encrypted reasoning and undo snapshots.
            Record::TurnContext
            | Record::EventMsg(Event::Other)
            | Record::ResponseItem(Item::Bookkeeping) => counts.skip(Reason::Bookkeeping, 1),
            // A record kind, or a response item, this version of nmem does not know.
            Record::SessionMeta(_) | Record::Unknown | Record::ResponseItem(_) => {
                counts.skip(Reason::UnknownKind, 1);
            }
        }
    }

    /// A tool call: remembered until its output comes.
    fn call(&mut self, n: usize, at: i64, c: &CallItem, local_shell: bool) {
        let id = c.call_id.0.as_deref().or(c.id.0.as_deref()).unwrap_or("");
        let name = c
            .name
            .0
            .as_deref()
            .unwrap_or(if local_shell { "local_shell" } else { "tool" });
        let input = match (&c.arguments, &c.input, &c.action) {
            (Value::String(a), _, _) => {
                serde_json::from_str(a).unwrap_or(json!({ "arguments": a }))
            }
            (_, Value::String(patch), _) => json!({ "command": patch }),
            (_, _, a) if !a.is_null() => json!({ "action": a }),
            (a, _, _) => a.clone(),
        };
        let call = Call {
            name: name.to_string(),
            input,
            line: n,
        };
        self.calls.insert(id.to_string(), call);
        if self.opts.wants(at, &self.cwd) {
            self.call_lines.insert(n, false);
        } else {
            self.counts.skip(Reason::Filtered, 1);
        }
    }

    /// The user's words (unless they are scaffolding or a subagent's task); the pending turn
    /// ends first.
    fn prompt(&mut self, n: usize, at: i64, text: String) {
        let counts = self.counts;
        if text.trim().is_empty() {
            return counts.skip(Reason::Empty, 1);
        }
        if is_scaffolding(&text) {
            return counts.skip(Reason::Injected, 1);
        }
        if self.subagent {
            // The task the parent agent gave: stored with its spawn_agent call.
            return counts.skip(Reason::SubagentPrompt, 1);
        }
        self.flush_turn(true);
        let mut e = self.base("UserPromptSubmit");
        e["prompt"] = json!(text);
        let id = event_id(&[&self.session, &n.to_string(), "prompt"]);
        self.out.push(Synth::new(id, at, Harness::Codex, &e));
        counts.used(1);
    }

    /// A call's output, as the PostToolUse / PostToolUseFailure event of its call.
    fn tool_event(&mut self, id: &str, at: i64, text: String, code: Option<i64>) {
        let counts = self.counts;
        let Some(call) = self.calls.get(id) else {
            return counts.skip(Reason::ResultWithoutCall, 1);
        };
        if id.is_empty() || !self.done.insert(id.to_string()) {
            // Shell results come twice (event and mirror): the first wins.
            return counts.skip(Reason::Mirror, 1);
        }
        if let Some(answered) = self.call_lines.get_mut(&call.line) {
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
                let mut e = self.base("PostToolUseFailure");
                e["error"] = json!(format!("Exit code {c}\n{text}"));
                e
            }
            None => {
                let mut e = self.base("PostToolUse");
                e["tool_response"] = json!(text);
                e
            }
        };
        e["tool_name"] = json!(name);
        e["tool_input"] = input;
        e["tool_use_id"] = json!(id);
        let id = event_id(&[&self.session, id, "tool"]);
        self.out.push(Synth::new(id, at, Harness::Codex, &e));
    }

    /// A newer answer of the same turn replaces the pending one, which is then not stored.
    fn answer(&mut self, a: Answer) {
        if self.last_message.replace(a).is_some() {
            self.counts.skip(Reason::AssistantText, 1);
        }
    }

    /// The hook payload's envelope, as Codex's hooks send it; `with_turn`: with the turn's id
    /// when one is known.
    fn envelope(&self, event: &str, with_turn: bool) -> Value {
        let mut e = json!({
            "session_id": self.session,
            "cwd": self.cwd,
            "hook_event_name": event,
            "transcript_path": self.tp,
        });
        if with_turn && !self.turn.is_empty() {
            e["turn_id"] = json!(self.turn);
        }
        e
    }

    fn base(&self, event: &str) -> Value {
        self.envelope(event, true)
    }

    /// The turn's end (a Stop with the agent's last message), once per turn.
    fn flush_turn(&mut self, with_turn: bool) {
        let Some(a) = self.last_message.take() else {
            return;
        };
        let mut e = self.envelope("Stop", with_turn);
        e["last_assistant_message"] = json!(a.text);
        let key = if self.legacy {
            // One time for the whole file: the line tells the turns apart.
            format!("L{}", a.line)
        } else {
            format!("{}:{}", a.at, a.text.len())
        };
        let id = event_id(&[&self.session, &key, "stop"]);
        self.out.push(Synth::new(id, a.at, Harness::Codex, &e));
        self.counts.used(1);
    }

    fn finish(mut self) -> Vec<Synth> {
        if !self.session.is_empty() {
            // The file's last turn, which no later prompt or task_complete ended (sent, as
            // before, without its turn id).
            self.flush_turn(false);
        }
        self.counts.call_lines(&self.call_lines);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A `{timestamp, type, payload}` line.
    fn rec(kind: &str, payload: Value) -> Value {
        json!({"timestamp": "2026-01-01T10:00:00.000Z", "type": kind, "payload": payload})
    }

    fn meta() -> Value {
        rec("session_meta", json!({"id": "s", "cwd": "/p"}))
    }

    fn ev(payload: Value) -> Value {
        rec("event_msg", payload)
    }

    fn item(payload: Value) -> Value {
        rec("response_item", payload)
    }

    fn exec(id: &str) -> Value {
        item(json!({"type": "function_call", "name": "exec_command",
            "arguments": "{\"cmd\":\"cargo test\"}", "call_id": id}))
    }

    fn output(id: &str, code: i64) -> Value {
        item(json!({"type": "function_call_output", "call_id": id,
            "output": format!("Exit code: {code}\nOutput:\nok\n")}))
    }

    fn msg(role: &str, text: &str) -> Value {
        json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
    }

    /// Every line kind the format knows, and what it becomes: events, or a reason.
    #[test]
    fn every_line_kind() {
        use super::super::tests::{jsonl, opts, outcome};
        use Reason::*;
        let prompt = |t: &str| ev(json!({"type": "user_message", "message": t, "turn_id": "t1"}));
        let cases: Vec<super::super::tests::Case> = vec![
            ("a header", vec![meta()], &[], 1, &[]),
            (
                "a prompt",
                vec![meta(), prompt("fix the bug")],
                &["UserPromptSubmit"],
                2,
                &[],
            ),
            (
                "scaffolding",
                vec![
                    meta(),
                    prompt("<environment_context>x</environment_context>"),
                ],
                &[],
                1,
                &[(Injected, 1)],
            ),
            (
                "an empty prompt",
                vec![meta(), prompt(" ")],
                &[],
                1,
                &[(Empty, 1)],
            ),
            (
                "a prompt's mirror",
                vec![meta(), prompt("fix"), item(msg("user", "fix"))],
                &["UserPromptSubmit"],
                2,
                &[(Mirror, 1)],
            ),
            (
                "instructions",
                vec![meta(), item(msg("developer", "be terse"))],
                &[],
                1,
                &[(Injected, 1)],
            ),
            (
                "older prompts and answers",
                vec![
                    meta(),
                    item(msg("user", "fix")),
                    item(msg("assistant", "done")),
                ],
                &["UserPromptSubmit", "Stop"],
                3,
                &[],
            ),
            (
                "a call and its output",
                vec![meta(), exec("c1"), output("c1", 0)],
                &["PostToolUse"],
                3,
                &[],
            ),
            (
                "a failing call",
                vec![meta(), exec("c1"), output("c1", 1)],
                &["PostToolUseFailure"],
                3,
                &[],
            ),
            (
                "a shell result twice",
                vec![
                    meta(),
                    exec("c1"),
                    ev(
                        json!({"type": "exec_command_end", "call_id": "c1", "exit_code": 0, "aggregated_output": "ok"}),
                    ),
                    output("c1", 0),
                ],
                &["PostToolUse"],
                3,
                &[(Mirror, 1)],
            ),
            (
                "a patch",
                vec![
                    meta(),
                    item(
                        json!({"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch", "call_id": "c1"}),
                    ),
                    item(
                        json!({"type": "custom_tool_call_output", "call_id": "c1", "output": "Success"}),
                    ),
                ],
                &["PostToolUse"],
                3,
                &[],
            ),
            (
                "a local shell call",
                vec![
                    meta(),
                    item(
                        json!({"type": "local_shell_call", "call_id": "c1", "action": {"command": ["ls"]}}),
                    ),
                    output("c1", 0),
                ],
                &["PostToolUse"],
                3,
                &[],
            ),
            (
                "an output without call",
                vec![meta(), output("c1", 0)],
                &[],
                1,
                &[(ResultWithoutCall, 1)],
            ),
            (
                "a call without output",
                vec![meta(), exec("c1")],
                &[],
                1,
                &[(CallWithoutResult, 1)],
            ),
            (
                "a web search",
                vec![
                    meta(),
                    item(
                        json!({"type": "web_search_call", "id": "w", "action": {"query": "jiff"}}),
                    ),
                ],
                &["PostToolUse"],
                2,
                &[],
            ),
            (
                "an empty web search",
                vec![
                    meta(),
                    item(json!({"type": "web_search_call", "action": {}})),
                ],
                &[],
                1,
                &[(Empty, 1)],
            ),
            (
                "a turn's answers",
                vec![
                    meta(),
                    ev(json!({"type": "agent_message", "message": "a"})),
                    ev(json!({"type": "task_complete", "last_agent_message": "b"})),
                ],
                &["Stop"],
                2,
                &[(AssistantText, 1)],
            ),
            (
                "a turn's end without answer",
                vec![meta(), ev(json!({"type": "task_complete"}))],
                &[],
                1,
                &[(Bookkeeping, 1)],
            ),
            (
                "a compaction",
                vec![meta(), rec("compacted", json!({"message": ""}))],
                &["PreCompact"],
                2,
                &[],
            ),
            (
                "a line before the header",
                vec![prompt("fix"), meta()],
                &[],
                1,
                &[(NoSession, 1)],
            ),
            (
                "the header again",
                vec![meta(), meta()],
                &[],
                1,
                &[(Bookkeeping, 1)],
            ),
            (
                "a parent's header",
                vec![
                    meta(),
                    rec("session_meta", json!({"id": "parent", "cwd": "/p"})),
                ],
                &[],
                1,
                &[(CopiedFromParent, 1)],
            ),
            (
                "an unknown kind",
                vec![meta(), rec("hologram", json!({}))],
                &[],
                1,
                &[(UnknownKind, 1)],
            ),
            (
                "an unknown item",
                vec![meta(), item(json!({"type": "hologram"}))],
                &[],
                1,
                &[(UnknownKind, 1)],
            ),
            (
                "no payload",
                vec![meta(), json!({"type": "event_msg"})],
                &[],
                1,
                &[(UnknownKind, 1)],
            ),
            (
                "an older rollout",
                vec![
                    json!({"id": "L", "timestamp": "2025-05-07T17:24:21.000Z", "instructions": ""}),
                    json!({"record_type": "state"}),
                    msg(
                        "user",
                        "<environment_context><cwd>/p</cwd></environment_context>",
                    ),
                    msg("user", "fix"),
                ],
                &["UserPromptSubmit"],
                2,
                &[(Bookkeeping, 1), (Injected, 1)],
            ),
            (
                "an older rollout without folder",
                vec![
                    json!({"id": "L", "timestamp": "2025-05-07T17:24:21.000Z", "instructions": ""}),
                    msg("user", "fix"),
                ],
                &[],
                0,
                &[(NoFolder, 2)],
            ),
        ];
        for (what, lines, events, used, reasons) in cases {
            let c = Counts::default();
            let out = parse(jsonl(&lines).as_bytes(), "t", &opts(), &c);
            let want = (
                events.iter().map(|e| e.to_string()).collect(),
                used,
                reasons.to_vec(),
            );
            assert_eq!(outcome(&out, &c), want, "{what}");
        }
        for bookkeeping in [
            rec("turn_context", json!({"turn_id": "t1"})),
            ev(json!({"type": "token_count"})),
            item(json!({"type": "reasoning"})),
            item(json!({"type": "ghost_snapshot"})),
            item(json!({"type": "compaction"})),
        ] {
            let c = Counts::default();
            let out = parse(
                jsonl(&[meta(), bookkeeping.clone()]).as_bytes(),
                "t",
                &opts(),
                &c,
            );
            assert_eq!(
                outcome(&out, &c),
                (vec![], 1, vec![(Bookkeeping, 1)]),
                "{bookkeeping}"
            );
        }
    }

    /// A shell call becomes the Bash call the daemon knows, with the turn it belongs to.
    #[test]
    fn a_shell_call_is_bash_in_its_turn() {
        let c = Counts::default();
        let text = super::super::tests::jsonl(&[
            meta(),
            ev(json!({"type": "user_message", "message": "test it", "turn_id": "t1"})),
            exec("c1"),
            output("c1", 2),
        ]);
        let out = parse(text.as_bytes(), "t", &super::super::tests::opts(), &c);
        let p: Value = serde_json::from_slice(&out[1].payload).unwrap();
        assert_eq!(p["tool_name"], "Bash");
        assert_eq!(p["tool_input"]["command"], "cargo test");
        assert_eq!(p["error"], "Exit code 2\nok\n");
        assert_eq!(p["turn_id"], "t1");
        assert_eq!(p["tool_use_id"], "c1");
        assert_eq!(out[1].harness, Harness::Codex);
    }

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
