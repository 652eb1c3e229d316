//! From a raw hook payload to what is stored: normalise per harness, extract per event and per
//! tool, redact. Deterministic, no LLM, no I/O but the project lookup.
//!
//! One hook event gives zero or one observation, or one prompt, plus a change to its session
//! ([`SessionEffect`]). Adding a tool is one file under `tools/` plus its fixture test; adding a
//! harness is one file under `harness/`.

mod harness;
mod lifecycle;
pub mod project;
pub mod reasoning;
mod text;
mod tools;

use crate::redact::Redactor;
use nmem_proto::harness::{self as h, Event, Harness, Rejection};
use serde_json::{Map, Value};

pub use project::{Project, ProjectResolver};

/// An event as the shim delivered it (or the spool kept it).
#[derive(Debug, Clone)]
pub struct RawEvent {
    pub event_id: String,
    pub received_at: i64,
    pub harness: Harness,
    pub payload: Vec<u8>,
}

/// A new row of `observations`, before the writer assigns its id and prompt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Obs {
    pub obs_type: &'static str,
    pub tool_name: Option<String>,
    /// Absolute.
    pub file_path: Option<String>,
    /// Relative to the project root, when inside it.
    pub rel_path: Option<String>,
    pub content: String,
    pub metadata: Map<String, Value>,
    pub tool_use_id: Option<String>,
}

/// A new row of `prompts`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewPrompt {
    pub source: &'static str,
    pub content: String,
    pub prompt_uid: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Observation(Obs),
    Prompt(NewPrompt),
    Nothing,
}

/// What an event changes on its session row.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum SessionEffect {
    #[default]
    None,
    Start {
        source: String,
        model: Option<String>,
        title: Option<String>,
        transcript_path: Option<String>,
    },
    /// A turn ended: refresh the signature (a session may never send SessionEnd).
    TurnEnd,
    Compaction,
    End {
        reason: Option<String>,
    },
}

/// Everything the writer needs to store one event.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub event_id: String,
    pub received_at: i64,
    /// Where it came from: a harness name, or `nmem` for what nmem's own tools save.
    pub harness: &'static str,
    pub session_id: String,
    pub cwd: String,
    pub project: Project,
    pub event: Event,
    pub event_name: String,
    pub record: Record,
    pub effect: SessionEffect,
    /// Agent reasoning read from the transcript since the last event, stored before the record.
    pub thoughts: Vec<reasoning::Thought>,
    /// The transcript offset to store once this event is committed.
    pub transcript_offset: Option<u64>,
    /// How many secrets redaction replaced in this event.
    pub redactions: u32,
}

/// Limits on what is kept of long text.
#[derive(Debug, Clone)]
pub struct Limits {
    pub prompt_chars: usize,
    pub message_chars: usize,
    pub summary_chars: usize,
    pub content_chars: usize,
    pub output_head: usize,
    pub output_tail: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            prompt_chars: 8_000,
            message_chars: 2_000,
            summary_chars: 8_000,
            content_chars: 2_000,
            output_head: 1_000,
            output_tail: 1_000,
        }
    }
}

/// The daemon's ingest state: shared, read-mostly.
pub struct Ingest {
    pub projects: ProjectResolver,
    pub redactor: Redactor,
    pub limits: Limits,
    pub tailer: reasoning::Tailer,
    /// The committed transcript offset of a session (from the database), the first time it is seen.
    pub stored_offset: Box<dyn Fn(&str) -> u64 + Send + Sync>,
    /// Sessions inside a turn whose prompt was private from start to end: nothing of it is kept.
    pub private_turns: std::sync::Mutex<std::collections::HashSet<String>>,
    /// Projects that are never recorded.
    pub excluded: std::collections::HashSet<String>,
}

impl Ingest {
    pub fn new(
        projects: ProjectResolver,
        redactor: Redactor,
        stored_offset: Box<dyn Fn(&str) -> u64 + Send + Sync>,
    ) -> Ingest {
        Ingest {
            projects,
            redactor,
            limits: Limits::default(),
            tailer: reasoning::Tailer::default(),
            stored_offset,
            private_turns: Default::default(),
            excluded: Default::default(),
        }
    }
}

/// Why an event cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("{0}")]
    Invalid(#[from] Rejection),
}

impl Ingest {
    /// Parse, validate, extract and redact one event. `Ok(None)`: valid, but nmem stores nothing
    /// for it (an unknown or ignored event, nmem's own tool call, a fully private prompt).
    pub fn prepare(&self, raw: &RawEvent) -> Result<Option<Prepared>, PrepareError> {
        let value = h::parse(&raw.payload)?;
        let env = h::envelope(raw.harness, &value)?;
        let Some(event) = env.event else {
            return Ok(None);
        };
        let obj = value.as_object().expect("envelope checked it is an object");
        let mut project = self.projects.resolve(env.cwd);
        if self.excluded.contains(&project.name) {
            return Ok(None);
        }
        if event == Event::SessionStart {
            // Read once per session start (one small file), not cached: checkouts change.
            project.branch = project.read_branch();
        }
        let cx = Cx {
            harness: raw.harness,
            event,
            obj,
            cwd: env.cwd,
            project: &project,
            limits: &self.limits,
        };
        let (record, effect) = match event {
            Event::ToolUse | Event::ToolFailure => {
                let Some(call) = harness::tool_call(&cx) else {
                    return Ok(None);
                };
                match tools::extract(&cx, &call) {
                    Some(obs) => (Record::Observation(obs), SessionEffect::None),
                    None => return Ok(None),
                }
            }
            _ => lifecycle::extract(&cx),
        };
        // Reasoning first: it is older than the event that brought it.
        let tail = match (raw.harness, cx.str("transcript_path")) {
            (Harness::ClaudeCode, Some(path)) => {
                self.tailer
                    .tail(env.session_id, path, self.limits.prompt_chars, || {
                        (self.stored_offset)(env.session_id)
                    })
            }
            _ => reasoning::Tail::default(),
        };
        let mut prepared = Prepared {
            event_id: raw.event_id.clone(),
            received_at: raw.received_at,
            harness: raw.harness.as_str(),
            session_id: env.session_id.to_string(),
            cwd: env.cwd.to_string(),
            project: project.clone(),
            event,
            event_name: env.event_name.to_string(),
            record,
            effect,
            thoughts: tail.thoughts,
            transcript_offset: tail.offset,
            redactions: 0,
        };
        let fully_private = !self.redactor.apply(&mut prepared);
        if self.in_private_turn(&prepared, fully_private) {
            // Keep nothing of the turn, but move past its reasoning in the transcript.
            prepared.record = Record::Nothing;
            prepared.effect = SessionEffect::None;
            prepared.thoughts.clear();
            prepared.redactions = 0;
            if prepared.transcript_offset.is_none() {
                return Ok(None);
            }
        }
        Ok(Some(prepared))
    }
}

impl Ingest {
    /// Track turns whose prompt was entirely private: from that prompt until the turn ends (the
    /// next prompt, Stop, or a new session start), nothing is kept. Returns whether this event
    /// belongs to such a turn.
    fn in_private_turn(&self, p: &Prepared, fully_private_prompt: bool) -> bool {
        let mut turns = self.private_turns.lock().unwrap();
        match p.event {
            Event::UserPrompt if fully_private_prompt => {
                turns.insert(p.session_id.clone());
                true
            }
            Event::UserPrompt | Event::SessionStart | Event::SessionEnd => {
                turns.remove(&p.session_id);
                false
            }
            Event::Stop => turns.remove(&p.session_id),
            _ => turns.contains(&p.session_id),
        }
    }
}

/// What an extractor sees.
pub(crate) struct Cx<'a> {
    pub harness: Harness,
    pub event: Event,
    pub obj: &'a Map<String, Value>,
    pub cwd: &'a str,
    pub project: &'a Project,
    pub limits: &'a Limits,
}

impl<'a> Cx<'a> {
    pub fn str(&self, key: &str) -> Option<&'a str> {
        self.obj.get(key).and_then(Value::as_str)
    }
}

/// A tool call, normalised across harnesses (names are Claude Code's where a tool has a
/// counterpart there).
#[derive(Debug)]
pub(crate) struct ToolCall<'a> {
    pub name: String,
    pub input: std::borrow::Cow<'a, Value>,
    pub response: Option<std::borrow::Cow<'a, Value>>,
    pub tool_use_id: Option<&'a str>,
    /// Set when the call failed: the error text and the exit code when one is known.
    pub failure: Option<(String, Option<i64>)>,
}

#[cfg(test)]
mod fixture_tests;
