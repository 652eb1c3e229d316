//! Agent reasoning: thinking blocks tailed from Claude Code's transcript.
//!
//! Each event that names a `transcript_path` reads what was appended since the last read (by byte
//! offset, never from the start again) and keeps the `thinking` blocks as prompts with source
//! `agent`, so the tool calls that follow link to the reasoning behind them. Only whole lines are
//! consumed: a half-written last line waits for the next event. A missing or unreadable file is
//! fine: there is simply nothing to add. Each block is identified by its message id and position,
//! so reading a part twice stores nothing twice.

use super::text::truncate;
use serde_json::Value;
use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The most read from a transcript for one event; the rest waits for the next one.
pub const MAX_READ: u64 = 4 * 1024 * 1024;
/// The most time one event spends reading its transcript; the rest waits for the next one.
pub const READ_BUDGET: Duration = Duration::from_millis(500);

#[derive(Debug, Clone, PartialEq)]
pub struct Thought {
    /// `t:<message id>:<block index>`: unique, so a re-read is harmless.
    pub uid: String,
    pub timestamp: i64,
    pub content: String,
}

/// What one tail read found, and the offset to store once it is committed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Tail {
    pub thoughts: Vec<Thought>,
    pub offset: Option<u64>,
}

/// Per-session read offsets, cached in memory; the database keeps the committed ones.
#[derive(Default)]
pub struct Tailer {
    offsets: Mutex<HashMap<String, u64>>,
}

impl Tailer {
    /// Read what `path` gained since `session`'s last offset. `stored` gives the committed offset
    /// the first time a session is seen.
    pub fn tail(
        &self,
        session: &str,
        path: &str,
        max_chars: usize,
        stored: impl FnOnce() -> u64,
    ) -> Tail {
        let Some(path) = safe_transcript_path(path) else {
            return Tail::default();
        };
        let Ok(mut file) = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nmem_proto::paths::NOFOLLOW_FLAGS)
            .open(path)
        else {
            return Tail::default();
        };
        let Ok(meta) = file.metadata() else {
            return Tail::default();
        };
        // Only the user's own regular files.
        if !meta.is_file() || meta.uid() != unsafe { libc::geteuid() } {
            return Tail::default();
        }
        // The committed offset is a database read: only for a transcript there is to read (a
        // missing one, every event of a harness or test that names none on disk, read it on every
        // event: 12% of the daemon's CPU under sustained ingest, measured with perf).
        let start = {
            let cached = self.offsets.lock().unwrap().get(session).copied();
            cached.unwrap_or_else(stored)
        };
        let len = meta.len();
        // A transcript that shrank was replaced: start over from its beginning.
        let start = if len < start { 0 } else { start };
        if len == start {
            return Tail {
                thoughts: Vec::new(),
                offset: None,
            };
        }
        let want = (len - start).min(MAX_READ);
        if file.seek(SeekFrom::Start(start)).is_err() {
            return Tail::default();
        }
        let Some(buf) = read_bounded(&mut file, want, READ_BUDGET) else {
            return Tail::default();
        };
        let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
            // No complete line yet. A single line over MAX_READ is skipped whole.
            return if buf.len() as u64 == MAX_READ {
                self.advance(session, start + want)
            } else {
                Tail::default()
            };
        };
        let mut thoughts = Vec::new();
        for line in buf[..last_nl].split(|&b| b == b'\n') {
            thoughts.extend(thoughts_of(line, session, max_chars));
        }
        let mut tail = self.advance(session, start + last_nl as u64 + 1);
        tail.thoughts = thoughts;
        tail
    }

    fn advance(&self, session: &str, offset: u64) -> Tail {
        self.offsets
            .lock()
            .unwrap()
            .insert(session.to_string(), offset);
        Tail {
            thoughts: Vec::new(),
            offset: Some(offset),
        }
    }

    /// Forget a session's cached offset (its commit failed: reload it from the database).
    pub fn forget(&self, session: &str) {
        self.offsets.lock().unwrap().remove(session);
    }
}

/// Up to `want` bytes, in chunks, stopping early when `budget` is spent (what was read is kept:
/// only its whole lines are used). `None` on a read error.
fn read_bounded(file: &mut std::fs::File, want: u64, budget: Duration) -> Option<Vec<u8>> {
    let started = Instant::now();
    let mut buf = vec![0u8; want as usize];
    let mut got = 0;
    while got < buf.len() && started.elapsed() < budget {
        let end = (got + 256 * 1024).min(buf.len());
        match file.read(&mut buf[got..end]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(got);
    Some(buf)
}

/// A transcript path from a payload is used only if it is absolute, has no `..`, and names a
/// `.jsonl` file.
pub(crate) fn safe_transcript_path(p: &str) -> Option<&Path> {
    let path = Path::new(p);
    let ok = path.is_absolute()
        && path.extension().is_some_and(|e| e == "jsonl")
        && path
            .components()
            .all(|c| !matches!(c, Component::ParentDir));
    ok.then_some(path)
}

/// The thinking blocks of one transcript line of `session` (a line of another session is not ours).
fn thoughts_of(line: &[u8], session: &str, max_chars: usize) -> Vec<Thought> {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return Vec::new();
    };
    if v.get("type").and_then(Value::as_str) != Some("assistant") {
        return Vec::new();
    }
    if v.get("sessionId")
        .and_then(Value::as_str)
        .is_some_and(|s| s != session)
    {
        return Vec::new();
    }
    let Some(msg) = v.get("message") else {
        return Vec::new();
    };
    let id = msg
        .get("id")
        .and_then(Value::as_str)
        .or_else(|| v.get("uuid").and_then(Value::as_str))
        .unwrap_or("");
    let t = v
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(nmem_proto::time::parse_rfc3339_ms)
        .unwrap_or(0);
    let Some(blocks) = msg.get("content").and_then(Value::as_array) else {
        return Vec::new();
    };
    blocks
        .iter()
        .enumerate()
        .filter(|(_, b)| b.get("type").and_then(Value::as_str) == Some("thinking"))
        .filter_map(|(i, b)| {
            let text = b.get("thinking").and_then(Value::as_str)?.trim();
            // One block per line in current transcripts: the line's uuid tells blocks apart.
            let uid = match v.get("uuid").and_then(Value::as_str) {
                Some(u) => format!("t:{id}:{u}:{i}"),
                None => format!("t:{id}:{i}"),
            };
            (!text.is_empty()).then(|| Thought {
                uid,
                timestamp: t,
                content: truncate(text, max_chars),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn tails_by_offset_and_waits_for_whole_lines() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let path = dir.join("s.jsonl");
        let line = |id: &str, text: &str| {
            format!(
                "{{\"type\":\"assistant\",\"uuid\":\"u-{id}\",\"timestamp\":\"2026-08-20T09:14:07.630Z\",\"message\":{{\"id\":\"{id}\",\"content\":[{{\"type\":\"thinking\",\"thinking\":\"{text}\"}}]}}}}\n"
            )
        };
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(line("m1", "first thought").as_bytes()).unwrap();
        f.write_all(b"{\"type\":\"user\",\"message\":{\"content\":\"hi\"}}\n")
            .unwrap();
        f.write_all(&line("m2", "second").as_bytes()[..20]).unwrap(); // half-written
        let t = Tailer::default();
        let p = path.to_str().unwrap();
        let a = t.tail("s", p, 100, || 0);
        assert_eq!(a.thoughts.len(), 1);
        assert_eq!(a.thoughts[0].content, "first thought");
        assert_eq!(a.thoughts[0].timestamp, 1_787_217_247_630);
        f.write_all(&line("m2", "second").as_bytes()[20..]).unwrap();
        let b = t.tail("s", p, 100, || panic!("cached"));
        assert_eq!(
            b.thoughts
                .iter()
                .map(|t| t.content.as_str())
                .collect::<Vec<_>>(),
            ["second"]
        );
        assert_eq!(b.offset, Some(std::fs::metadata(&path).unwrap().len()));
        let c = t.tail("s", p, 100, || 0);
        assert!(c.thoughts.is_empty(), "nothing is read twice");
        // Unsafe or missing paths are simply nothing.
        assert_eq!(t.tail("x", "relative.jsonl", 100, || 0), Tail::default());
        assert_eq!(
            t.tail("x", "/etc/../etc/passwd.jsonl", 100, || 0),
            Tail::default()
        );
        assert_eq!(
            t.tail("x", "/nonexistent/a.jsonl", 100, || 0),
            Tail::default()
        );
        // No transcript to read: the committed offset (a database read) is not looked up.
        assert_eq!(
            t.tail("x", "/nonexistent/a.jsonl", 100, || panic!(
                "offset read for nothing"
            )),
            Tail::default()
        );
        let folder = dir.join("folder.jsonl");
        std::fs::create_dir(&folder).unwrap();
        assert_eq!(
            t.tail("x", folder.to_str().unwrap(), 100, || panic!(
                "offset read for a folder"
            )),
            Tail::default()
        );
    }

    #[test]
    fn never_opens_anything_but_a_regular_file() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let fifo = dir.join("fifo.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let zero = dir.join("zero.jsonl");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let folder = dir.join("folder.jsonl");
        std::fs::create_dir(&folder).unwrap();
        let t = Tailer::default();
        // Each returns at once with nothing (a FIFO with no writer would block a plain open).
        for p in [&fifo, &zero, &folder] {
            assert_eq!(
                t.tail("s", p.to_str().unwrap(), 100, || 0),
                Tail::default(),
                "{}",
                p.display()
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn transcript_lines_never_panic(line in proptest::collection::vec(proptest::num::u8::ANY, 0..512)) {
            let _ = thoughts_of(&line, "s", 50);
        }

        #[test]
        fn json_like_transcript_lines_never_panic(
            ts in "\\PC{0,40}",
            text in "\\PC{0,80}",
            id in "\\PC{0,10}",
        ) {
            let line = serde_json::json!({
                "type": "assistant", "sessionId": "s", "uuid": id, "timestamp": ts,
                "message": {"id": id, "content": [{"type": "thinking", "thinking": text}, 7, null]}
            })
            .to_string();
            let _ = thoughts_of(line.as_bytes(), "s", 5);
        }
    }
}
