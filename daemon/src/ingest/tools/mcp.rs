//! MCP tools, named `mcp__<server>__<tool>`: the server, the tool and a short argument summary.

use super::super::lifecycle::meta;
use super::super::text::summarize_args;
use super::super::{Cx, Obs, ToolCall};
use serde_json::json;

/// nmem's own tools, whether registered as `nmem` or through the plugin (`plugin_nmem_nmem`).
pub(super) fn is_own_tool(name: &str) -> bool {
    name.strip_prefix("mcp__")
        .and_then(|rest| rest.split_once("__"))
        .is_some_and(|(server, _)| server == "nmem" || server.ends_with("_nmem"))
}

pub(super) fn extract(_cx: &Cx, call: &ToolCall) -> Option<Obs> {
    let rest = call.name.strip_prefix("mcp__")?;
    let (server, tool) = rest.split_once("__").unwrap_or((rest, ""));
    let args = summarize_args(&call.input, 300);
    let mut content = format!("{server} {tool}");
    if !args.is_empty() {
        content.push(' ');
        content.push_str(&args);
    }
    Some(Obs {
        obs_type: "mcp_call",
        content,
        metadata: meta([("server", json!(server)), ("tool", json!(tool))]),
        ..Obs::default()
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn own_tools_are_recognised() {
        assert!(super::is_own_tool("mcp__nmem__search"));
        assert!(super::is_own_tool("mcp__plugin_nmem_nmem__timeline"));
        assert!(!super::is_own_tool("mcp__github__get_issue"));
        assert!(!super::is_own_tool("mcp__nmemx__a"));
    }
}
