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

    fn apply(&self, cx: &mut Ctx, install: bool) -> Result<(), String> {
        apply(cx, install)
    }
}

fn apply(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".claude/settings.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, Harness::ClaudeCode);
        let wanted: Vec<(String, Option<&str>, Value)> = (Harness::ClaudeCode.spec().hooks)
            .iter()
            .map(|h| {
                (
                    h.event.to_string(),
                    h.tools.then_some("*"),
                    json!({"type": "command", "command": cmd, "timeout": h.timeout_s}),
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
