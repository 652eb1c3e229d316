//! Claude Code: hooks in `~/.claude/settings.json` (tool events with the `*` matcher), the MCP
//! server in `~/.claude.json` (or through `claude mcp`, which the notes name).
use super::json::{load, remove_nested_hooks, set_mcp, set_nested_hooks, stage};
use super::{command, Ctx, Target};
use super::{shell_quote, which};
use nmem_proto::harness::Harness;
use serde_json::{json, Value};

pub(super) struct ClaudeCode;

impl Target for ClaudeCode {
    fn harness(&self) -> Harness {
        Harness::ClaudeCode
    }

    /// Always installed: nmem is made for it first.
    fn config_dir(&self) -> Option<&'static str> {
        None
    }

    #[cfg(test)]
    fn events(&self) -> Vec<&'static str> {
        CLAUDE_EVENTS.iter().map(|(e, _, _)| *e).collect()
    }

    fn apply(&self, cx: &mut Ctx, install: bool) -> Result<(), String> {
        apply(cx, install)
    }
}

const CLAUDE_EVENTS: &[(&str, bool, u32)] = &[
    // (event, takes a tool matcher, timeout in seconds)
    ("SessionStart", false, 10),
    ("UserPromptSubmit", false, 5),
    ("PostToolUse", true, 5),
    ("PostToolUseFailure", true, 5),
    ("PreCompact", false, 5),
    ("PostCompact", false, 5),
    ("Stop", false, 5),
    ("SubagentStop", false, 5),
    ("StopFailure", false, 5),
    ("SessionEnd", false, 2),
];

fn apply(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".claude/settings.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, Harness::ClaudeCode);
        let wanted: Vec<(String, Option<&str>, Value)> = CLAUDE_EVENTS
            .iter()
            .map(|(e, tools, timeout)| {
                (
                    e.to_string(),
                    tools.then_some("*"),
                    json!({"type": "command", "command": cmd, "timeout": timeout}),
                )
            })
            .collect();
        set_nested_hooks(&mut after, &wanted, &mut what);
    } else {
        remove_nested_hooks(&mut after, &mut what);
    }
    stage(cx, path, before, &v, after, what);

    // The MCP server at user scope: `claude mcp` when it is installed, else ~/.claude.json.
    if which("claude").is_some() {
        cx.notes.push(if install {
            format!(
                "register the MCP server with: claude mcp add --scope user nmem -- {} serve",
                shell_quote(&cx.nmem.to_string_lossy())
            )
        } else {
            "remove the MCP server with: claude mcp remove --scope user nmem".to_string()
        });
    }
    let path = cx.home.join(".claude.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    set_mcp(cx, &mut after, install, &mut what, true);
    stage(cx, path, before, &v, after, what);
    Ok(())
}
