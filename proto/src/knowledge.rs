//! Governed knowledge and work items: the requests and replies of `/v1/knowledge`,
//! `/v1/knowledge/lifecycle` and `/v1/knowledge/list`, shared by the daemon and its clients.
//!
//! A knowledge item is a durable fact, decision, procedure, concept or note with a status, a
//! reason, a source and evidence; a work item is a task, bug or follow-up that outlives a
//! session. The governance rules (daemon/src/knowledge.rs) follow memory-substrate's: an
//! agent-inferred claim starts as a candidate; an exact structured duplicate is refused; the same
//! subject and predicate with another value in the same scope is contested; similar unstructured
//! items come back as `possible_duplicates` without refusing the write; promote, supersede and
//! contest are recorded with their reason in an audit trail.

use serde::{Deserialize, Serialize};
use serde_json::Value;

macro_rules! names {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $s:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(#[serde(rename = $s)] $variant,)*
        }

        impl $name {
            /// Every value, in order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The stored (and wire) name.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s,)* }
            }

            /// The value named `s`, if there is one.
            pub fn parse(s: &str) -> Option<$name> {
                match s { $($s => Some($name::$variant),)* _ => None }
            }

            /// The names, for error messages: `a, b or c`.
            pub fn names() -> String {
                let all: Vec<&str> = Self::ALL.iter().map(|v| v.as_str()).collect();
                match all.split_last() {
                    Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                    _ => all.join(""),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

names! {
    /// Knowledge, or a work item.
    Class { Knowledge = "knowledge", WorkItem = "work_item" }
}

names! {
    /// Who says so.
    MemorySource {
        UserDeclared = "user_declared",
        HumanCurated = "human_curated",
        AgentInferred = "agent_inferred",
        SystemGenerated = "system_generated",
        Imported = "imported",
    }
}

names! {
    /// Where an item stands. Knowledge: candidate, active, superseded, contested, archived.
    /// Work items: open, done, dropped.
    Status {
        Candidate = "candidate",
        Active = "active",
        Superseded = "superseded",
        Contested = "contested",
        Archived = "archived",
        Open = "open",
        Done = "done",
        Dropped = "dropped",
    }
}

names! {
    /// What a knowledge item is.
    KnowledgeKind {
        Fact = "fact",
        Decision = "decision",
        Procedure = "procedure",
        Concept = "concept",
        Note = "note",
        Preference = "preference",
        Convention = "convention",
        Lesson = "lesson",
    }
}

names! {
    /// What a work item is.
    WorkKind { Task = "task", Bug = "bug", FollowUp = "follow_up" }
}

impl Status {
    /// Whether an item of `class` can have this status.
    pub fn fits(self, class: Class) -> bool {
        matches!(
            (class, self),
            (
                Class::Knowledge,
                Status::Candidate
                    | Status::Active
                    | Status::Superseded
                    | Status::Contested
                    | Status::Archived
            ) | (
                Class::WorkItem,
                Status::Open | Status::Done | Status::Dropped
            )
        )
    }
}

/// `scope:project` (the default) or `scope:global` (every project).
pub const SCOPE_PROJECT: &str = "scope:project";
pub const SCOPE_GLOBAL: &str = "scope:global";

/// What an item cites: an observation as `{"source_id": "obs:<id>"}`, or a document chunk by
/// its source and segment ids. `hash`, when given, must be the cited text's SHA-256 (hex, or a
/// prefix of at least 8 characters of it): a citation of text that changed since is refused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceRef {
    pub source_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The file the cited observation names (filled in by nmem; an edit of it flags the item).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
}

/// A structured claim: `subject` `predicate` `value` (or `object`). Absent or `{}` for an
/// unstructured item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicate: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Value>,
}

/// `POST /v1/knowledge`: write a knowledge item or a work item.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RememberRequest {
    #[serde(default = "default_class")]
    pub class: Class,
    pub kind: String,
    pub title: String,
    #[serde(default)]
    pub summary: String,
    pub reason: String,
    pub memory_source: MemorySource,
    #[serde(default)]
    pub scope_refs: Vec<String>,
    /// Defaults: `candidate` for agent-inferred knowledge, `active` for other knowledge, `open`
    /// for work items. An agent-inferred `active` becomes `candidate` (the reply says so).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Payload>,
    #[serde(default)]
    pub evidence_refs: Vec<EvidenceRef>,
    /// The project (absent: the project of `cwd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

fn default_class() -> Class {
    Class::Knowledge
}

/// A stored item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub id: i64,
    pub class: Class,
    pub kind: String,
    pub project: String,
    /// `scope:project` or `scope:global`.
    pub scope: String,
    pub title: String,
    pub summary: String,
    pub reason: String,
    pub memory_source: MemorySource,
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<Value>,
    /// The `memory` observation a note mirrors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub obs_id: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<i64>,
    /// A later change touched what it cites: review it (promote or supersede clears the flag).
    #[serde(default)]
    pub possibly_stale: bool,
    /// The observation that raised the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_obs_id: Option<i64>,
    /// The cited document chunk whose text changed (replaced on a re-ingest) or that was removed,
    /// when that raised the flag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_doc_id: Option<i64>,
    #[serde(default)]
    pub evidence: Vec<EvidenceRef>,
    #[serde(default)]
    pub is_pinned: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a search result of kind `knowledge` or `work` says of its item besides its text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct HitRef {
    /// `knowledge` or `work_item`.
    pub class: String,
    pub kind: String,
    pub status: String,
    pub title: String,
    pub memory_source: String,
    #[serde(default)]
    pub possibly_stale: bool,
    #[serde(default)]
    pub is_pinned: bool,
}

/// An existing item that looks like the one written (advisory: the write happened).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PossibleDuplicate {
    pub object_id: i64,
    pub score: f64,
    pub reasons: Vec<String>,
    pub title: String,
    pub kind: String,
    pub status: Status,
}

/// The reply of `POST /v1/knowledge`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Remembered {
    pub item: Item,
    #[serde(default)]
    pub possible_duplicates: Vec<PossibleDuplicate>,
    /// Items now contested with this one (same subject and predicate, another value).
    #[serde(default)]
    pub contested_with: Vec<i64>,
    /// What nmem did that was not asked (an agent-inferred claim kept as a candidate, …).
    #[serde(default)]
    pub notes: Vec<String>,
}

names! {
    /// A change of status.
    Action {
        Promote = "promote",
        Supersede = "supersede",
        Contest = "contest",
        Archive = "archive",
        Done = "done",
        Drop = "drop",
        Reopen = "reopen",
    }
}

/// `POST /v1/knowledge/lifecycle`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LifecycleRequest {
    pub action: Action,
    /// The item (for `supersede`, the old one).
    pub id: i64,
    /// `supersede` only: the item that replaces `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_id: Option<i64>,
    pub reason: String,
}

/// The items the change touched, as they are now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LifecycleReply {
    pub items: Vec<Item>,
}

/// `POST /v1/knowledge/list`: items by id, or a project's items by class, status and kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ListRequest {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ids: Vec<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<Class>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub status: Vec<Status>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Only items flagged possibly stale.
    #[serde(default)]
    pub stale: bool,
    /// Add each item's audit trail.
    #[serde(default)]
    pub audit: bool,
    /// At most this many (default 50, at most 500), newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<i64>,
}

/// One change in an item's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub knowledge_id: i64,
    pub at: i64,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The other item (supersede, contest) or the observation (stale, a note's memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_id: Option<i64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListReply {
    pub items: Vec<Item>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audit: Vec<AuditEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_and_statuses_fit_one_class() {
        for s in Status::ALL {
            assert_eq!(Status::parse(s.as_str()), Some(*s));
            assert!(s.fits(Class::Knowledge) != s.fits(Class::WorkItem), "{s}");
        }
        for m in MemorySource::ALL {
            assert_eq!(MemorySource::parse(m.as_str()), Some(*m));
        }
        for a in Action::ALL {
            assert_eq!(Action::parse(a.as_str()), Some(*a));
        }
        assert_eq!(WorkKind::names(), "task, bug or follow_up");
    }

    #[test]
    fn a_request_reads_the_substrate_shape() {
        let r: RememberRequest = serde_json::from_value(serde_json::json!({
            "kind": "fact", "title": "Repo uses Python", "summary": "Primary language is Python.",
            "reason": "The language changes future work.", "memory_source": "agent_inferred",
            "scope_refs": ["scope:project"], "evidence_refs": [{"source_id": "obs:12"}],
            "payload": {"subject": "repo", "predicate": "primary_language", "value": "python"},
            "confidence": 0.8
        }))
        .unwrap();
        assert_eq!(r.class, Class::Knowledge);
        assert_eq!(r.memory_source, MemorySource::AgentInferred);
        assert_eq!(r.evidence_refs[0].source_id, "obs:12");
        assert!(
            serde_json::from_value::<RememberRequest>(serde_json::json!({
                "kind": "fact", "title": "t", "reason": "r", "memory_source": "rumour"
            }))
            .is_err()
        );
    }
}
