//! Codex CLI: hooks in `~/.codex/hooks.json` (Claude Code's shape), the MCP server as
//! `[mcp_servers.nmem]` in `~/.codex/config.toml`, edited in place with its comments kept.
use super::json::{load, remove_nested_hooks, set_nested_hooks, stage};
use super::Change;
use super::{command, Ctx, Target};
use nmem_proto::harness::Harness;
use serde_json::{json, Value};
use std::path::Path;

pub(super) struct Codex;

impl Target for Codex {
    fn harness(&self) -> Harness {
        Harness::Codex
    }

    fn config_dir(&self) -> Option<&'static str> {
        Some(".codex")
    }

    fn apply(&self, cx: &mut Ctx, install: bool) -> Result<(), String> {
        apply(cx, install)
    }
}

fn apply(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".codex/hooks.json");
    let (before, v) = load(&path)?;
    let mut after = v.clone();
    let mut what = Vec::new();
    if install {
        let cmd = command(cx, Harness::Codex);
        let wanted: Vec<(String, Option<&str>, Value)> = (Harness::Codex.spec().hooks)
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
    codex_mcp(cx, install)?;
    Ok(())
}

/// `[mcp_servers.nmem]` in ~/.codex/config.toml, edited in place (comments and layout kept).
fn codex_mcp(cx: &mut Ctx, install: bool) -> Result<(), String> {
    let path = cx.home.join(".codex/config.toml");
    let before = match std::fs::read_to_string(&path) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let mut doc: toml_edit::DocumentMut = before.as_deref().unwrap_or("").parse().map_err(|e| {
        format!(
            "{} is not valid TOML ({e}); fix it, then run this again",
            path.display()
        )
    })?;
    let existing = doc.get("mcp_servers").and_then(|t| t.get("nmem"));
    let ours = existing.is_none_or(|e| {
        e.get("command")
            .and_then(|c| c.as_str())
            .is_some_and(|c| Path::new(c).file_name().is_some_and(|n| n == "nmem"))
    });
    if !ours {
        cx.notes.push(format!(
            "left the existing `nmem` MCP server in {} alone: it does not run nmem",
            path.display()
        ));
        return Ok(());
    }
    let mut what = Vec::new();
    let bin = cx.nmem.to_string_lossy().into_owned();
    if install {
        let current = existing
            .and_then(|e| e.get("command"))
            .and_then(|c| c.as_str())
            .map(str::to_string);
        if current.as_deref() != Some(bin.as_str()) {
            let servers = doc.entry("mcp_servers").or_insert(toml_edit::table());
            if let Some(t) = servers.as_table_mut() {
                t.set_implicit(true);
                let mut entry = toml_edit::Table::new();
                entry.insert("command", toml_edit::value(bin.clone()));
                let mut args = toml_edit::Array::new();
                args.push("serve");
                entry.insert("args", toml_edit::value(args));
                t.insert("nmem", toml_edit::Item::Table(entry));
            }
            what.push("MCP server `nmem` (nmem serve)".to_string());
        }
    } else if existing.is_some() {
        if let Some(t) = doc.get_mut("mcp_servers").and_then(|t| t.as_table_mut()) {
            t.remove("nmem");
            if t.is_empty() {
                doc.remove("mcp_servers");
            }
        }
        what.push("removed MCP server `nmem`".to_string());
    }
    if !what.is_empty() {
        let after = doc.to_string();
        // An empty file would only hold what nmem added: removed, like the JSON files.
        let after = if after.trim().is_empty() && before.is_none() {
            "{}".to_string()
        } else {
            after
        };
        cx.changes.push(Change {
            path,
            before,
            after,
            what,
        });
    }
    Ok(())
}
