//! Hook payloads of each harness, normalised to one [`Envelope`] and validated.
//!
//! Both sides use this: the shim to reject malformed input before anything is stored (exit 1, one
//! line on stderr), the daemon to route the event to its extractor. Only the minimum is required
//! (an object, a safe session id, a string cwd, a string event name); every other field is
//! optional and unknown fields are ignored, because harnesses add fields often.

use serde_json::Value;
use std::fmt;

/// Which harness sent the payload (`nmem record --harness …`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Harness {
    ClaudeCode,
    Codex,
    /// Codex CLI's legacy `notify` program: kebab-case JSON as the last argument.
    CodexNotify,
    Gemini,
    Cursor,
}

impl Harness {
    pub const ALL: [Harness; 5] = [
        Harness::ClaudeCode,
        Harness::Codex,
        Harness::CodexNotify,
        Harness::Gemini,
        Harness::Cursor,
    ];

    pub fn parse(s: &str) -> Option<Harness> {
        Harness::ALL.into_iter().find(|h| h.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Harness::ClaudeCode => "claude-code",
            Harness::Codex => "codex",
            Harness::CodexNotify => "codex-notify",
            Harness::Gemini => "gemini",
            Harness::Cursor => "cursor",
        }
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
        use Event::*;
        match harness {
            Harness::ClaudeCode | Harness::Codex => match name {
                "SessionStart" => Some(SessionStart),
                "UserPromptSubmit" => Some(UserPrompt),
                "PostToolUse" => Some(ToolUse),
                "PostToolUseFailure" => Some(ToolFailure),
                "PreCompact" => Some(PreCompact),
                "PostCompact" => Some(PostCompact),
                "Stop" => Some(Stop),
                "SubagentStop" => Some(SubagentStop),
                "StopFailure" => Some(StopFailure),
                "SessionEnd" => Some(SessionEnd),
                _ => None,
            },
            Harness::CodexNotify => match name {
                "agent-turn-complete" => Some(Stop),
                _ => None,
            },
            Harness::Gemini => match name {
                "SessionStart" => Some(SessionStart),
                "BeforeAgent" => Some(UserPrompt),
                "AfterTool" => Some(ToolUse),
                "PreCompress" => Some(PreCompact),
                "AfterAgent" => Some(Stop),
                "SessionEnd" => Some(SessionEnd),
                _ => None,
            },
            Harness::Cursor => match name {
                "sessionStart" => Some(SessionStart),
                "beforeSubmitPrompt" => Some(UserPrompt),
                "afterShellExecution" | "afterFileEdit" | "afterMCPExecution" | "postToolUse" => {
                    Some(ToolUse)
                }
                "afterAgentResponse" | "stop" => Some(Stop),
                "sessionEnd" => Some(SessionEnd),
                _ => None,
            },
        }
    }
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
    let string = |field: &'static str| -> Result<&str, Rejection> {
        match obj.get(field) {
            None | Some(Value::Null) => Err(Rejection::Missing(field)),
            Some(Value::String(s)) => Ok(s.as_str()),
            Some(_) => Err(Rejection::WrongType(field, "a string")),
        }
    };
    let (session_field, cwd_field, event_field): (&'static str, &'static str, &'static str) =
        match harness {
            Harness::CodexNotify => ("thread-id", "cwd", "type"),
            Harness::Cursor => ("conversation_id", "cwd", "hook_event_name"),
            _ => ("session_id", "cwd", "hook_event_name"),
        };
    let session_id = match harness {
        // Cursor names the session `conversation_id`; some builds' sessionStart says `session_id`.
        Harness::Cursor if !obj.contains_key("conversation_id") => string("session_id")?,
        _ => string(session_field)?,
    };
    if !is_safe_session_id(session_id) {
        return Err(Rejection::UnsafeSessionId);
    }
    let cwd = match harness {
        // Cursor has no cwd on most events: the first workspace root is the project.
        Harness::Cursor => match obj.get("workspace_roots") {
            Some(Value::Array(roots)) if !roots.is_empty() => match &roots[0] {
                Value::String(s) => s.as_str(),
                _ => return Err(Rejection::WrongType("workspace_roots", "a list of strings")),
            },
            Some(Value::Array(_)) | None | Some(Value::Null) => string(cwd_field)?,
            Some(_) => return Err(Rejection::WrongType("workspace_roots", "a list of strings")),
        },
        _ => string(cwd_field)?,
    };
    let event_name = string(event_field)?;
    Ok(Envelope {
        harness,
        session_id,
        cwd,
        event_name,
        event: Event::from_name(harness, event_name),
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
