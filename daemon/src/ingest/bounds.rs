//! The last word on field lengths before storage, whatever an extractor kept: a hostile or
//! broken payload (a 1 MB `cwd`, a 900 KB path, a tool name of a megabyte) can neither slow the
//! daemon nor bloat the database. A `cwd` longer than any real path is refused (nothing stored);
//! every other field is cut, with a marker, to a length no real value reaches.

use super::{Prepared, Record};
use crate::query::bounds::{MAX_NAME, MAX_PATH};
use serde_json::Value;

/// The most kept of any stored text (extractors keep far less; this is the backstop).
pub const MAX_TEXT: usize = 64 * 1024;
/// The most kept of one metadata string.
pub const MAX_META: usize = 8 * 1024;

/// A `cwd` nmem accepts: no longer than a real path.
pub fn check_cwd(cwd: &str) -> Result<(), String> {
    if cwd.len() <= MAX_PATH {
        return Ok(());
    }
    Err(format!(
        "`cwd` is {} bytes, longer than any real path ({MAX_PATH}); nothing stored",
        cwd.len()
    ))
}

/// Cut every stored field to its bound.
pub fn cap(p: &mut Prepared) {
    cut(&mut p.event_name, MAX_NAME);
    cut(&mut p.project.name, MAX_NAME);
    cut(&mut p.project.root, MAX_PATH);
    match &mut p.record {
        Record::Observation(o) => {
            cut(&mut o.content, MAX_TEXT);
            for f in [
                &mut o.tool_name,
                &mut o.file_path,
                &mut o.rel_path,
                &mut o.tool_use_id,
            ]
            .into_iter()
            .flatten()
            {
                cut(f, MAX_PATH);
            }
            for v in o.metadata.values_mut() {
                cap_value(v, 0);
            }
        }
        Record::Prompt(pr) => cut(&mut pr.content, MAX_TEXT),
        Record::Nothing => {}
    }
}

fn cap_value(v: &mut Value, depth: usize) {
    match v {
        Value::String(s) => cut(s, MAX_META),
        Value::Array(a) if depth < 8 => a.iter_mut().for_each(|v| cap_value(v, depth + 1)),
        Value::Object(o) if depth < 8 => o.values_mut().for_each(|v| cap_value(v, depth + 1)),
        _ => {}
    }
}

/// At most `max` bytes, cut on a character boundary, with a marker.
fn cut(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let total = s.len();
    s.truncate(end);
    s.push_str(&format!("… [truncated, {total} bytes]"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_char_boundaries_and_says_so() {
        let mut s = "é".repeat(10);
        cut(&mut s, 5);
        assert!(s.starts_with("éé…"), "{s}");
        assert!(s.contains("20 bytes"));
        let mut short = "ok".to_string();
        cut(&mut short, 5);
        assert_eq!(short, "ok");
        assert!(check_cwd(&"/x".repeat(MAX_PATH)).is_err());
        assert!(check_cwd("/home/dev/app").is_ok());
    }
}
