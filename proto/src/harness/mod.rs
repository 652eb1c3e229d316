//! Hook payloads of each harness, normalised to one [`Envelope`] and validated.
//!
//! Both sides use this: the shim to reject malformed input before anything is stored (exit 1, one
//! line on stderr), the daemon to route the event to its extractor. Only the minimum is required
//! (an object, a safe session id, a string cwd, a string event name); every other field is
//! optional and unknown fields are ignored, because harnesses add fields often.

use serde_json::{Map, Value};
use std::fmt;

mod claude_code;
pub mod codex;
mod cursor;
mod gemini;

/// Which harness sent the payload: the one name of a harness everywhere (`nmem record
/// --harness`, `nmem install --harness`, `nmem import --harness`, the `x-nmem-harness` header,
/// spool files, the database). What differs per harness lives in its module's [`Spec`] (here)
/// and in the daemon's, `nmem install`'s and `nmem import`'s per-harness modules (see
/// ARCHITECTURE.md, "Adding a harness").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Harness {
    ClaudeCode,
    Codex,
    /// Codex CLI's legacy `notify` program: kebab-case JSON as the last argument.
    CodexNotify,
    Gemini,
    Cursor,
}

/// What the hook and the contract know of one harness: its names, its event names, where its
/// payload puts the envelope, and what the hook prints for it. One per harness module.
#[derive(Debug)]
pub struct Spec {
    pub harness: Harness,
    /// The canonical name: on the command line, in headers, spool files and the database.
    pub name: &'static str,
    /// Other names accepted wherever a harness is named (the one alias table).
    pub aliases: &'static [&'static str],
    /// The name people know it by, for summaries.
    pub title: &'static str,
    /// Its event names to the events nmem stores; `None` for an event nmem stores nothing for.
    pub event: fn(&str) -> Option<Event>,
    /// Where the payload keeps the session id, the working folder and the event name.
    pub envelope: for<'a> fn(&'a Map<String, Value>) -> Result<Fields<'a>, Rejection>,
    /// The payload is the last command-line argument, not stdin (Codex's `notify`).
    pub payload_in_argument: bool,
    /// What the hook prints when the daemon printed nothing and the harness waits for a verdict
    /// on this event (Cursor's beforeSubmitPrompt), also when recording is paused.
    pub verdict: fn(Event) -> Option<&'static str>,
    /// The SessionStart reply that carries the digest (`wrapped`) in the harness's own shape.
    pub session_start_output: fn(&str) -> Value,
    /// The hooks `nmem install` registers for it (a module under `shim/src/install/` writes
    /// them into the harness's settings); none: installed as part of another harness, or not at
    /// all.
    pub hooks: &'static [Hook],
    /// `nmem import` reads its session files (a module under `shim/src/import/`).
    pub imports: bool,
}

/// One hook `nmem install` registers: the event in the harness's own terms, whether it takes a
/// tool matcher (`*`, every tool), and how long the harness may wait for `nmem record`.
#[derive(Debug, Clone, Copy)]
pub struct Hook {
    pub event: &'static str,
    pub tools: bool,
    pub timeout_s: u32,
}

impl Hook {
    /// An event without a tool matcher, with the usual 5 s.
    const fn on(event: &'static str) -> Hook {
        Hook {
            event,
            tools: false,
            timeout_s: 5,
        }
    }
}

impl Spec {
    /// Whether `nmem install` wires it.
    pub fn installs(&self) -> bool {
        !self.hooks.is_empty()
    }
}

/// The envelope's three fields, borrowed from the payload.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'a> {
    pub session_id: &'a str,
    pub cwd: &'a str,
    pub event_name: &'a str,
}

impl Harness {
    pub const ALL: [Harness; 5] = [
        Harness::ClaudeCode,
        Harness::Codex,
        Harness::CodexNotify,
        Harness::Gemini,
        Harness::Cursor,
    ];

    /// Its row. The one `match` over harnesses in the contract.
    pub fn spec(self) -> &'static Spec {
        match self {
            Harness::ClaudeCode => &claude_code::SPEC,
            Harness::Codex => &codex::SPEC,
            Harness::CodexNotify => &codex::NOTIFY_SPEC,
            Harness::Gemini => &gemini::SPEC,
            Harness::Cursor => &cursor::SPEC,
        }
    }

    /// A harness by its name or one of its aliases (the same everywhere a harness is named).
    pub fn parse(s: &str) -> Option<Harness> {
        Harness::ALL.into_iter().find(|h| {
            let spec = h.spec();
            spec.name == s || spec.aliases.contains(&s)
        })
    }

    pub fn as_str(self) -> &'static str {
        self.spec().name
    }

    /// The harnesses a command-line choice names: one harness by name or alias, or `all`; only
    /// those `offered` (what `nmem install` or `nmem import` can do something with).
    pub fn choose(s: &str, offered: impl Fn(&Spec) -> bool) -> Option<Vec<Harness>> {
        if s == "all" {
            return Some(
                Harness::ALL
                    .into_iter()
                    .filter(|h| offered(h.spec()))
                    .collect(),
            );
        }
        Harness::parse(s)
            .filter(|h| offered(h.spec()))
            .map(|h| vec![h])
    }

    /// The canonical names, for messages: "claude-code, codex, codex-notify, gemini, cursor".
    pub fn names(filter: impl Fn(&Spec) -> bool) -> String {
        Harness::ALL
            .iter()
            .map(|h| h.spec())
            .filter(|s| filter(s))
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl fmt::Display for Harness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The events nmem stores something for, whatever the harness calls them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Event {
    SessionStart,
    UserPrompt,
    /// A tool call that finished (PostToolUse, AfterTool, afterShellExecution, …).
    ToolUse,
    /// A tool call that failed (Claude Code's PostToolUseFailure).
    ToolFailure,
    PreCompact,
    PostCompact,
    /// The end of an agent turn (Stop, AfterAgent, afterAgentResponse, Codex notify).
    Stop,
    SubagentStop,
    StopFailure,
    SessionEnd,
}

impl Event {
    /// Map a harness's event name to the event nmem stores, or `None` when nmem stores nothing
    /// for it (PreToolUse, Notification, … and names nmem does not know yet).
    pub fn from_name(harness: Harness, name: &str) -> Option<Event> {
        (harness.spec().event)(name)
    }
}

/// The SessionStart reply of Claude Code and of the harnesses that copy its hook schema.
pub(crate) fn hook_specific_output(wrapped: &str) -> Value {
    serde_json::json!({
        "hookSpecificOutput": { "hookEventName": "SessionStart", "additionalContext": wrapped }
    })
}

/// No verdict: the harness does not wait for one.
pub(crate) fn no_verdict(_: Event) -> Option<&'static str> {
    None
}

/// A required string field of the payload.
pub(crate) fn string<'a>(
    obj: &'a Map<String, Value>,
    field: &'static str,
) -> Result<&'a str, Rejection> {
    match obj.get(field) {
        None | Some(Value::Null) => Err(Rejection::Missing(field)),
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(Rejection::WrongType(field, "a string")),
    }
}

/// The session id field, which must be safe (it may name files): read first, so an unsafe id is
/// refused before anything else is looked at.
pub(crate) fn session<'a>(
    obj: &'a Map<String, Value>,
    field: &'static str,
) -> Result<&'a str, Rejection> {
    let id = string(obj, field)?;
    if !is_safe_session_id(id) {
        return Err(Rejection::UnsafeSessionId);
    }
    Ok(id)
}

/// The envelope of Claude Code's hook schema (`session_id`, `cwd`, `hook_event_name`), which
/// Codex and Gemini CLI copy.
pub(crate) fn claude_fields(obj: &Map<String, Value>) -> Result<Fields<'_>, Rejection> {
    Ok(Fields {
        session_id: session(obj, "session_id")?,
        cwd: string(obj, "cwd")?,
        event_name: string(obj, "hook_event_name")?,
    })
}

/// The minimum every payload must carry, borrowed from the parsed JSON.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    pub harness: Harness,
    pub session_id: &'a str,
    pub cwd: &'a str,
    /// The harness's own name for the event.
    pub event_name: &'a str,
    /// What nmem stores for it; `None` means nothing (exit 0 all the same).
    pub event: Option<Event>,
}

/// Why a payload was rejected. `Display` is the one line the shim prints on stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rejection {
    NotJson(String),
    NotAnObject(&'static str),
    Missing(&'static str),
    WrongType(&'static str, &'static str),
    UnsafeSessionId,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::NotJson(e) => write!(f, "the hook payload is not valid JSON: {e}"),
            Rejection::NotAnObject(kind) => {
                write!(f, "the hook payload must be a JSON object, got {kind}")
            }
            Rejection::Missing(field) => write!(f, "the hook payload has no `{field}`"),
            Rejection::WrongType(field, want) => {
                write!(f, "the hook payload's `{field}` must be {want}")
            }
            Rejection::UnsafeSessionId => f.write_str(
                "the hook payload's session id must match [A-Za-z0-9][A-Za-z0-9._:-]{0,127}",
            ),
        }
    }
}

impl std::error::Error for Rejection {}

/// Parse raw payload bytes. Strict: one JSON value, valid UTF-8 everywhere, nesting bounded by
/// serde_json's recursion limit, nothing after it. One leniency: a lone UTF-16 surrogate escape
/// (`"\udc9d"`, what JavaScript's `JSON.stringify` writes for a string cut inside an emoji)
/// becomes U+FFFD instead of refusing the whole event.
pub fn parse(bytes: &[u8]) -> Result<Value, Rejection> {
    match serde_json::from_slice(bytes) {
        Ok(v) => Ok(v),
        // Only payloads serde refused are scanned (the hot path never pays for it), and the
        // repaired copy must then parse strictly: everything else still fails as before.
        Err(e) => match replace_lone_surrogates(bytes) {
            Some(fixed) => serde_json::from_slice(&fixed),
            None => Err(e),
        }
        .map_err(|e| Rejection::NotJson(e.to_string())),
    }
}

/// A copy of `bytes` with every unpaired `\uD800`–`\uDFFF` escape inside a JSON string replaced
/// by `\uFFFD` (same length), or `None` when there is none. Escaped backslashes (`\\udc9d`) and
/// text outside strings are left alone; a well-formed pair (high then low) is kept.
pub fn replace_lone_surrogates(bytes: &[u8]) -> Option<Vec<u8>> {
    fn surrogate_at(b: &[u8], i: usize) -> Option<u16> {
        // `\u` then four hex digits naming a surrogate.
        if b.get(i) != Some(&b'\\') || b.get(i + 1) != Some(&b'u') {
            return None;
        }
        let hex = std::str::from_utf8(b.get(i + 2..i + 6)?).ok()?;
        let v = u16::from_str_radix(hex, 16).ok()?;
        (0xD800..=0xDFFF).contains(&v).then_some(v)
    }
    let mut out: Option<Vec<u8>> = None;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => in_string = !in_string,
            b'\\' if in_string => {
                match surrogate_at(bytes, i) {
                    Some(0xD800..=0xDBFF)
                        if surrogate_at(bytes, i + 6).is_some_and(|lo| lo >= 0xDC00) =>
                    {
                        i += 12; // a proper pair
                        continue;
                    }
                    Some(_) => {
                        let o = out.get_or_insert_with(|| bytes.to_vec());
                        o[i + 2..i + 6].copy_from_slice(b"FFFD");
                        i += 6;
                        continue;
                    }
                    None => i += 1, // skip the escaped character, whatever it is
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Normalise and validate a parsed payload.
pub fn envelope(harness: Harness, v: &Value) -> Result<Envelope<'_>, Rejection> {
    let obj = match v {
        Value::Object(o) => o,
        Value::Array(_) => return Err(Rejection::NotAnObject("an array")),
        Value::Null => return Err(Rejection::NotAnObject("null")),
        Value::String(_) => return Err(Rejection::NotAnObject("a string")),
        Value::Number(_) => return Err(Rejection::NotAnObject("a number")),
        Value::Bool(_) => return Err(Rejection::NotAnObject("a boolean")),
    };
    let spec = harness.spec();
    let f = (spec.envelope)(obj)?;
    Ok(Envelope {
        harness,
        session_id: f.session_id,
        cwd: f.cwd,
        event_name: f.event_name,
        event: (spec.event)(f.event_name),
    })
}

/// `[A-Za-z0-9][A-Za-z0-9._:-]{0,127}`: session ids may name files, so nothing else passes.
pub fn is_safe_session_id(id: &str) -> bool {
    let b = id.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b[1..]
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b':' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let cases: &[(&[u8], &str)] = &[
            (br#"{"a":"x\udc9d"}"#, "x\u{FFFD}"),
            (br#"{"a":"\ud83d"}"#, "\u{FFFD}"),
            (br#"{"a":"\ud83d\u0041"}"#, "\u{FFFD}A"),
            (br#"{"a":"\udc9d\ud83d"}"#, "\u{FFFD}\u{FFFD}"),
            // A proper pair next to a lone one stays an emoji.
            (br#"{"a":"\ud83d\ude00\ud83d"}"#, "\u{1F600}\u{FFFD}"),
            // An escaped backslash is not an escape.
            (br#"{"a":"\\udc9d"}"#, "\\udc9d"),
        ];
        for (bytes, want) in cases {
            let v =
                parse(bytes).unwrap_or_else(|e| panic!("{}: {e}", String::from_utf8_lossy(bytes)));
            assert_eq!(v["a"], *want, "{}", String::from_utf8_lossy(bytes));
        }
        assert_eq!(replace_lone_surrogates(br#"{"a":"\\udc9d"}"#), None);
        assert_eq!(
            replace_lone_surrogates(br#"{"\udc9d":1}"#).unwrap(),
            br#"{"\uFFFD":1}"#
        );
    }

    #[test]
    fn every_name_and_alias_names_one_harness() {
        let mut seen = std::collections::HashSet::new();
        for h in Harness::ALL {
            let spec = h.spec();
            assert_eq!(spec.harness, h, "{h:?}'s spec is another harness's");
            for name in std::iter::once(&spec.name).chain(spec.aliases) {
                assert!(seen.insert(*name), "`{name}` names two harnesses");
                assert_eq!(Harness::parse(name), Some(h), "`{name}`");
            }
        }
        assert_eq!(Harness::parse("claude"), Some(Harness::ClaudeCode));
        assert_eq!(
            Harness::parse("all"),
            None,
            "`all` is a choice of the CLI, not a harness"
        );
        assert_eq!(Harness::parse("Claude-Code"), None);
    }

    /// Every hook `nmem install` registers is for an event the harness's table knows (a renamed
    /// or mistyped event would register a hook that records nothing), once.
    #[test]
    fn every_installed_hook_is_a_known_event() {
        for h in Harness::ALL {
            let mut seen = std::collections::HashSet::new();
            for hook in h.spec().hooks {
                assert!(
                    Event::from_name(h, hook.event).is_some(),
                    "{h}: `{}` is installed but maps to no event",
                    hook.event
                );
                assert!(seen.insert(hook.event), "{h}: `{}` twice", hook.event);
                assert!(hook.timeout_s > 0, "{h}: `{}`", hook.event);
            }
        }
        assert!(!Harness::CodexNotify.spec().installs());
    }

    #[test]
    fn hook_output_per_harness() {
        for h in Harness::ALL {
            let out = (h.spec().session_start_output)("<nmem-context>x</nmem-context>");
            let text = out
                .pointer("/hookSpecificOutput/additionalContext")
                .or_else(|| out.get("additional_context"));
            assert_eq!(
                text.and_then(Value::as_str),
                Some("<nmem-context>x</nmem-context>"),
                "{h}"
            );
            let verdict = (h.spec().verdict)(Event::UserPrompt);
            assert_eq!(verdict.is_some(), h == Harness::Cursor, "{h}");
            if let Some(v) = verdict {
                assert!(parse(v.as_bytes()).is_ok(), "{h}'s verdict is JSON");
            }
            for e in [Event::ToolUse, Event::SessionStart, Event::Stop] {
                assert_eq!((h.spec().verdict)(e), None, "{h} {e:?}");
            }
        }
    }

    #[test]
    fn session_id_charset() {
        assert!(is_safe_session_id("7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47"));
        assert!(is_safe_session_id("a"));
        assert!(is_safe_session_id(&"a".repeat(128)));
        assert!(!is_safe_session_id(&"a".repeat(129)));
        assert!(!is_safe_session_id(""));
        assert!(!is_safe_session_id("../../etc/passwd"));
        assert!(!is_safe_session_id(".hidden"));
        assert!(!is_safe_session_id("a/b"));
        assert!(!is_safe_session_id("a b"));
    }

    #[test]
    fn cursor_uses_conversation_id_and_workspace_root() {
        let v =
            parse(br#"{"conversation_id":"c1","workspace_roots":["/w"],"hook_event_name":"stop"}"#)
                .unwrap();
        let e = envelope(Harness::Cursor, &v).unwrap();
        assert_eq!(
            (e.session_id, e.cwd, e.event),
            ("c1", "/w", Some(Event::Stop))
        );
    }

    #[test]
    fn codex_notify_is_kebab_case() {
        let v = parse(br#"{"type":"agent-turn-complete","thread-id":"t1","cwd":"/w"}"#).unwrap();
        let e = envelope(Harness::CodexNotify, &v).unwrap();
        assert_eq!(
            (e.session_id, e.cwd, e.event),
            ("t1", "/w", Some(Event::Stop))
        );
    }

    #[test]
    fn unknown_event_is_valid_but_stores_nothing() {
        let v =
            parse(br#"{"session_id":"s","cwd":"/w","hook_event_name":"PostToolUsed"}"#).unwrap();
        assert_eq!(envelope(Harness::ClaudeCode, &v).unwrap().event, None);
    }

    #[test]
    fn rejections() {
        let bad: &[(&[u8], Rejection)] = &[
            (b"[]", Rejection::NotAnObject("an array")),
            (
                br#"{"cwd":"/w","hook_event_name":"Stop"}"#,
                Rejection::Missing("session_id"),
            ),
            (
                br#"{"session_id":1,"cwd":"/w","hook_event_name":"Stop"}"#,
                Rejection::WrongType("session_id", "a string"),
            ),
            (
                br#"{"session_id":"s","cwd":["/w"],"hook_event_name":"Stop"}"#,
                Rejection::WrongType("cwd", "a string"),
            ),
            (
                br#"{"session_id":"s","cwd":"/w"}"#,
                Rejection::Missing("hook_event_name"),
            ),
        ];
        for (bytes, want) in bad {
            let v = parse(bytes).unwrap();
            assert_eq!(envelope(Harness::ClaudeCode, &v).unwrap_err(), *want);
        }
        assert!(matches!(parse(b"{} x"), Err(Rejection::NotJson(_))));
        // A lone surrogate does not excuse anything else.
        assert!(matches!(
            parse(br#"{"a":"\udc9d"} x"#),
            Err(Rejection::NotJson(_))
        ));
        assert!(matches!(
            parse(b"{\"a\":\"\\udc9d\xff\"}"),
            Err(Rejection::NotJson(_))
        ));
        assert!(matches!(parse(b"  "), Err(Rejection::NotJson(_))));
    }
}
