//! Reading a hook payload: when it is complete ([`Scan`]), and, past 1 MiB, streaming elision
//! ([`Elider`]) so that every payload under [`INPUT_LIMIT`] is stored, shortened.
//!
//! The scan follows only string and bracket boundaries: once the top-level object or array has
//! closed, the hook stops reading (a harness may keep stdin open after the payload), and a byte
//! no JSON document has outside a string (a NUL, as `/dev/zero` sends) ends reading at once
//! with a clear error instead of a quarter gigabyte read for nothing.
//!
//! Elision copies the JSON through, except:
//!
//! * a string longer than [`STRING_LIMIT`] bytes (as written, escapes included) becomes
//!   `"[nmem: elided N bytes, sha256 <hex>]"`;
//! * once the output passes [`BUDGET`], arrays keep the items they have and replace the rest by
//!   one marker item, objects below the top level likewise with an `nmem_elided` member (the
//!   top level is the envelope: its members are kept), and strings begun after it are cut at
//!   [`LATE_STRING_LIMIT`].
//!
//! So a valid payload (at most [`MAX_DEPTH`] levels, as the parser allows) comes out under
//! `BUDGET + STRING_LIMIT + MAX_DEPTH × (2 × LATE_STRING_LIMIT + a marker)`, about 9.5 MiB,
//! whatever its shape, except a top-level object of millions of members, which
//! [`OUTPUT_LIMIT`] refuses. Memory stays bounded: at most one string's worth of bytes is
//! buffered before it is hashed instead. The result is validated afterwards like any payload.

use sha2::{Digest, Sha256};
use std::io::{self, Read};

/// Strings longer than this are replaced by a marker.
pub const STRING_LIMIT: usize = 256 * 1024;
/// Past [`BUDGET`] of output, strings longer than this are replaced.
pub const LATE_STRING_LIMIT: usize = 4 * 1024;
/// Output past which arrays and nested objects keep no more items.
pub const BUDGET: usize = 8 * 1024 * 1024;
/// Input beyond this is not an event nmem keeps: it is dropped and counted.
pub const INPUT_LIMIT: u64 = 256 * 1024 * 1024;
/// Output beyond this (only a top-level object with millions of members gets there) is dropped.
pub const OUTPUT_LIMIT: usize = 32 * 1024 * 1024;
/// Nesting deeper than the parser accepts is malformed.
pub const MAX_DEPTH: usize = 128;

#[derive(Debug)]
pub enum ElideError {
    Io(io::Error),
    /// More than [`INPUT_LIMIT`] bytes.
    TooLarge(u64),
    /// Still more than [`OUTPUT_LIMIT`] bytes once elided.
    TooLargeElided(u64),
    /// Not JSON: what and where.
    Malformed(String),
}

/// Whether `b` may appear in JSON outside a string.
fn json_byte(b: u8) -> bool {
    matches!(
        b,
        b' ' | b'\t' | b'\n' | b'\r' | b':' | b',' | b'{' | b'}' | b'[' | b']' | b'"' | b'0'
            ..=b'9'
                | b'-'
                | b'+'
                | b'.'
                | b'e'
                | b'E'
                | b't'
                | b'r'
                | b'u'
                | b'f'
                | b'a'
                | b'l'
                | b's'
                | b'n'
    )
}

/// Where a payload read so far stands: complete, still open, or not JSON.
#[derive(Debug, Default)]
pub struct Scan {
    depth: usize,
    in_str: bool,
    escaped: bool,
    started: bool,
    pos: u64,
    /// The top-level object or array has closed.
    pub done: bool,
    /// Why this cannot be JSON.
    pub bad: Option<String>,
}

impl Scan {
    /// Follow `bytes`; true once reading can stop (the value is complete, or cannot be JSON).
    pub fn feed(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            if self.in_str {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_str = false;
                } else if b < 0x20 {
                    self.bad = Some(format!(
                        "control byte 0x{b:02x} inside a string at offset {}",
                        self.pos
                    ));
                    return true;
                }
            } else if !json_byte(b) {
                self.bad = Some(format!("byte 0x{b:02x} at offset {} is not JSON", self.pos));
                return true;
            } else {
                match b {
                    b'"' => self.in_str = true,
                    b'{' | b'[' => {
                        self.depth += 1;
                        self.started = true;
                    }
                    b'}' | b']' => {
                        self.depth = self.depth.saturating_sub(1);
                        if self.started && self.depth == 0 {
                            self.done = true;
                            return true;
                        }
                    }
                    _ => {}
                }
            }
            self.pos += 1;
        }
        false
    }
}

enum State {
    Normal,
    Str {
        escaped: bool,
        buf: Vec<u8>,
        hasher: Option<(Sha256, u64)>,
        limit: usize,
    },
    /// Skipping the rest of a container's items (past the budget).
    Skip {
        depth: usize,
        in_str: bool,
        escaped: bool,
        hasher: Sha256,
        bytes: u64,
        items: u64,
    },
}

pub struct Elider {
    state: State,
    out: Vec<u8>,
    seen: u64,
    /// Open containers: true for an array.
    stack: Vec<bool>,
    started: bool,
    complete: bool,
}

impl Default for Elider {
    fn default() -> Self {
        Elider {
            state: State::Normal,
            out: Vec::new(),
            seen: 0,
            stack: Vec::new(),
            started: false,
            complete: false,
        }
    }
}

fn malformed<T>(m: String) -> Result<T, ElideError> {
    Err(ElideError::Malformed(m))
}

impl Elider {
    /// The top-level value has closed: nothing more needs reading.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    pub fn feed(&mut self, mut input: &[u8]) -> Result<(), ElideError> {
        self.seen += input.len() as u64;
        if self.seen > INPUT_LIMIT {
            return Err(ElideError::TooLarge(self.seen));
        }
        let end_of_chunk = self.seen;
        while !input.is_empty() {
            let at = end_of_chunk - input.len() as u64;
            match &mut self.state {
                State::Normal => {
                    let b = input[0];
                    input = &input[1..];
                    if !json_byte(b) {
                        return malformed(format!("byte 0x{b:02x} at offset {at} is not JSON"));
                    }
                    if self.complete && !b.is_ascii_whitespace() {
                        return malformed(format!("data after the JSON value at offset {at}"));
                    }
                    match b {
                        b'"' => {
                            self.state = State::Str {
                                escaped: false,
                                buf: Vec::new(),
                                hasher: None,
                                limit: if self.out.len() > BUDGET {
                                    LATE_STRING_LIMIT
                                } else {
                                    STRING_LIMIT
                                },
                            };
                        }
                        b'[' | b'{' => {
                            if self.stack.len() >= MAX_DEPTH {
                                return malformed(format!(
                                    "nested deeper than {MAX_DEPTH} levels at offset {at}"
                                ));
                            }
                            self.stack.push(b == b'[');
                            self.started = true;
                            self.out.push(b);
                        }
                        b']' | b'}' => {
                            self.stack.pop();
                            self.complete = self.started && self.stack.is_empty();
                            self.out.push(b);
                        }
                        b',' if self.out.len() > BUDGET
                            && match self.stack.last() {
                                Some(&array) => array || self.stack.len() >= 2,
                                None => false,
                            } =>
                        {
                            let mut hasher = Sha256::new();
                            hasher.update(b",");
                            self.state = State::Skip {
                                depth: 0,
                                in_str: false,
                                escaped: false,
                                hasher,
                                bytes: 1,
                                items: 1,
                            };
                        }
                        // Whitespace runs become one space: a pretty-printed document
                        // shrinks, and blanks alone can never fill the output.
                        b' ' | b'\t' | b'\n' | b'\r' => {
                            if !self.out.last().is_some_and(u8::is_ascii_whitespace) {
                                self.out.push(b' ');
                            }
                        }
                        _ => self.out.push(b),
                    }
                }
                State::Skip {
                    depth,
                    in_str,
                    escaped,
                    hasher,
                    bytes,
                    items,
                } => {
                    let mut i = 0;
                    let mut closed = false;
                    while i < input.len() {
                        let b = input[i];
                        if *in_str {
                            if *escaped {
                                *escaped = false;
                            } else if b == b'\\' {
                                *escaped = true;
                            } else if b == b'"' {
                                *in_str = false;
                            } else if b < 0x20 {
                                return malformed(format!(
                                    "control byte 0x{b:02x} inside a string at offset {}",
                                    at + i as u64
                                ));
                            }
                        } else if !json_byte(b) {
                            return malformed(format!(
                                "byte 0x{b:02x} at offset {} is not JSON",
                                at + i as u64
                            ));
                        } else {
                            match b {
                                b'"' => *in_str = true,
                                b'[' | b'{' => {
                                    *depth += 1;
                                    if self.stack.len() + *depth > MAX_DEPTH {
                                        return malformed(format!(
                                            "nested deeper than {MAX_DEPTH} levels at offset {}",
                                            at + i as u64
                                        ));
                                    }
                                }
                                b']' | b'}' if *depth == 0 => {
                                    closed = true;
                                    break;
                                }
                                b']' | b'}' => *depth -= 1,
                                b',' if *depth == 0 => *items += 1,
                                _ => {}
                            }
                        }
                        i += 1;
                    }
                    hasher.update(&input[..i]);
                    *bytes += i as u64;
                    if !closed {
                        input = &[];
                        continue;
                    }
                    let close = input[i];
                    input = &input[i + 1..];
                    let hex = hex(std::mem::take(hasher).finalize().as_slice());
                    let marker = if self.stack.pop().unwrap_or(true) {
                        format!(
                            ",\"[nmem: elided {items} more items, {bytes} bytes, sha256 {hex}]\""
                        )
                    } else {
                        format!(",\"nmem_elided\":\"[nmem: elided {items} more members, {bytes} bytes, sha256 {hex}]\"")
                    };
                    self.out.extend_from_slice(marker.as_bytes());
                    self.out.push(close);
                    self.complete = self.stack.is_empty();
                    self.state = State::Normal;
                }
                State::Str {
                    escaped,
                    buf,
                    hasher,
                    limit,
                } => {
                    // The run up to the next quote or backslash is plain string content.
                    let mut i = 0;
                    if *escaped {
                        *escaped = false;
                        i = 1;
                    }
                    let run_end = i + input[i..]
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\')
                        .unwrap_or(input.len() - i);
                    let (content, rest) = input.split_at(run_end);
                    if let Some(p) = content.iter().position(|&b| b < 0x20) {
                        return malformed(format!(
                            "control byte 0x{:02x} inside a string at offset {}",
                            content[p],
                            at + p as u64
                        ));
                    }
                    push(buf, hasher, content, *limit);
                    input = rest;
                    match input.first() {
                        Some(b'\\') => {
                            push(buf, hasher, b"\\", *limit);
                            *escaped = true;
                            input = &input[1..];
                        }
                        Some(b'"') => {
                            input = &input[1..];
                            match hasher.take() {
                                None => {
                                    self.out.push(b'"');
                                    self.out.extend_from_slice(buf);
                                    self.out.push(b'"');
                                }
                                Some((h, n)) => {
                                    let hex = hex(h.finalize().as_slice());
                                    self.out.extend_from_slice(
                                        format!("\"[nmem: elided {n} bytes, sha256 {hex}]\"")
                                            .as_bytes(),
                                    );
                                }
                            }
                            self.state = State::Normal;
                        }
                        _ => {}
                    }
                }
            }
            if self.out.len() > OUTPUT_LIMIT {
                return Err(ElideError::TooLargeElided(self.seen));
            }
        }
        Ok(())
    }

    /// The elided document. An unterminated string is passed on as is (validation rejects it).
    pub fn finish(mut self) -> Vec<u8> {
        if let State::Str { buf, .. } = &self.state {
            self.out.push(b'"');
            let buf = buf.clone();
            self.out.extend_from_slice(&buf);
        }
        self.out
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn push(buf: &mut Vec<u8>, hasher: &mut Option<(Sha256, u64)>, bytes: &[u8], limit: usize) {
    match hasher {
        Some((h, n)) => {
            h.update(bytes);
            *n += bytes.len() as u64;
        }
        None => {
            buf.extend_from_slice(bytes);
            if buf.len() > limit {
                let mut h = Sha256::new();
                h.update(&buf[..]);
                *hasher = Some((h, buf.len() as u64));
                *buf = Vec::new();
            }
        }
    }
}

/// Elide `head` (already read) followed by the rest of `reader`, which is read only until the
/// top-level value is complete.
pub fn elide_stream(head: &[u8], reader: &mut impl Read) -> Result<Vec<u8>, ElideError> {
    let mut e = Elider::default();
    e.feed(head)?;
    let mut chunk = vec![0u8; 256 * 1024];
    while !e.is_complete() {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(ElideError::Io(err)),
        };
        e.feed(&chunk[..n])?;
    }
    Ok(e.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run(input: &[u8], split: usize) -> Vec<u8> {
        let mut e = Elider::default();
        for part in input.chunks(split.max(1)) {
            e.feed(part).unwrap();
        }
        e.finish()
    }

    #[test]
    fn short_strings_pass_through_whatever_the_chunking() {
        let doc = br#"{"a":"x\"y\\","b":[1,"z"],"c":"\\\""}"#;
        for split in [1, 2, 3, 7, 100] {
            assert_eq!(run(doc, split), doc.to_vec(), "split {split}");
        }
        assert_eq!(
            run(b"{\n  \"a\" :\t[ 1 ]\n}\n", 3),
            b"{ \"a\" : [ 1 ] } ".to_vec()
        );
    }

    #[test]
    fn long_strings_become_markers() {
        let body = "ab\\\"c".repeat(STRING_LIMIT / 4);
        let doc = format!(r#"{{"session_id":"s","content":"{body}","tail":"ok"}}"#);
        for split in [1000, 4096, 65536] {
            let out = String::from_utf8(run(doc.as_bytes(), split)).unwrap();
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let marker = v["content"].as_str().unwrap();
            assert!(
                marker.starts_with(&format!("[nmem: elided {} bytes, sha256 ", body.len())),
                "{marker}"
            );
            assert_eq!(v["tail"], "ok");
            assert_eq!(v["session_id"], "s");
        }
    }

    /// A Glob result of 500,000 names (about 40 MB) keeps its envelope and a bounded share of
    /// the names, with a marker saying how many more there were.
    #[test]
    fn long_arrays_keep_their_head_and_a_marker() {
        let names: Vec<String> = (0..500_000)
            .map(|i| {
                format!(
                    "/home/dev/shop/node_modules/@acme/package-{}/dist/esm/components/module-{i:06}.js",
                    i % 977
                )
            })
            .collect();
        let doc = serde_json::json!({
            "session_id": "s", "hook_event_name": "PostToolUse", "tool_name": "Glob",
            "tool_response": {"filenames": names, "numFiles": 500_000, "truncated": false},
            "cwd": "/home/dev/shop",
        })
        .to_string();
        assert!(doc.len() > 39 * 1024 * 1024, "{} bytes", doc.len());
        let out = run(doc.as_bytes(), 256 * 1024);
        assert!(out.len() < BUDGET + 1024 * 1024, "{} bytes", out.len());
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["cwd"], "/home/dev/shop", "top-level members are all kept");
        assert_eq!(v["tool_name"], "Glob");
        let kept = v["tool_response"]["filenames"].as_array().unwrap();
        let marker = kept.last().unwrap().as_str().unwrap();
        let more: usize = marker
            .strip_prefix("[nmem: elided ")
            .and_then(|m| m.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{marker}"));
        assert_eq!(
            kept.len() - 1 + more,
            500_000,
            "every name is kept or counted"
        );
        // Members after the array, past the budget, are summarised in nested objects.
        assert!(v["tool_response"]["nmem_elided"]
            .as_str()
            .unwrap()
            .contains("more members"));
    }

    #[test]
    fn what_is_not_json_is_refused_at_once_and_says_why() {
        let mut e = Elider::default();
        match e.feed(&[0u8; 4096]) {
            Err(ElideError::Malformed(m)) => assert!(m.contains("0x00 at offset 0"), "{m}"),
            other => panic!("{other:?}"),
        }
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(matches!(
            Elider::default().feed(deep.as_bytes()),
            Err(ElideError::Malformed(m)) if m.contains("nested")
        ));
        assert!(matches!(
            Elider::default().feed(b"{\"a\":1} {\"b\":2}"),
            Err(ElideError::Malformed(m)) if m.contains("after the JSON value")
        ));
    }

    #[test]
    fn input_cap() {
        let mut e = Elider::default();
        let chunk = vec![b' '; 1 << 20];
        let mut res = Ok(());
        for _ in 0..=256 {
            res = e.feed(&chunk);
            if res.is_err() {
                break;
            }
        }
        assert!(matches!(res, Err(ElideError::TooLarge(_))));
    }

    #[test]
    fn the_scan_stops_at_the_end_of_the_value() {
        let mut s = Scan::default();
        assert!(!s.feed(br#"{"a":"}\"{","b":[1,{"#));
        assert!(s.feed(br#"}]} trailing"#));
        assert!(s.done && s.bad.is_none());
        let mut z = Scan::default();
        assert!(z.feed(&[0; 10]));
        assert!(z.bad.unwrap().contains("offset 0"));
    }

    proptest! {
        #[test]
        fn any_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000), split in 1usize..64) {
            let mut e = Elider::default();
            for part in bytes.chunks(split) {
                if e.feed(part).is_err() { break; }
            }
            let _ = e.finish();
            let mut s = Scan::default();
            let _ = s.feed(&bytes);
        }

        /// Valid JSON stays valid JSON (and whole, when small).
        #[test]
        fn valid_json_stays_valid(v in arb_json(), split in 1usize..64) {
            let doc = serde_json::to_vec(&v).unwrap();
            let out = run(&doc, split);
            let back: serde_json::Value = serde_json::from_slice(&out).unwrap();
            prop_assert_eq!(back, v);
        }
    }

    fn arb_json() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "\\PC{0,20}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                proptest::collection::btree_map("\\PC{0,8}", inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }
}
