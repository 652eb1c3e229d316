//! From a raw hook payload to what is stored: normalise per harness, extract per event and per
//! tool, redact. Deterministic, no LLM, no I/O but the project lookup.
//!
//! One hook event gives zero or one observation, or one prompt, plus a change to its session
//! ([`SessionEffect`]). Adding a tool is one file under `tools/` plus its fixture test; what
//! differs per harness is its module under `harness/` (the daemon's half; ARCHITECTURE.md,
//! "Adding a harness", lists the rest).

mod bounds;
pub(crate) mod clean;
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

impl RawEvent {
    /// The one way an event from outside (a hook's headers, a batch line, a spool file) becomes
    /// a `RawEvent`: its id and harness are checked here, its time by [`Ingest::prepare`].
    pub fn new(
        event_id: String,
        received_at: i64,
        harness: &str,
        payload: Vec<u8>,
    ) -> Result<RawEvent, String> {
        check_event_id(&event_id)?;
        let harness = Harness::parse(harness).ok_or_else(|| {
            format!(
                "unknown harness `{}`: one of {}",
                harness.escape_debug(),
                Harness::names(|_| true)
            )
        })?;
        Ok(RawEvent {
            event_id,
            received_at,
            harness,
            payload,
        })
    }
}

/// An event id is what makes a replay harmless (unique in `observations` and `prompts`) and
/// names its spool file: 1-64 letters, digits or dashes.
fn check_event_id(id: &str) -> Result<(), String> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "the event id `{}` must be 1-64 letters, digits or dashes (header `{}`)",
            id.escape_debug(),
            nmem_proto::wire::H_EVENT_ID
        ))
    }
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
    /// What dedup compares ([`crate::dedup::target_hash`]), computed from the unredacted call: two
    /// paths that differ only in a redacted segment are two files. A hash, never stored.
    pub dedup_target: Option<String>,
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
    /// A turn ended: count it and refresh the signature (a session may never send SessionEnd).
    TurnEnd,
    /// A subagent finished: count it.
    SubagentEnd,
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
    /// The last plan of each session, for harnesses whose plan updates carry only the new list.
    pub plans: PlanMemory,
}

/// A plan item: its identity (an id, else its text), its text and its status.
pub(crate) type PlanItem = (String, String, String);

/// The last plan seen in each session (in memory, bounded): a plan update is stored as what
/// changed since then. After a restart the first update is stored whole again.
#[derive(Default)]
pub struct PlanMemory(std::sync::Mutex<std::collections::HashMap<String, Vec<PlanItem>>>);

impl PlanMemory {
    const SESSIONS: usize = 1_000;

    /// Remember `plan` as the session's latest; the one before it, if any.
    pub(crate) fn swap(&self, session_id: &str, plan: Vec<PlanItem>) -> Option<Vec<PlanItem>> {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= Self::SESSIONS && !m.contains_key(session_id) {
            m.clear();
        }
        m.insert(session_id.to_string(), plan)
    }
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
            plans: Default::default(),
        }
    }
}

/// What [`Ingest::disk_free`] found: preparing opens nothing; the project, when the event gets
/// as far as needing one, and what may be read of its transcript, when it names one to tail.
#[derive(Debug, Clone)]
pub struct DiskFree {
    project: Option<Project>,
    transcript: Option<reasoning::Here>,
}

impl DiskFree {
    /// An event that fails before anything would be read.
    const FAILS: DiskFree = DiskFree {
        project: None,
        transcript: None,
    };
}

/// Why an event cannot be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    #[error("{0}")]
    Invalid(#[from] Rejection),
    /// The receive time is outside what nmem stores (`nmem_proto::time::check_stored_ms`).
    #[error("received-at: {0}")]
    BadTime(String),
    #[error("{0}")]
    TooLong(String),
}

impl Ingest {
    /// Parse, validate, extract and redact one event. `Ok(None)`: valid, but nmem stores nothing
    /// for it (an unknown or ignored event, nmem's own tool call, a fully private prompt).
    pub fn prepare(&self, raw: &RawEvent) -> Result<Option<Prepared>, PrepareError> {
        let value = self.parse(raw)?;
        self.prepare_parsed(raw, &value, None)
    }

    /// The first step of [`Ingest::prepare`]: the receive time checked and the payload parsed.
    /// Reads nothing from disk.
    pub fn parse(&self, raw: &RawEvent) -> Result<Value, PrepareError> {
        // Every way in (a hook's header, a batch line, a spool file) passes here.
        nmem_proto::time::check_stored_ms(raw.received_at).map_err(PrepareError::BadTime)?;
        Ok(h::parse(&raw.payload)?)
    }

    /// Whether the rest of preparing `value` opens no file, and if so the project it needs (from
    /// the cache; [`Ingest::prepare_parsed`] takes it so it cannot look it up again) and what
    /// may be read of its transcript. `None` when preparing would open files, which the async
    /// workers must not (a slow file system would stall every request on them): a project not
    /// yet cached (its git root is looked up), a SessionStart (the branch is read), or a
    /// transcript to tail that a drainer has not just looked at ([`reasoning::Tailer::here`]:
    /// its growth is read through a descriptor a drainer opened, on a local file system only).
    /// Also `Some` for a payload that fails before any of these (its error is reported as
    /// usual: nothing is read to find it). The one routing predicate of `POST /v1/events`.
    pub fn disk_free(&self, raw: &RawEvent, value: &Value) -> Option<DiskFree> {
        let Ok(env) = h::envelope(raw.harness, value) else {
            return Some(DiskFree::FAILS);
        };
        let Some(event) = env.event else {
            return Some(DiskFree::FAILS);
        };
        if event == Event::SessionStart {
            return None;
        }
        let transcript = match Self::transcript_to_tail(raw.harness, value) {
            Some(path) => Some(self.tailer.here(env.session_id, path)?),
            None => None,
        };
        if bounds::check_cwd(env.cwd).is_err() {
            return Some(DiskFree::FAILS);
        }
        self.projects.cached(env.cwd).map(|p| DiskFree {
            project: Some(p),
            transcript,
        })
    }

    /// The transcript the tailer would read for this payload: Claude Code's `transcript_path`,
    /// when the tailer accepts it.
    fn transcript_to_tail(harness: Harness, value: &Value) -> Option<&str> {
        if !harness::of(harness).transcript {
            return None;
        }
        value
            .get("transcript_path")
            .and_then(Value::as_str)
            .filter(|p| reasoning::safe_transcript_path(p).is_some())
    }

    /// [`Ingest::prepare`] from the parsed payload. `cached`: what [`Ingest::disk_free`] said
    /// (the project it found, and that nothing else is read); `None` to prepare with whatever
    /// disk reads the event needs (on a blocking thread only).
    pub fn prepare_parsed(
        &self,
        raw: &RawEvent,
        value: &Value,
        cached: Option<DiskFree>,
    ) -> Result<Option<Prepared>, PrepareError> {
        let env = h::envelope(raw.harness, value)?;
        let Some(event) = env.event else {
            return Ok(None);
        };
        let raw_obj = value.as_object().expect("envelope checked it is an object");
        bounds::check_cwd(env.cwd).map_err(PrepareError::TooLong)?;
        let disk_free = cached.is_some();
        let (cached, here) = match cached {
            Some(c) => (c.project, c.transcript),
            None => (None, None),
        };
        let mut project = match cached {
            Some(p) => p,
            None => self.projects.resolve(env.cwd),
        };
        if self.excluded.contains(&project.name) {
            return Ok(None);
        }
        if event == Event::SessionStart {
            // Read once per session start (one small file), not cached: checkouts change.
            project.branch = project.read_branch();
        }
        // Redact the whole payload first: everything below cuts and summarises, and a secret cut
        // in two would no longer be recognised. Most payloads hold nothing to redact: a
        // read-only pass says so, and only the others are copied and redacted.
        let mut clean = None;
        let pre = if self.redactor.payload_is_clean(value) {
            0
        } else {
            let mut copy = value.clone();
            let n = self.redactor.redact_payload(&mut copy);
            clean = Some(copy);
            n
        };
        let obj = match &clean {
            Some(c) if pre > 0 => c.as_object().expect("an object stays one"),
            _ => raw_obj,
        };
        let cx = Cx {
            harness: raw.harness,
            event,
            obj,
            session_id: env.session_id,
            cwd: env.cwd,
            project: &project,
            limits: &self.limits,
            plans: &self.plans,
        };
        let Some((mut record, effect)) = extract(&cx) else {
            return Ok(None);
        };
        if let Record::Observation(o) = &mut record {
            if pre > 0 {
                // What is never stored as text is taken from the real call: the dedup target,
                // and the sizes, counts and hash of a file's body.
                // A scratch plan memory: the session's real one already moved to this call's
                // plan, and a plan's counts come from the redacted extraction.
                let scratch = PlanMemory::default();
                let raw_cx = Cx {
                    obj: raw_obj,
                    plans: &scratch,
                    ..cx
                };
                if let Some((Record::Observation(r), _)) =
                    extract(&raw_cx).filter(|_| o.obs_type != "plan")
                {
                    o.dedup_target = Some(crate::dedup::target_hash(&r));
                    for (k, v) in r.metadata {
                        if v.is_number() || k == "sha256" {
                            o.metadata.insert(k, v);
                        }
                    }
                }
            }
        }
        // Reasoning first: it is older than the event that brought it. Read whole, cut once
        // redacted.
        let tail = match (Self::transcript_to_tail(raw.harness, value), here) {
            (Some(path), _) if !disk_free => {
                self.tailer.tail(env.session_id, path, usize::MAX, || {
                    (self.stored_offset)(env.session_id)
                })
            }
            // On a worker: through what a drainer opened, opening nothing.
            (Some(_), Some(here)) => self.tailer.tail_here(env.session_id, &here, usize::MAX),
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
        // What a terminal would show, before redaction sees it (a colour code inside a token
        // would hide it from the patterns).
        clean_prepared(&mut prepared);
        let fully_private = !self.redactor.apply(&mut prepared);
        if pre > 0 {
            // The payload pass replaced what the stored strings now carry as markers.
            let n = prepared.redactions.max(crate::redact::markers(&prepared));
            prepared.redactions = n;
            if let Record::Observation(o) = &mut prepared.record {
                if n > 0 {
                    o.metadata.insert("redacted".into(), Value::from(n));
                }
            }
        }
        for t in &mut prepared.thoughts {
            if t.content.chars().nth(self.limits.prompt_chars).is_some() {
                t.content = text::truncate(&t.content, self.limits.prompt_chars);
            }
        }
        // After redaction, so a cut never leaves part of a secret the patterns no longer match.
        bounds::cap(&mut prepared);
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

/// The record and session change an event makes, or `None` when it stores nothing.
fn extract(cx: &Cx) -> Option<(Record, SessionEffect)> {
    match cx.event {
        Event::ToolUse | Event::ToolFailure => {
            let call = harness::tool_call(cx)?;
            tools::extract(cx, &call).map(|obs| (Record::Observation(obs), SessionEffect::None))
        }
        _ => Some(lifecycle::extract(cx)),
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

/// Strip terminal control sequences from every string that will be stored.
fn clean_prepared(p: &mut Prepared) {
    match &mut p.record {
        Record::Observation(o) => {
            clean::string(&mut o.content);
            for f in [&mut o.tool_name, &mut o.file_path, &mut o.rel_path]
                .into_iter()
                .flatten()
            {
                clean::string(f);
            }
            o.metadata.values_mut().for_each(clean::value);
        }
        Record::Prompt(pr) => clean::string(&mut pr.content),
        Record::Nothing => {}
    }
    for t in &mut p.thoughts {
        clean::string(&mut t.content);
    }
    if let SessionEffect::Start {
        title: Some(t),
        model,
        ..
    } = &mut p.effect
    {
        clean::string(t);
        if let Some(m) = model {
            clean::string(m);
        }
    }
}

pub use clean::{needs_cleaning, strip as strip_controls, value as strip_controls_json};
pub use tools::is_rejection_text;

/// What an extractor sees.
pub(crate) struct Cx<'a> {
    pub harness: Harness,
    pub event: Event,
    pub obj: &'a Map<String, Value>,
    pub session_id: &'a str,
    pub cwd: &'a str,
    pub project: &'a Project,
    pub limits: &'a Limits,
    pub plans: &'a PlanMemory,
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
#[cfg(test)]
mod route_tests;

#[cfg(test)]
mod raw_tests {
    use super::RawEvent;
    use proptest::prelude::*;

    #[test]
    fn ids_and_harnesses_are_checked() {
        let new = |id: &str, h: &str| RawEvent::new(id.into(), 1, h, b"{}".to_vec());
        assert!(new("0123abcd-ef", "claude-code").is_ok());
        assert!(new(&"a".repeat(64), "codex").is_ok());
        for bad in ["", "a b", "../x", "x_y", &"a".repeat(65), "é"] {
            let e = new(bad, "claude-code").unwrap_err();
            assert!(e.contains("letters, digits or dashes"), "{bad}: {e}");
        }
        let e = new("e1", "vim").unwrap_err();
        assert!(e.contains("unknown harness `vim`"), "{e}");
    }

    proptest! {
        /// Whatever id a client or a spool file sends, it is refused or it is one a file name
        /// and the unique index can hold as is.
        #[test]
        fn any_id_is_refused_or_plain(id in "\\PC{0,80}") {
            if let Ok(raw) = RawEvent::new(id.clone(), 1, "claude-code", Vec::new()) {
                prop_assert!(raw.event_id.len() <= 64 && !raw.event_id.is_empty());
                prop_assert!(raw.event_id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
            }
        }
    }
}
