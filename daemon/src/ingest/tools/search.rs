//! Grep, Glob and LS: what was looked for, where, and how much was found.

use super::super::lifecycle::meta;
use super::super::text::{str_of, truncate};
use super::super::{Cx, Obs, ToolCall};
use serde_json::{json, Value};

pub(super) fn extract(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let input = &*call.input;
    let resp = call.response.as_deref();
    let path = str_of(input, "path").or_else(|| str_of(input, "dir_path"));
    let (content, metadata) = match call.name.as_str() {
        "LS" => {
            let path = path?;
            let entries = resp.and_then(Value::as_str).map(|t| {
                t.lines()
                    .filter(|l| l.trim_start().starts_with("- "))
                    .count()
            });
            (
                path.to_string(),
                meta([("path", json!(path)), ("entries", json!(entries))]),
            )
        }
        _ => {
            let pattern = str_of(input, "pattern")?;
            let mut content = truncate(pattern, 500);
            if let Some(g) = str_of(input, "glob").or_else(|| str_of(input, "include")) {
                content.push_str(&format!(" ({g})"));
            }
            if let Some(p) = path {
                content.push_str(" in ");
                content.push_str(p);
            }
            let num = |k: &str| resp.and_then(|r| r.get(k)).and_then(Value::as_i64);
            let matches = match (num("numLines"), num("numFiles")) {
                (Some(l), _) if l > 0 => Some(l),
                (_, f) => f,
            };
            (
                content,
                meta([
                    ("pattern", json!(pattern)),
                    ("path", json!(path)),
                    ("matches", json!(matches)),
                    ("files", json!(num("numFiles"))),
                    ("mode", json!(str_of(input, "output_mode"))),
                    (
                        "truncated",
                        resp.and_then(|r| r.get("truncated"))
                            .cloned()
                            .unwrap_or(Value::Null),
                    ),
                ]),
            )
        }
    };
    Some(Obs {
        obs_type: "search",
        content,
        metadata,
        ..Obs::default()
    })
}
