//! Small text helpers shared by the extractors.

use serde_json::Value;

/// At most `max` characters, cut on a character boundary, with a marker when cut.
pub fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((i, _)) => format!("{}… [truncated, {} chars]", &s[..i], s.chars().count()),
    }
}

/// The first `head` and last `tail` characters, with a marker for what was left out between.
pub fn head_tail(s: &str, head: usize, tail: usize) -> String {
    let n = s.chars().count();
    if n <= head + tail {
        return s.to_string();
    }
    let h_end = s
        .char_indices()
        .nth(head)
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let t_start = s
        .char_indices()
        .nth(n - tail)
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    format!(
        "{}\n… [{} chars elided] …\n{}",
        &s[..h_end],
        n - head - tail,
        &s[t_start..]
    )
}

/// The first line, trimmed and bounded.
pub fn first_line(s: &str, max: usize) -> String {
    truncate(
        s.lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("")
            .trim(),
        max,
    )
}

/// A string field of a JSON object.
pub fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// A one-line summary of a tool's arguments: `key=value` pairs, values shortened.
pub fn summarize_args(v: &Value, max: usize) -> String {
    let s = match v {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| {
                let val = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                format!("{k}={}", truncate(&val.replace('\n', " "), 80))
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        Value::String(s) => s.replace('\n', " "),
        other => other.to_string(),
    };
    truncate(&s, max)
}

/// The text of an MCP-style content array (`[{type: "text", text}]`), or the string itself.
pub fn content_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let parts: Vec<&str> = items
                .iter()
                .filter_map(|i| i.get("text").and_then(Value::as_str).or_else(|| i.as_str()))
                .collect();
            (!parts.is_empty()).then(|| parts.join("\n"))
        }
        Value::Object(o) => o.get("content").and_then(content_text),
        _ => None,
    }
}

/// Count lines the way an editor does (a final line without newline counts).
pub fn line_count(s: &str) -> usize {
    if s.is_empty() {
        0
    } else {
        s.lines().count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_is_char_safe() {
        assert_eq!(truncate("héllo", 10), "héllo");
        assert!(truncate("héllo wörld", 3).starts_with("hél…"));
        let ht = head_tail("abcdefghij", 2, 3);
        assert!(ht.starts_with("ab\n") && ht.ends_with("\nhij"), "{ht}");
        assert_eq!(head_tail("abc", 2, 3), "abc");
    }
}
