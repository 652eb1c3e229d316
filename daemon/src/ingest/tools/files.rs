//! Read, Write, Edit, MultiEdit, NotebookEdit and Codex's apply_patch.

use super::super::lifecycle::meta;
use super::super::text::{line_count, str_of, truncate};
use super::super::{Cx, Obs, ToolCall};
use serde_json::{json, Value};

/// Characters of changed lines kept in an edit's searchable content.
const EXCERPT: usize = 600;

pub(super) fn read(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let file = call.response.as_deref().and_then(|r| r.get("file"));
    let path = str_of(&call.input, "file_path")
        .or_else(|| str_of(&call.input, "absolute_path"))
        .or_else(|| file.and_then(|f| str_of(f, "filePath")))?;
    let start = file
        .and_then(|f| f.get("startLine"))
        .and_then(Value::as_i64)
        .or_else(|| call.input.get("offset").and_then(Value::as_i64));
    let lines = file.and_then(|f| f.get("numLines")).and_then(Value::as_i64);
    let total = file
        .and_then(|f| f.get("totalLines"))
        .and_then(Value::as_i64);
    let mut content = path.to_string();
    if let (Some(s), Some(n)) = (start, lines) {
        if total.is_some_and(|t| n < t) {
            content.push_str(&format!(" (lines {s}-{})", s + n.max(1) - 1));
        }
    }
    Some(Obs {
        obs_type: "file_read",
        file_path: Some(path.to_string()),
        content,
        metadata: meta([
            ("lines_read", json!(lines)),
            ("total_lines", json!(total)),
            ("start_line", json!(start)),
        ]),
        ..Obs::default()
    })
}

pub(super) fn write(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let path = str_of(&call.input, "file_path")
        .or_else(|| call.response.as_deref().and_then(|r| str_of(r, "filePath")))?;
    let body = str_of(&call.input, "content").unwrap_or("");
    // Never the body: its size, line count and hash are enough to recognise it later.
    let kind = call.response.as_deref().and_then(|r| str_of(r, "type"));
    let elided = body.starts_with("[nmem: elided ");
    let hash = crate::sha256_hex(body.as_bytes());
    let mut metadata = meta([
        ("bytes", json!(body.len())),
        ("lines", json!(line_count(body))),
        ("sha256", json!(hash)),
        ("kind", json!(kind)),
    ]);
    if elided {
        // The shim replaced a huge body by a marker that carries the real size and hash.
        metadata.insert("elided".into(), json!(body));
    }
    Some(Obs {
        obs_type: "file_write",
        file_path: Some(path.to_string()),
        content: path.to_string(),
        metadata,
        ..Obs::default()
    })
}

pub(super) fn edit(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let path = str_of(input, "file_path")
        .or_else(|| call.response.as_deref().and_then(|r| str_of(r, "filePath")))?;
    let edits: Vec<(&str, &str)> = match input.get("edits").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .map(|e| {
                (
                    str_of(e, "old_string").unwrap_or(""),
                    str_of(e, "new_string").unwrap_or(""),
                )
            })
            .collect(),
        None => vec![(
            str_of(input, "old_string").unwrap_or(""),
            str_of(input, "new_string").unwrap_or(""),
        )],
    };
    let (added, removed) = call
        .response
        .as_deref()
        .and_then(|r| r.get("structuredPatch"))
        .and_then(patch_counts)
        .unwrap_or_else(|| {
            edits.iter().fold((0, 0), |(a, r), (old, new)| {
                (a + line_count(new), r + line_count(old))
            })
        });
    let content = format!("{path}\n{}", excerpt(&edits));
    Some(Obs {
        obs_type: "file_edit",
        file_path: Some(path.to_string()),
        content,
        metadata: meta([
            ("added", json!(added)),
            ("removed", json!(removed)),
            ("edits", json!(edits.len())),
            (
                "replace_all",
                input.get("replace_all").cloned().unwrap_or(Value::Null),
            ),
        ]),
        ..Obs::default()
    })
}

pub(super) fn notebook_edit(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let path = str_of(&call.input, "notebook_path").or_else(|| str_of(&call.input, "file_path"))?;
    let new = str_of(&call.input, "new_source").unwrap_or("");
    let mode = str_of(&call.input, "edit_mode").unwrap_or("replace");
    Some(Obs {
        obs_type: "file_edit",
        file_path: Some(path.to_string()),
        content: format!("{path}\n{}", excerpt(&[("", new)])),
        metadata: meta([
            ("cell_id", json!(str_of(&call.input, "cell_id"))),
            ("edit_mode", json!(mode)),
            ("added", json!(line_count(new))),
        ]),
        ..Obs::default()
    })
}

/// Codex's apply_patch: `*** Update File: path` / `*** Add File:` / `*** Delete File:` sections.
pub(super) fn apply_patch(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let patch = str_of(&call.input, "command")
        .or_else(|| str_of(&call.input, "patch"))
        .or_else(|| str_of(&call.input, "input"))
        .or_else(|| call.input.as_str())?;
    let mut files = Vec::new();
    let (mut added, mut removed) = (0, 0);
    let mut changes: Vec<(String, String)> = Vec::new();
    for line in patch.lines() {
        if let Some(p) = ["*** Update File: ", "*** Add File: ", "*** Delete File: "]
            .iter()
            .find_map(|m| line.strip_prefix(m))
        {
            files.push(p.trim().to_string());
        } else if line.starts_with("***") {
            continue;
        } else if let Some(l) = line.strip_prefix('+') {
            added += 1;
            changes.push((String::new(), l.to_string()));
        } else if let Some(l) = line.strip_prefix('-') {
            removed += 1;
            changes.push((l.to_string(), String::new()));
        }
    }
    let first = files.first()?.clone();
    let mut content = files.join(", ");
    content.push('\n');
    let pairs: Vec<(&str, &str)> = changes
        .iter()
        .map(|(o, n)| (o.as_str(), n.as_str()))
        .collect();
    content.push_str(&excerpt(&pairs));
    Some(Obs {
        obs_type: "file_edit",
        file_path: Some(first),
        content,
        metadata: meta([
            ("added", json!(added)),
            ("removed", json!(removed)),
            ("files", json!(files)),
        ]),
        ..Obs::default()
    })
}

/// The lines that changed, `- old` / `+ new`, edit after edit, up to `EXCERPT` characters: the
/// lines an edit leaves as they were are left out.
fn excerpt(edits: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut room = EXCERPT;
    'edits: for (old, new) in edits {
        let olds: Vec<&str> = old
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let news: Vec<&str> = new
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let removed = olds
            .iter()
            .filter(|l| !news.contains(l))
            .map(|l| ("- ", *l));
        let added = news
            .iter()
            .filter(|l| !olds.contains(l))
            .map(|l| ("+ ", *l));
        for (sign, line) in removed.chain(added) {
            let line = truncate(line, EXCERPT / 4);
            let need = line.chars().count() + 3;
            if need > room {
                break 'edits;
            }
            room -= need;
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(sign);
            out.push_str(&line);
        }
    }
    out
}

/// Added and removed lines of a structuredPatch (hunks whose `lines` start with + or -).
fn patch_counts(patch: &Value) -> Option<(usize, usize)> {
    let hunks = patch.as_array().filter(|h| !h.is_empty())?;
    let mut counts = (0, 0);
    for line in hunks
        .iter()
        .filter_map(|h| h.get("lines")?.as_array())
        .flatten()
    {
        match line.as_str().and_then(|l| l.chars().next()) {
            Some('+') => counts.0 += 1,
            Some('-') => counts.1 += 1,
            _ => {}
        }
    }
    Some(counts)
}
