//! Cursor: flat hooks (`{version: 1, hooks: {event: [{command}]}}`) in `~/.cursor/hooks.json`,
//! the MCP server in `~/.cursor/mcp.json`.
use super::json::{load, remove_nested_hooks, set_mcp, stage};
use super::{command, Ctx, Target};
use nmem_proto::harness::Harness;
use serde_json::json;

pub(super) struct Cursor;

impl Target for Cursor {
    fn harness(&self) -> Harness {
        Harness::Cursor
    }

    fn config_dir(&self) -> Option<&'static str> {
        Some(".cursor")
    }

    fn apply(&self, cx: &mut Ctx, install: bool) -> Result<(), String> {
        apply(cx, install)
    }
}

fn apply(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".cursor/hooks.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    remove_nested_hooks(&mut after, &mut Vec::new());
    if install {
        let cmd = command(cx, Harness::Cursor);
        let obj = after.as_object_mut().unwrap();
        obj.entry("version").or_insert(json!(1));
        let hooks = obj.entry("hooks").or_insert_with(|| json!({}));
        if let Some(hooks) = hooks.as_object_mut() {
            for h in Harness::Cursor.spec().hooks {
                if let Some(list) = hooks
                    .entry(h.event.to_string())
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                {
                    list.push(json!({"command": cmd}));
                }
            }
        }
        if after != v {
            let events: Vec<&str> = Harness::Cursor
                .spec()
                .hooks
                .iter()
                .map(|h| h.event)
                .collect();
            what.push(format!("nmem's hooks for {}", events.join(", ")));
        } else {
            after = v.clone();
        }
    } else {
        after = v.clone();
        remove_nested_hooks(&mut after, &mut what);
    }
    stage(cx, path, before, &v, after, what);
    let path = cx.home.join(".cursor/mcp.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    set_mcp(cx, &mut after, install, &mut what, false);
    stage(cx, path, before, &v, after, what);
    Ok(())
}
