//! Streaming elision of long JSON strings, for hook payloads over 1 MiB.
//!
//! The input is copied through except that every string longer than [`STRING_LIMIT`] bytes (as
//! written, escapes included) becomes `"[nmem: elided N bytes, sha256 <hex>]"`. Memory stays
//! bounded: at most one string's worth of bytes is buffered before it is hashed instead. The
//! result is validated afterwards like any payload; this pass only tracks string boundaries.

use sha2::{Digest, Sha256};
use std::io::{self, Read};

/// Strings longer than this are replaced by a marker.
pub const STRING_LIMIT: usize = 256 * 1024;
/// Input beyond this is not an event nmem keeps: it is dropped and counted.
pub const INPUT_LIMIT: u64 = 256 * 1024 * 1024;
/// Output beyond this (many strings just under the limit) is dropped too.
pub const OUTPUT_LIMIT: usize = 32 * 1024 * 1024;

#[derive(Debug)]
pub enum ElideError {
    Io(io::Error),
    TooLarge(u64),
}

enum State {
    Normal,
    Str {
        escaped: bool,
        buf: Vec<u8>,
        hasher: Option<(Sha256, u64)>,
    },
}

pub struct Elider {
    state: State,
    out: Vec<u8>,
    seen: u64,
}

impl Default for Elider {
    fn default() -> Self {
        Elider {
            state: State::Normal,
            out: Vec::new(),
            seen: 0,
        }
    }
}

impl Elider {
    pub fn feed(&mut self, mut input: &[u8]) -> Result<(), ElideError> {
        self.seen += input.len() as u64;
        if self.seen > INPUT_LIMIT {
            return Err(ElideError::TooLarge(self.seen));
        }
        while !input.is_empty() {
            match &mut self.state {
                State::Normal => {
                    let n = input.iter().position(|&b| b == b'"').unwrap_or(input.len());
                    self.out.extend_from_slice(&input[..n]);
                    if n < input.len() {
                        self.state = State::Str {
                            escaped: false,
                            buf: Vec::new(),
                            hasher: None,
                        };
                        input = &input[n + 1..];
                    } else {
                        input = &[];
                    }
                }
                State::Str {
                    escaped,
                    buf,
                    hasher,
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
                    push(buf, hasher, content);
                    input = rest;
                    match input.first() {
                        Some(b'\\') => {
                            push(buf, hasher, b"\\");
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
                                    let hex: String =
                                        h.finalize().iter().map(|b| format!("{b:02x}")).collect();
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
                return Err(ElideError::TooLarge(self.seen));
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

fn push(buf: &mut Vec<u8>, hasher: &mut Option<(Sha256, u64)>, bytes: &[u8]) {
    match hasher {
        Some((h, n)) => {
            h.update(bytes);
            *n += bytes.len() as u64;
        }
        None => {
            buf.extend_from_slice(bytes);
            if buf.len() > STRING_LIMIT {
                let mut h = Sha256::new();
                h.update(&buf[..]);
                *hasher = Some((h, buf.len() as u64));
                *buf = Vec::new();
            }
        }
    }
}

/// Elide `head` (already read) followed by the rest of `reader`.
pub fn elide_stream(head: &[u8], reader: &mut impl Read) -> Result<Vec<u8>, ElideError> {
    let mut e = Elider::default();
    e.feed(head)?;
    let mut chunk = vec![0u8; 256 * 1024];
    loop {
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
}
