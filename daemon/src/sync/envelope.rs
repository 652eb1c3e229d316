//! The synced form of an event: the writer's prepared, redacted record ([`Prepared`]) as a
//! versioned JSON envelope, and back.
//!
//! Not the raw hook payload: what leaves the machine is exactly what the writer stored (already
//! cleaned, redacted and cut to the limits). The reverse conversion only accepts the names this
//! build knows (harness, observation type, prompt source), so an envelope from a newer nmem is
//! refused with a reason instead of being stored half-understood.

use crate::ingest::reasoning::Thought;
use crate::ingest::{NewPrompt, Obs, Prepared, Project, Record, SessionEffect};
use nmem_proto::harness::{Event, Harness};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The envelope's format version of an ordinary event: a reader refuses a newer one.
pub const VERSION: u32 = 1;

/// The version a tombstone carries (`v` is the version a reader needs): an nmem that reads only
/// version 1 stops its pull at a tombstone instead of storing it half-understood.
pub const TOMBSTONE_VERSION: u32 = 2;

/// The version a knowledge item or a change of one ([`KnowledgeEvent`]), or an edit of a stored
/// event ([`Edit`]), carries.
pub const KNOWLEDGE_VERSION: u32 = 3;

/// The newest version this build reads.
pub const READS: u32 = KNOWLEDGE_VERSION;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    pub v: u32,
    pub event_id: String,
    pub received_at: i64,
    pub harness: String,
    pub session_id: String,
    pub cwd: String,
    pub project: EnvProject,
    pub event: String,
    pub event_name: String,
    pub record: EnvRecord,
    pub effect: EnvEffect,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thoughts: Vec<EnvThought>,
    pub redactions: u32,
    /// Set on a tombstone (version 2). Its `record` is then an empty user prompt, never stored:
    /// only so that a version-1 reader parses it and stops at its version with "upgrade nmem",
    /// instead of failing on a record kind it does not know.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tombstone: Option<Tombstone>,
    /// Set on a knowledge event (version 3), whose `record` is a placeholder as a tombstone's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<KnowledgeEvent>,
    /// Set on an edit of a stored event (version 3), whose `record` is a placeholder too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<Edit>,
}

/// A change to the row of an event stored before (`sync::edit`), named by its event id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Edit {
    /// The row pinned (kept by retention, shown first) or unpinned.
    Pin { target: String, pinned: bool },
    /// The row rewritten by `nmemctl redact --apply`: the whole event again, as the current
    /// redaction rules leave it (same event id), to replace the row or store it where missing.
    Rewrite { envelope: Box<Envelope> },
}

/// A governed knowledge or work item (`crate::knowledge`) written, or a change to one, as it
/// travels between devices. An item is named by its `uid` (or, for a saved memory's note, by
/// `memory:<event id of the memory>`), the same on every device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum KnowledgeEvent {
    /// An item as written where it was made, its status already decided by the rules there.
    Item(Box<KnowledgeItem>),
    /// A change of an item: a lifecycle action (`promote`, `supersede` with `new_target`,
    /// `contest`, `archive`, `done`, `drop`, `reopen`) or `pin` / `unpin`.
    Change {
        target: String,
        action: String,
        reason: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        new_target: Option<String>,
    },
}

/// Redact a knowledge event's text with `redactor`; the number of redactions made.
pub fn redact_knowledge(redactor: &crate::redact::Redactor, ev: &mut KnowledgeEvent) -> usize {
    let mut texts: Vec<&mut String> = match ev {
        KnowledgeEvent::Item(it) => {
            let mut v = vec![&mut it.title, &mut it.summary, &mut it.reason];
            v.extend(
                [&mut it.subject, &mut it.value, &mut it.payload]
                    .into_iter()
                    .flatten(),
            );
            v
        }
        KnowledgeEvent::Change { reason, .. } => vec![reason],
    };
    texts.iter_mut().map(|t| redactor.redact(t) as usize).sum()
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnowledgeItem {
    pub uid: String,
    pub class: String,
    pub item_kind: String,
    pub scope: String,
    pub title: String,
    pub summary: String,
    pub reason: String,
    pub memory_source: String,
    pub status: String,
    #[serde(default)]
    pub confidence: Option<f64>,
    #[serde(default)]
    pub subject: Option<String>,
    #[serde(default)]
    pub predicate: Option<String>,
    #[serde(default)]
    pub value: Option<String>,
    #[serde(default)]
    pub payload: Option<String>,
    #[serde(default)]
    pub is_pinned: bool,
    pub created_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvProject {
    pub name: String,
    pub root: String,
    pub worktree: Option<String>,
    pub branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EnvRecord {
    Observation {
        obs_type: String,
        tool_name: Option<String>,
        file_path: Option<String>,
        rel_path: Option<String>,
        content: String,
        metadata: Map<String, Value>,
        tool_use_id: Option<String>,
    },
    Prompt {
        source: String,
        content: String,
        prompt_uid: Option<String>,
    },
}

/// A forget (`sync::tombstone`): the local event ids (of rows, thoughts included) that every
/// device removes, and why (`purge`, `redact`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tombstone {
    pub forget: Vec<String>,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EnvEffect {
    None,
    Start {
        source: String,
        model: Option<String>,
        title: Option<String>,
        transcript_path: Option<String>,
    },
    TurnEnd,
    SubagentEnd,
    Compaction,
    End {
        reason: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnvThought {
    pub uid: String,
    pub timestamp: i64,
    pub content: String,
}

const EVENTS: [(Event, &str); 10] = [
    (Event::SessionStart, "session_start"),
    (Event::UserPrompt, "user_prompt"),
    (Event::ToolUse, "tool_use"),
    (Event::ToolFailure, "tool_failure"),
    (Event::PreCompact, "pre_compact"),
    (Event::PostCompact, "post_compact"),
    (Event::Stop, "stop"),
    (Event::SubagentStop, "subagent_stop"),
    (Event::StopFailure, "stop_failure"),
    (Event::SessionEnd, "session_end"),
];

/// The prompt sources the writer stores (`prompts.source`).
const PROMPT_SOURCES: [&str; 2] = ["user", "agent"];

impl Envelope {
    /// The envelope of a stored event; `None` for one that stores no record.
    pub fn of(ev: &Prepared) -> Option<Envelope> {
        let record = match &ev.record {
            Record::Nothing => return None,
            Record::Observation(o) => EnvRecord::Observation {
                obs_type: o.obs_type.to_string(),
                tool_name: o.tool_name.clone(),
                file_path: o.file_path.clone(),
                rel_path: o.rel_path.clone(),
                content: o.content.clone(),
                metadata: o.metadata.clone(),
                tool_use_id: o.tool_use_id.clone(),
            },
            Record::Prompt(p) => EnvRecord::Prompt {
                source: p.source.to_string(),
                content: p.content.clone(),
                prompt_uid: p.prompt_uid.clone(),
            },
        };
        let effect = match &ev.effect {
            SessionEffect::None => EnvEffect::None,
            SessionEffect::Start {
                source,
                model,
                title,
                transcript_path,
            } => EnvEffect::Start {
                source: source.clone(),
                model: model.clone(),
                title: title.clone(),
                transcript_path: transcript_path.clone(),
            },
            SessionEffect::TurnEnd => EnvEffect::TurnEnd,
            SessionEffect::SubagentEnd => EnvEffect::SubagentEnd,
            SessionEffect::Compaction => EnvEffect::Compaction,
            SessionEffect::End { reason } => EnvEffect::End {
                reason: reason.clone(),
            },
        };
        Some(Envelope {
            v: VERSION,
            event_id: ev.event_id.clone(),
            received_at: ev.received_at,
            harness: ev.harness.to_string(),
            session_id: ev.session_id.clone(),
            cwd: ev.cwd.clone(),
            project: EnvProject {
                name: ev.project.name.clone(),
                root: ev.project.root.clone(),
                worktree: ev.project.worktree.clone(),
                branch: ev.project.branch.clone(),
            },
            event: EVENTS
                .iter()
                .find(|(e, _)| *e == ev.event)
                .map_or("tool_use", |(_, n)| n)
                .to_string(),
            event_name: ev.event_name.clone(),
            record,
            effect,
            thoughts: ev
                .thoughts
                .iter()
                .map(|t| EnvThought {
                    uid: t.uid.clone(),
                    timestamp: t.timestamp,
                    content: t.content.clone(),
                })
                .collect(),
            redactions: ev.redactions,
            tombstone: None,
            knowledge: None,
            edit: None,
        })
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("an envelope serialises")
    }

    /// A tombstone of `project`'s events `forget` (local event ids), under its own random id.
    pub fn tombstone(id: String, project: &str, forget: Vec<String>, reason: &str) -> Envelope {
        Envelope {
            tombstone: Some(Tombstone {
                forget,
                reason: reason.to_string(),
            }),
            ..Envelope::control(TOMBSTONE_VERSION, id, project, "tombstone", reason)
        }
    }

    /// A knowledge event of `project`, under its own random id.
    pub fn knowledge(id: String, project: &str, ev: KnowledgeEvent) -> Envelope {
        let name = match &ev {
            KnowledgeEvent::Item(_) => "item".to_string(),
            KnowledgeEvent::Change { action, .. } => action.clone(),
        };
        Envelope {
            knowledge: Some(ev),
            ..Envelope::control(KNOWLEDGE_VERSION, id, project, "knowledge", &name)
        }
    }

    /// An edit of a stored event of `project`, under its own random id.
    pub fn edit(id: String, project: &str, edit: Edit) -> Envelope {
        let name = match &edit {
            Edit::Pin { pinned: true, .. } => "pin",
            Edit::Pin { pinned: false, .. } => "unpin",
            Edit::Rewrite { .. } => "rewrite",
        };
        Envelope {
            edit: Some(edit),
            ..Envelope::control(KNOWLEDGE_VERSION, id, project, "edit", name)
        }
    }

    /// An envelope that stores no row itself: its `record` an empty user prompt, only so that
    /// an older reader parses it and stops at its version with "upgrade nmem", instead of
    /// failing on a record kind it does not know.
    fn control(v: u32, id: String, project: &str, event: &str, name: &str) -> Envelope {
        Envelope {
            v,
            event_id: id,
            received_at: nmem_proto::now_ms(),
            harness: "nmem".into(),
            session_id: String::new(),
            cwd: String::new(),
            project: EnvProject {
                name: project.to_string(),
                root: String::new(),
                worktree: None,
                branch: None,
            },
            event: event.into(),
            event_name: name.to_string(),
            record: EnvRecord::Prompt {
                source: "user".into(),
                content: String::new(),
                prompt_uid: None,
            },
            effect: EnvEffect::None,
            thoughts: vec![],
            redactions: 0,
            tombstone: None,
            knowledge: None,
            edit: None,
        }
    }

    /// Whether this is an event that stores rows (not a tombstone, knowledge event or edit).
    pub fn is_record(&self) -> bool {
        self.tombstone.is_none() && self.knowledge.is_none() && self.edit.is_none()
    }

    /// The event ids a tombstone forgets (None: an ordinary event).
    pub fn forgets(&self) -> Option<&[String]> {
        self.tombstone.as_ref().map(|t| t.forget.as_slice())
    }

    /// Parse and check an envelope received from another device. The version is read first, so
    /// a newer envelope is refused for its version, whatever else changed in it.
    pub fn from_bytes(b: &[u8]) -> Result<Envelope, String> {
        #[derive(Deserialize)]
        struct Probe {
            v: u32,
        }
        let p: Probe =
            serde_json::from_slice(b).map_err(|e| format!("not an nmem event envelope: {e}"))?;
        if p.v > READS {
            return Err(format!(
                "an event of envelope version {} (this nmem reads up to {READS}): upgrade nmem \
                 on this device",
                p.v
            ));
        }
        let e: Envelope =
            serde_json::from_slice(b).map_err(|e| format!("not an nmem event envelope: {e}"))?;
        if e.forgets().is_some() != (e.v == TOMBSTONE_VERSION) {
            return Err("not an nmem event envelope: a tombstone must carry version 2".into());
        }
        if (e.knowledge.is_some() || e.edit.is_some()) != (e.v == KNOWLEDGE_VERSION)
            || (e.knowledge.is_some() && e.edit.is_some())
        {
            return Err(
                "not an nmem event envelope: a knowledge event or an edit (one of them) must \
                 carry version 3"
                    .into(),
            );
        }
        if let Some(Edit::Rewrite { envelope }) = &e.edit {
            if !envelope.is_record() || envelope.v > VERSION {
                return Err("not an nmem event envelope: a rewrite must carry an event".into());
            }
        }
        Ok(e)
    }

    /// The event the writer stores for this envelope.
    pub fn into_prepared(self) -> Result<Prepared, String> {
        if !self.is_record() {
            return Err("a tombstone, knowledge event or edit is not an event to store".into());
        }
        let harness: &'static str = if self.harness == "nmem" {
            "nmem"
        } else {
            Harness::parse(&self.harness)
                .ok_or_else(|| format!("unknown harness `{}`: upgrade nmem", self.harness))?
                .as_str()
        };
        let event = EVENTS
            .iter()
            .find(|(_, n)| *n == self.event)
            .map(|(e, _)| *e)
            .ok_or_else(|| format!("unknown event `{}`: upgrade nmem", self.event))?;
        let record = match self.record {
            EnvRecord::Observation {
                obs_type,
                tool_name,
                file_path,
                rel_path,
                content,
                metadata,
                tool_use_id,
            } => Record::Observation(Obs {
                obs_type: nmem_proto::obs::ObsType::from_name(&obs_type)
                    .ok_or_else(|| format!("unknown observation type `{obs_type}`: upgrade nmem"))?
                    .name(),
                tool_name,
                file_path,
                rel_path,
                content,
                metadata,
                tool_use_id,
                dedup_target: None,
            }),
            EnvRecord::Prompt {
                source,
                content,
                prompt_uid,
            } => Record::Prompt(NewPrompt {
                source: PROMPT_SOURCES
                    .into_iter()
                    .find(|s| *s == source)
                    .ok_or_else(|| format!("unknown prompt source `{source}`: upgrade nmem"))?,
                content,
                prompt_uid,
            }),
        };
        let effect = match self.effect {
            EnvEffect::None => SessionEffect::None,
            EnvEffect::Start {
                source,
                model,
                title,
                transcript_path,
            } => SessionEffect::Start {
                source,
                model,
                title,
                transcript_path,
            },
            EnvEffect::TurnEnd => SessionEffect::TurnEnd,
            EnvEffect::SubagentEnd => SessionEffect::SubagentEnd,
            EnvEffect::Compaction => SessionEffect::Compaction,
            EnvEffect::End { reason } => SessionEffect::End { reason },
        };
        Ok(Prepared {
            event_id: self.event_id,
            received_at: self.received_at,
            harness,
            session_id: self.session_id,
            cwd: self.cwd,
            project: Project {
                name: self.project.name,
                root: self.project.root,
                worktree: self.project.worktree,
                // Another machine's git directory means nothing here.
                git_dir: None,
                branch: self.project.branch,
            },
            event,
            event_name: self.event_name,
            record,
            effect,
            thoughts: self
                .thoughts
                .into_iter()
                .map(|t| Thought {
                    uid: t.uid,
                    timestamp: t.timestamp,
                    content: t.content,
                })
                .collect(),
            // Never: the transcript is on the other machine.
            transcript_offset: None,
            redactions: self.redactions,
        })
    }
}

/// A stored Bash command as the writer prepares it: the sync modules' tests' event.
#[cfg(test)]
pub(crate) fn sample(event_id: &str, content: &str) -> Prepared {
    use crate::ingest::{Obs, Project, Record, SessionEffect};
    Prepared {
        event_id: event_id.into(),
        received_at: 1_700_000_000_000,
        harness: "claude-code",
        session_id: "s1".into(),
        cwd: "/home/dev/app".into(),
        project: Project {
            name: "app".into(),
            root: "/home/dev/app".into(),
            ..Default::default()
        },
        event: nmem_proto::harness::Event::ToolUse,
        event_name: "PostToolUse".into(),
        record: Record::Observation(Obs {
            obs_type: "command",
            tool_name: Some("Bash".into()),
            content: content.into(),
            ..Default::default()
        }),
        effect: SessionEffect::None,
        thoughts: vec![],
        transcript_offset: None,
        redactions: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn observation(content: &str) -> Prepared {
        Prepared {
            transcript_offset: Some(12),
            ..sample("e1", content)
        }
    }

    #[test]
    fn an_envelope_round_trips() {
        let ev = observation("cargo test");
        let env = Envelope::of(&ev).unwrap();
        let back = Envelope::from_bytes(&env.to_bytes())
            .unwrap()
            .into_prepared()
            .unwrap();
        assert_eq!(Envelope::of(&back).unwrap(), env);
        assert_eq!(back.transcript_offset, None);
    }

    #[test]
    fn unknown_names_and_newer_versions_are_refused() {
        let mut env = Envelope::of(&observation("x")).unwrap();
        env.v = READS + 1;
        let err = Envelope::from_bytes(&env.to_bytes()).unwrap_err();
        assert!(err.contains("upgrade nmem"), "{err}");
        let mut env = Envelope::of(&observation("x")).unwrap();
        env.harness = "vim".into();
        assert!(env.into_prepared().unwrap_err().contains("unknown harness"));
    }

    #[test]
    fn a_tombstone_round_trips_and_a_version_1_reader_would_refuse_it() {
        let t = Envelope::tombstone("t1".into(), "app", vec!["e1".into()], "purge");
        let back = Envelope::from_bytes(&t.to_bytes()).unwrap();
        assert_eq!(back.forgets(), Some(&["e1".to_string()][..]));
        assert!(back.into_prepared().is_err());
        // A version-1 reader parses the struct as it knew it (no `tombstone` field), then
        // refuses the version: "upgrade nmem", never a half-understood event.
        let mut v: Value = serde_json::from_slice(&t.to_bytes()).unwrap();
        v.as_object_mut().unwrap().remove("tombstone");
        let old: Envelope = serde_json::from_value(v).unwrap();
        assert!(old.v > VERSION);
        // A tombstone claiming version 1 is refused.
        let mut bad = t.clone();
        bad.v = VERSION;
        assert!(Envelope::from_bytes(&bad.to_bytes()).is_err());
    }

    #[test]
    fn a_newer_envelope_is_refused_for_its_version_even_when_its_shape_changed() {
        let newer = format!(r#"{{"v":{},"something":"new"}}"#, READS + 1);
        let err = Envelope::from_bytes(newer.as_bytes()).unwrap_err();
        assert!(err.contains("upgrade nmem"), "{err}");
    }

    #[test]
    fn a_knowledge_event_round_trips_and_is_not_a_record() {
        let change = KnowledgeEvent::Change {
            target: "u1".into(),
            action: "promote".into(),
            reason: "checked".into(),
            new_target: None,
        };
        let k = Envelope::knowledge("k1".into(), "app", change.clone());
        let back = Envelope::from_bytes(&k.to_bytes()).unwrap();
        assert_eq!(back.knowledge, Some(change));
        assert!(!back.is_record() && back.forgets().is_none());
        assert!(back.into_prepared().is_err());
        // A version-2 reader refuses it for its version; one claiming version 2 is refused.
        assert!(k.v > TOMBSTONE_VERSION);
        let mut bad = k.clone();
        bad.v = TOMBSTONE_VERSION;
        assert!(Envelope::from_bytes(&bad.to_bytes()).is_err());
    }

    proptest! {
        /// Hostile bytes are refused with a reason, never a panic.
        #[test]
        fn garbage_is_refused(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(e) = Envelope::from_bytes(&bytes) {
                let _ = e.into_prepared();
            }
        }
    }
}
