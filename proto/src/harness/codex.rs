//! Codex CLI: its hooks copy Claude Code's schema and event names; its legacy `notify` program
//! (`codex-notify`) gets kebab-case JSON as the last argument, once per finished turn. The shell
//! tool's output format is here too: both the daemon (live hooks) and `nmem import` (rollouts)
//! read its exit code.

use super::{claude_fields, hook_specific_output, no_verdict, session, string, Event, Fields};
use super::{Harness, Hook, Rejection, Spec};
use serde_json::{Map, Value};

pub(super) const SPEC: Spec = Spec {
    harness: Harness::Codex,
    name: "codex",
    aliases: &[],
    title: "Codex",
    event: super::claude_code::event,
    envelope: claude_fields,
    payload_in_argument: false,
    verdict: no_verdict,
    session_start_output: hook_specific_output,
    hooks: &[
        Hook::on("SessionStart"),
        Hook::on("UserPromptSubmit"),
        Hook::on("PostToolUse"),
        Hook::on("Stop"),
        Hook::on("PreCompact"),
        Hook::on("PostCompact"),
        Hook::on("StopFailure"),
    ],
    imports: true,
};

/// `notify = ["nmem", "record", "--harness", "codex-notify"]`: installed by hand (`nmem
/// install` wires Codex's hooks, which see more), and its turns are in the rollouts `nmem
/// import --harness codex` reads.
pub(super) const NOTIFY_SPEC: Spec = Spec {
    harness: Harness::CodexNotify,
    name: "codex-notify",
    aliases: &[],
    title: "Codex (notify)",
    event: |name| (name == "agent-turn-complete").then_some(Event::Stop),
    envelope: notify_fields,
    payload_in_argument: true,
    verdict: no_verdict,
    session_start_output: hook_specific_output,
    hooks: &[],
    imports: false,
};

fn notify_fields(obj: &Map<String, Value>) -> Result<Fields<'_>, Rejection> {
    Ok(Fields {
        session_id: session(obj, "thread-id")?,
        cwd: string(obj, "cwd")?,
        event_name: string(obj, "type")?,
    })
}

/// The exit code at the head of Codex's shell tool output: "Exit code: 1\nWall time: …\nOutput:\n…",
/// or, from its unified exec tool, "Chunk ID: …\nWall time: …\nProcess exited with code 1".
pub fn exit_code(text: &str) -> Option<i64> {
    text.lines()
        .take(3)
        .find_map(|l| {
            l.strip_prefix("Exit code:")
                .or_else(|| l.strip_prefix("Process exited with code"))
        })?
        .trim()
        .parse()
        .ok()
}

/// The command's output in Codex's shell tool output (after its `Output:` line), or the whole
/// text when it has none.
pub fn shell_output(text: &str) -> &str {
    text.split_once("\nOutput:\n").map_or(text, |x| x.1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn exit_code_of_the_shell_tool() {
        let t = "Exit code: 1\nWall time: 0.2 seconds\nOutput:\nFAIL";
        assert_eq!(super::exit_code(t), Some(1));
        assert_eq!(super::shell_output(t), "FAIL");
        assert_eq!(super::exit_code("Exit code: 0\nOutput:\nok"), Some(0));
        assert_eq!(super::exit_code("src/a.rs:1: Exit code: 3"), None);
        assert_eq!(super::shell_output("plain"), "plain");
        let t = "Chunk ID: 4f1a\nWall time: 0.1 seconds\nProcess exited with code 2\nOutput:\nboom";
        assert_eq!(super::exit_code(t), Some(2));
        assert_eq!(super::shell_output(t), "boom");
        assert_eq!(
            super::exit_code("a\nb\nc\nExit code: 1"),
            None,
            "only the head"
        );
    }
}
