//! Editing the harnesses' JSON files: loading one (refusing what is not a JSON object),
//! staging its new content only when it changes, the nested hook shape Claude Code, Codex and
//! Gemini CLI share (and Cursor's flat one, for removal), and the `mcpServers.nmem` entry.

use super::{is_ours, Change, Ctx};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

pub(super) fn load(path: &Path) -> Result<(Option<String>, Value), String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok((Some(text), json!({}))),
        Ok(text) => {
            let v: Value = serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{} is not valid JSON ({e}); fix it or move it aside, then run this again",
                    path.display()
                )
            })?;
            if !v.is_object() {
                return Err(format!(
                    "{} does not hold a JSON object; nmem will not change it",
                    path.display()
                ));
            }
            Ok((Some(text), v))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, json!({}))),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

pub(super) fn stage(
    cx: &mut Ctx,
    path: PathBuf,
    before: Option<String>,
    before_value: &Value,
    after: Value,
    what: Vec<String>,
) {
    let unchanged = match &before {
        Some(_) => *before_value == after,
        None => after.as_object().is_some_and(Map::is_empty),
    };
    if unchanged || what.is_empty() {
        return;
    }
    let mut text = serde_json::to_string_pretty(&after).expect("serialises");
    text.push('\n');
    cx.changes.push(Change {
        path,
        before,
        after: text,
        what,
    });
}

/// Claude Code, Codex and Gemini: `hooks.<Event>: [{matcher?, hooks: [{type, command, timeout}]}]`.
pub(super) fn set_nested_hooks(
    root: &mut Value,
    wanted: &[(String, Option<&str>, Value)],
    what: &mut Vec<String>,
) {
    let before = root.clone();
    remove_nested_hooks(root, &mut Vec::new());
    let hooks = root
        .as_object_mut()
        .unwrap()
        .entry("hooks")
        .or_insert_with(|| json!({}));
    let Some(hooks) = hooks.as_object_mut() else {
        return;
    };
    for (event, matcher, handler) in wanted {
        let groups = hooks.entry(event.clone()).or_insert_with(|| json!([]));
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        let mut group = Map::new();
        if let Some(m) = matcher {
            group.insert("matcher".into(), json!(m));
        }
        group.insert("hooks".into(), json!([handler]));
        groups.push(Value::Object(group));
    }
    if *root != before {
        what.push(format!(
            "nmem's hooks for {}",
            wanted
                .iter()
                .map(|(e, _, _)| e.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else {
        // Same content: keep the original (and its key order) untouched.
        *root = before;
    }
}

/// Take out every nmem handler, then the groups, events and `hooks` object that held only them.
pub(super) fn remove_nested_hooks(root: &mut Value, what: &mut Vec<String>) {
    let Some(hooks) = root.get_mut("hooks").and_then(Value::as_object_mut) else {
        return;
    };
    let mut removed = 0;
    for groups in hooks.values_mut() {
        let Some(groups) = groups.as_array_mut() else {
            continue;
        };
        for g in groups.iter_mut() {
            // Cursor's flat shape: the group is the handler.
            if let Some(handlers) = g.get_mut("hooks").and_then(Value::as_array_mut) {
                let n = handlers.len();
                handlers.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ours)
                });
                removed += n - handlers.len();
            }
        }
        let n = groups.len();
        groups.retain(|g| match g.get("hooks").and_then(Value::as_array) {
            Some(h) => !h.is_empty(),
            None => !g
                .get("command")
                .and_then(Value::as_str)
                .is_some_and(is_ours),
        });
        removed += n - groups.len();
    }
    hooks.retain(|_, g| !g.as_array().is_some_and(Vec::is_empty));
    if removed > 0 {
        what.push(format!(
            "removed {removed} nmem hook entr{}",
            if removed == 1 { "y" } else { "ies" }
        ));
        let empty = hooks.is_empty();
        let obj = root.as_object_mut().unwrap();
        if empty {
            obj.remove("hooks");
            // Cursor's file: nmem added `version` with the hooks.
            if obj.len() == 1 && obj.get("version") == Some(&json!(1)) {
                obj.remove("version");
            }
        }
    }
}

/// `mcpServers.nmem` in a JSON file.
pub(super) fn set_mcp(
    cx: &Ctx,
    root: &mut Value,
    install: bool,
    what: &mut Vec<String>,
    with_type: bool,
) {
    let servers = root.get("mcpServers").and_then(Value::as_object);
    let existing = servers.and_then(|s| s.get("nmem"));
    let ours = existing.is_none_or(|e| {
        e.get("command")
            .and_then(Value::as_str)
            .is_some_and(|c| Path::new(c).file_name().is_some_and(|n| n == "nmem"))
            && e.get("args") == Some(&json!(["serve"]))
    });
    if !ours {
        what.push("left the existing `nmem` MCP server alone: it does not run `nmem serve`".into());
        return;
    }
    let obj = root.as_object_mut().unwrap();
    if install {
        let mut entry = Map::new();
        if with_type {
            entry.insert("type".into(), json!("stdio"));
        }
        entry.insert("command".into(), json!(cx.nmem.to_string_lossy()));
        entry.insert("args".into(), json!(["serve"]));
        let entry = Value::Object(entry);
        let servers = obj.entry("mcpServers").or_insert_with(|| json!({}));
        if servers.get("nmem") != Some(&entry) {
            servers
                .as_object_mut()
                .map(|s| s.insert("nmem".into(), entry));
            what.push("MCP server `nmem` (nmem serve)".into());
        }
    } else if let Some(servers) = obj.get_mut("mcpServers").and_then(Value::as_object_mut) {
        if servers.remove("nmem").is_some() {
            what.push("removed MCP server `nmem`".into());
            if servers.is_empty() {
                obj.remove("mcpServers");
            }
        }
    }
}
