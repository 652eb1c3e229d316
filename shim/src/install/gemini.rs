//! Gemini CLI: hooks and the MCP server in `~/.gemini/settings.json` (timeouts in
//! milliseconds; hooks run only when `tools.enableHooks` is on, which the notes say).
use super::json::{load, remove_nested_hooks, set_mcp, set_nested_hooks, stage};
use super::{command, Ctx, Target};
use nmem_proto::harness::Harness;
use serde_json::{json, Value};

pub(super) struct Gemini;

impl Target for Gemini {
    fn harness(&self) -> Harness {
        Harness::Gemini
    }

    fn config_dir(&self) -> Option<&'static str> {
        Some(".gemini")
    }

    fn apply(&self, cx: &mut Ctx, install: bool) -> Result<(), String> {
        apply(cx, install)
    }
}

fn apply(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".gemini/settings.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, Harness::Gemini);
        let wanted: Vec<(String, Option<&str>, Value)> = (Harness::Gemini.spec().hooks)
            .iter()
            .map(|h| {
                (
                    h.event.to_string(),
                    h.tools.then_some("*"),
                    // Gemini CLI counts in milliseconds.
                    json!({"type": "command", "command": cmd, "name": "nmem", "timeout": h.timeout_s * 1000}),
                )
            })
            .collect();
        set_nested_hooks(&mut after, &wanted, &mut what);
        if after.pointer("/tools/enableHooks") != Some(&json!(true)) {
            cx.notes.push("Gemini CLI runs hooks only when they are enabled: /settings → Advanced, or tools.enableHooks".into());
        }
    } else {
        remove_nested_hooks(&mut after, &mut what);
    }
    set_mcp(cx, &mut after, install, &mut what, false);
    stage(cx, path, before, &v, after, what);
    Ok(())
}
