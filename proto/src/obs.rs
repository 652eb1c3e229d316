//! The observation vocabulary: every `obs_type` nmem stores, in one table with its stored name,
//! its default retention and its role in the SessionStart digest.
//!
//! The stored strings are the names below and never change (no migration renames a type): a
//! type is added at the end of [`TABLE`], never given a second meaning (docs/design.md §2 says
//! what each holds). Code that branches on a type matches an [`ObsType`]; SQL that names types
//! is generated from [`ObsType::name`] or checked against this table by a test.

use serde::{Deserialize, Serialize};

/// What the SessionStart digest does with a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DigestRole {
    /// Work done, listed among the session's actions.
    Action,
    /// The session's course (starts, turn ends, compactions): never crowds out actions in
    /// `recent` or the digest, which list it only when asked.
    Bookkeeping,
    /// Files written or edited: the digest's "files" line.
    Files,
    /// A real failure: the digest's "recent errors".
    Failure,
    /// Commits and pushes: the digest's git lines.
    Git,
    /// `gh` calls: the digest's pull requests.
    PullRequest,
    /// What the user asked to remember.
    Memory,
}

macro_rules! obs_types {
    ($($variant:ident = $name:literal, $days:literal, $role:ident, $dedup:literal;)*) => {
        /// One observation type. Serialised as its stored name.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum ObsType {
            $(#[serde(rename = $name)] $variant,)*
        }

        /// The vocabulary: type, stored name, default retention in days, digest role, and
        /// whether repeats within the dedup window are counted instead of stored.
        pub const TABLE: &[(ObsType, &str, i64, DigestRole, bool)] = &[
            $((ObsType::$variant, $name, $days, DigestRole::$role, $dedup),)*
        ];

        impl ObsType {
            /// The name stored in `observations.obs_type`.
            pub const fn name(self) -> &'static str {
                match self { $(ObsType::$variant => $name,)* }
            }

            /// The type stored under `name`, if nmem knows it.
            pub fn from_name(name: &str) -> Option<ObsType> {
                match name { $($name => Some(ObsType::$variant),)* _ => None }
            }
        }
    };
}

obs_types! {
    SessionStart = "session_start", 365, Bookkeeping, false;
    SessionResume = "session_resume", 365, Bookkeeping, false;
    SessionClear = "session_clear", 365, Bookkeeping, false;
    SessionCompact = "session_compact", 365, Bookkeeping, false;
    SessionFork = "session_fork", 365, Bookkeeping, false;
    SessionEnd = "session_end", 365, Bookkeeping, false;
    FileRead = "file_read", 90, Action, true;
    FileWrite = "file_write", 365, Files, false;
    FileEdit = "file_edit", 365, Files, false;
    Command = "command", 180, Action, false;
    CommandError = "command_error", 180, Failure, false;
    GitCommit = "git_commit", 730, Git, false;
    GitPush = "git_push", 730, Git, false;
    Github = "github", 180, PullRequest, false;
    ToolError = "tool_error", 180, Failure, false;
    // Declined calls and skills matter while the habits they show are current.
    ToolRejected = "tool_rejected", 90, Action, false;
    Search = "search", 90, Action, true;
    WebFetch = "web_fetch", 90, Action, false;
    WebSearch = "web_search", 90, Action, false;
    TaskSpawn = "task_spawn", 90, Action, false;
    Plan = "plan", 90, Action, false;
    Skill = "skill", 90, Action, false;
    McpCall = "mcp_call", 90, Action, false;
    Compaction = "compaction", 365, Bookkeeping, false;
    CompactSummary = "compact_summary", 365, Bookkeeping, false;
    TurnEnd = "turn_end", 180, Bookkeeping, false;
    SubagentEnd = "subagent_end", 90, Bookkeeping, false;
    ApiError = "api_error", 90, Bookkeeping, false;
    Memory = "memory", 730, Memory, false;
    ToolOther = "tool_other", 90, Action, false;
}

impl ObsType {
    /// Whether the row records looking at something (a read, a search, a fetch) rather than
    /// doing it: it names what a question names without answering it, so search weighs it
    /// lower (`[search] weight_looking`).
    pub const fn is_looking(self) -> bool {
        matches!(
            self,
            ObsType::FileRead | ObsType::Search | ObsType::WebSearch | ObsType::WebFetch
        )
    }

    /// Whether the row records what the agent is about to do (a plan, a task handed to a
    /// sub-agent) rather than what happened: it restates the task in its words, before any
    /// outcome, so search can weigh it lower (`[search] weight_planning`).
    pub const fn is_planning(self) -> bool {
        matches!(self, ObsType::Plan | ObsType::TaskSpawn)
    }

    /// Whether the row retells a stretch of work in prose after it happened (a turn's closing
    /// message, a sub-agent's result, a compaction summary): search can weigh it lower, its
    /// facts being in the actions it retells (`[search] weight_summary`), and carry its match
    /// to the turn's actions (`[search] semantic_context`).
    pub const fn is_summary(self) -> bool {
        matches!(
            self,
            ObsType::TurnEnd | ObsType::SubagentEnd | ObsType::CompactSummary
        )
    }

    /// Whether the row marks a session's bounds (start, resume, clear, compaction, fork, end):
    /// it says a session happened, not what it did (`[search] weight_session`).
    pub const fn is_session_marker(self) -> bool {
        matches!(
            self,
            ObsType::SessionStart
                | ObsType::SessionResume
                | ObsType::SessionClear
                | ObsType::SessionCompact
                | ObsType::SessionFork
                | ObsType::SessionEnd
                | ObsType::Compaction
        )
    }

    /// Whether the row holds a file's new content (an edit or a whole write): a later one on the
    /// same file supersedes an earlier one.
    pub const fn is_file_change(self) -> bool {
        matches!(self, ObsType::FileEdit | ObsType::FileWrite)
    }
}

/// `names` as the items of an SQL list, `'a', 'b'`, for `obs_type IN (…)`. Only for the
/// table's own names (constants, never input): a quote in a name is refused by a test.
pub fn sql_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|t| format!("'{t}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The retention of a type nmem does not know (a row written by a newer version).
pub const UNKNOWN_TYPE_DAYS: i64 = 90;

/// `nmemctl retention --type user_prompt` (and `prompt`, `agent_reasoning`) name prompts, which
/// are not observations: their ages are these.
pub const USER_PROMPT_DAYS: i64 = 365;
pub const AGENT_REASONING_DAYS: i64 = 90;

const fn count_role(role: DigestRole) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < TABLE.len() {
        if TABLE[i].3 as u8 == role as u8 {
            n += 1;
        }
        i += 1;
    }
    n
}

const fn names() -> [&'static str; TABLE.len()] {
    let mut out = [""; TABLE.len()];
    let mut i = 0;
    while i < TABLE.len() {
        out[i] = TABLE[i].1;
        i += 1;
    }
    out
}

const fn bookkeeping_names() -> [&'static str; count_role(DigestRole::Bookkeeping)] {
    let mut out = [""; count_role(DigestRole::Bookkeeping)];
    let (mut i, mut j) = (0, 0);
    while i < TABLE.len() {
        if TABLE[i].3 as u8 == DigestRole::Bookkeeping as u8 {
            out[j] = TABLE[i].1;
            j += 1;
        }
        i += 1;
    }
    out
}

/// Every stored name, in table order.
pub const NAMES: [&str; TABLE.len()] = names();

/// The names of the bookkeeping types ([`DigestRole::Bookkeeping`]).
pub const BOOKKEEPING: [&str; count_role(DigestRole::Bookkeeping)] = bookkeeping_names();

impl ObsType {
    /// Every type, in table order.
    pub fn all() -> impl Iterator<Item = ObsType> {
        TABLE.iter().map(|r| r.0)
    }

    fn row(self) -> &'static (ObsType, &'static str, i64, DigestRole, bool) {
        // The table lists the variants in declaration order (the macro writes both).
        &TABLE[self as usize]
    }

    /// How long it is kept by default, in days (`[retention]` overrides it per type).
    pub fn retention_days(self) -> i64 {
        self.row().2
    }

    pub fn digest_role(self) -> DigestRole {
        self.row().3
    }

    /// Whether a repeat within the dedup window (same session, same target) is counted
    /// instead of stored: re-reads and re-searches.
    pub fn deduplicated(self) -> bool {
        self.row().4
    }

    pub fn is_bookkeeping(self) -> bool {
        self.digest_role() == DigestRole::Bookkeeping
    }
}

/// The default retention of a stored name, known or not.
pub fn retention_days_of(name: &str) -> i64 {
    ObsType::from_name(name).map_or(UNKNOWN_TYPE_DAYS, ObsType::retention_days)
}

impl std::fmt::Display for ObsType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sql_list` quotes names without escaping: every name must be safe to quote.
    #[test]
    fn names_are_safe_in_an_sql_list() {
        for n in NAMES {
            assert!(
                n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{n}"
            );
        }
        assert_eq!(
            sql_list(&["turn_end", "compaction"]),
            "'turn_end', 'compaction'"
        );
    }

    #[test]
    fn the_table_is_in_declaration_order_and_names_round_trip() {
        for (i, (t, name, ..)) in TABLE.iter().enumerate() {
            assert_eq!(*t as usize, i, "{name} is out of order");
            assert_eq!(t.name(), *name);
            assert_eq!(ObsType::from_name(name), Some(*t));
            assert_eq!(serde_json::to_string(t).unwrap(), format!("\"{name}\""));
            assert_eq!(
                serde_json::from_str::<ObsType>(&format!("\"{name}\"")).unwrap(),
                *t
            );
        }
        assert_eq!(ObsType::from_name("no_such_type"), None);
        assert_eq!(retention_days_of("no_such_type"), UNKNOWN_TYPE_DAYS);
    }

    #[test]
    fn names_are_unique_and_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for n in NAMES {
            assert!(seen.insert(n), "{n} twice");
            assert!(
                n.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'),
                "{n}"
            );
        }
    }

    #[test]
    fn bookkeeping_is_the_session_course() {
        assert!(BOOKKEEPING.contains(&"turn_end"));
        assert!(BOOKKEEPING
            .iter()
            .all(|n| ObsType::from_name(n).unwrap().is_bookkeeping()));
        for t in ObsType::all().filter(|t| t.name().starts_with("session_")) {
            assert!(t.is_bookkeeping(), "{t}");
        }
        assert!(!ObsType::Command.is_bookkeeping());
    }
}
