//! The kind of fact a search asks for, read from the query's own words (`[search]
//! question_kinds`): "what error did the build hit" asks for a failure, "where did we fix" or
//! "which files changed" for a change, "which command" for a command, "why did we" for a
//! decision. Rows of a matching kind get the factor `weight_kind` on their fused score, so among
//! rows that match the words equally, the one recording the asked-for kind comes first.
//!
//! The rules are the question types' general vocabulary (a few dozen words), never a question's
//! own words; a query with none of them (most agents' keyword queries) is ranked as before. The
//! measured effect is the `question_kinds` row of ARCHITECTURE.md's ablation table.
//!
//! The same words say which state a question asks about: "first", "originally", "before" an
//! earlier one, "now", "currently" the current one (`[search] question_order`: changes of one
//! file in the results take their places oldest or newest first; off by default, measured).

use nmem_proto::obs::ObsType;
use nmem_proto::query::SearchHit;

/// The kinds a query asks for (any number of them: "how did we fix the error" asks for a
/// change and a failure).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kinds {
    /// A failure: an error, a crash, something that broke.
    pub failure: bool,
    /// A change: where something was fixed, which files changed, what a value is now.
    pub change: bool,
    /// A command that was run.
    pub command: bool,
    /// A decision and its reason ("why did we ...", when not asking why something failed).
    pub decision: bool,
    /// An earlier state: what something was first, originally, before a later change.
    pub earliest: bool,
    /// The current state: what something is now.
    pub latest: bool,
}

const FAILURE: &[&str] = &[
    "error",
    "errors",
    "errored",
    "fail",
    "fails",
    "failed",
    "failing",
    "failure",
    "failures",
    "broke",
    "break",
    "breaks",
    "broken",
    "crash",
    "crashed",
    "crashes",
    "crashing",
    "complain",
    "complained",
    "complaining",
    "exception",
    "panic",
    "panicked",
    "traceback",
    "refused",
    "rejected",
    "unresolved",
    "timeout",
];

const CHANGE: &[&str] = &[
    "where",
    "fix",
    "fixed",
    "fixes",
    "change",
    "changed",
    "changes",
    "edit",
    "edited",
    "touch",
    "touched",
    "modify",
    "modified",
    "rewrite",
    "rewrote",
    "file",
    "files",
    "now",
    "currently",
];

const COMMAND: &[&str] = &["command", "commands", "ran", "invoked"];

const DECISION: &[&str] = &[
    "why",
    "decide",
    "decided",
    "decision",
    "chose",
    "chosen",
    "choose",
    "instead",
    "reason",
    "rationale",
];

const EARLIEST: &[&str] = &[
    "first",
    "initially",
    "initial",
    "originally",
    "original",
    "earlier",
    "before",
    "previously",
    "previous",
];

const LATEST: &[&str] = &["now", "currently", "current", "latest", "nowadays"];

impl Kinds {
    /// The kinds `text` asks for: each word (lowercased, split at anything not a letter) looked
    /// up in each kind's vocabulary. "Why" asks for a decision only when nothing failed: "why
    /// did the build break" asks for the failure.
    pub fn of(text: &str) -> Kinds {
        let mut k = Kinds::default();
        for word in text
            .split(|c: char| !c.is_alphabetic())
            .filter(|w| !w.is_empty())
        {
            let w = word.to_lowercase();
            let w = w.as_str();
            k.failure |= FAILURE.contains(&w);
            k.change |= CHANGE.contains(&w);
            k.command |= COMMAND.contains(&w);
            k.decision |= DECISION.contains(&w);
            k.earliest |= EARLIEST.contains(&w);
            k.latest |= LATEST.contains(&w);
        }
        k.decision &= !k.failure;
        k
    }

    /// Which way the query orders changes of one file, if it asks about one state only: `Some(true)`
    /// for the current one (newest first), `Some(false)` for an earlier one (oldest first).
    pub fn newest_first(self) -> Option<bool> {
        match (self.earliest, self.latest) {
            (true, false) => Some(false),
            (false, true) => Some(true),
            _ => None,
        }
    }

    /// Whether the query asks for any kind.
    #[cfg(test)]
    pub fn any(self) -> bool {
        self.failure || self.change || self.command || self.decision
    }

    /// Whether `h` records a kind the query asks for: a failed command or tool call for a
    /// failure; an edit, a written file or a commit for a change; a shell command for a command;
    /// the developer's prompt, a saved memory or a commit (its message says why) for a decision.
    pub fn matches(self, h: &SearchHit) -> bool {
        if h.kind == "prompt" {
            return self.decision && h.source.as_deref() == Some("user");
        }
        let Some(t) = h.obs_type.as_deref().and_then(ObsType::from_name) else {
            return false;
        };
        (self.failure && matches!(t, ObsType::CommandError | ObsType::ToolError))
            || (self.change
                && matches!(
                    t,
                    ObsType::FileEdit | ObsType::FileWrite | ObsType::GitCommit
                ))
            || (self.command && matches!(t, ObsType::Command | ObsType::CommandError))
            || (self.decision && matches!(t, ObsType::Memory | ObsType::GitCommit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_the_question_types_vocabulary() {
        let k = Kinds::of("What error did the first CMake build hit?");
        assert!(k.failure && !k.decision && !k.change);
        let k = Kinds::of("Where did we fix the goroutine leak?");
        assert!(k.change && !k.failure);
        let k = Kinds::of("Why did we drop Redux for the storefront state?");
        assert!(k.decision && !k.failure);
        // "why" with a failure asks for the failure.
        let k = Kinds::of("Why did the build break after the swap?");
        assert!(k.failure && !k.decision);
        let k = Kinds::of("Which command rebuilt the index?");
        assert!(k.command);
        // Case and punctuation do not matter; a keyword query asks for nothing.
        assert!(Kinds::of("BUILD-ERROR").failure);
        assert!(!Kinds::of("duplicate stripe charges").any());
        // Order: one state asked for, or none.
        assert_eq!(
            Kinds::of("What byte budget did we first give it?").newest_first(),
            Some(false)
        );
        assert_eq!(
            Kinds::of("How big is the tile cache now?").newest_first(),
            Some(true)
        );
        assert_eq!(
            Kinds::of("what was it before, and what is it now").newest_first(),
            None
        );
        assert_eq!(Kinds::of("tile cache size").newest_first(), None);
    }

    fn hit(kind: &str, obs_type: Option<&str>, source: Option<&str>) -> SearchHit {
        SearchHit {
            kind: kind.into(),
            obs_type: obs_type.map(str::to_string),
            source: source.map(str::to_string),
            ..Default::default()
        }
    }

    #[test]
    fn matches_rows_of_the_asked_kind() {
        let failure = Kinds::of("what error");
        assert!(failure.matches(&hit("observation", Some("command_error"), None)));
        assert!(failure.matches(&hit("observation", Some("tool_error"), None)));
        assert!(!failure.matches(&hit("observation", Some("command"), None)));
        assert!(!failure.matches(&hit("prompt", None, Some("user"))));
        let change = Kinds::of("which files changed");
        assert!(change.matches(&hit("observation", Some("file_edit"), None)));
        assert!(change.matches(&hit("observation", Some("git_commit"), None)));
        assert!(!change.matches(&hit("observation", Some("file_read"), None)));
        let decision = Kinds::of("why did we");
        assert!(decision.matches(&hit("prompt", None, Some("user"))));
        assert!(!decision.matches(&hit("prompt", None, Some("agent"))));
        assert!(decision.matches(&hit("observation", Some("memory"), None)));
        assert!(!Kinds::default().matches(&hit("observation", Some("command_error"), None)));
    }

    proptest! {
        /// Any text is read without panicking, and a kind is found only through a word of its
        /// vocabulary.
        #[test]
        fn any_text(s in "\\PC{0,200}") {
            let k = Kinds::of(&s);
            let words: Vec<String> = s
                .split(|c: char| !c.is_alphabetic())
                .map(|w| w.to_lowercase())
                .collect();
            let has = |v: &[&str]| words.iter().any(|w| v.contains(&w.as_str()));
            prop_assert_eq!(k.failure, has(FAILURE));
            prop_assert_eq!(k.change, has(CHANGE));
            prop_assert_eq!(k.command, has(COMMAND));
            prop_assert_eq!(k.decision, has(DECISION) && !k.failure);
            prop_assert_eq!(k.earliest, has(EARLIEST));
            prop_assert_eq!(k.latest, has(LATEST));
        }
    }
}
