//! WebFetch and WebSearch: the url or the query, never the page.

use super::super::lifecycle::meta;
use super::super::text::{str_of, truncate};
use super::super::{Cx, Obs, ToolCall};
use serde_json::{json, Value};

pub(super) fn fetch(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let url = str_of(&call.input, "url")?;
    let resp = call.response.as_deref();
    Some(Obs {
        obs_type: "web_fetch",
        content: url.to_string(),
        metadata: meta([
            (
                "prompt",
                json!(str_of(&call.input, "prompt").map(|p| truncate(p, 300))),
            ),
            (
                "status",
                resp.and_then(|r| r.get("code"))
                    .cloned()
                    .unwrap_or(Value::Null),
            ),
            (
                "bytes",
                resp.and_then(|r| r.get("bytes"))
                    .cloned()
                    .unwrap_or(Value::Null),
            ),
        ]),
        ..Obs::default()
    })
}

pub(super) fn search(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let query = str_of(&call.input, "query")?;
    // Results mix `{tool_use_id, content: [{title, url}]}` objects and summary strings.
    let urls: Vec<&str> = call
        .response
        .as_deref()
        .and_then(|r| r.get("results"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r.get("content").and_then(Value::as_array))
        .flatten()
        .filter_map(|c| str_of(c, "url"))
        .take(5)
        .collect();
    Some(Obs {
        obs_type: "web_search",
        content: truncate(query, 500),
        metadata: meta([(
            "urls",
            if urls.is_empty() {
                Value::Null
            } else {
                json!(urls)
            },
        )]),
        ..Obs::default()
    })
}
