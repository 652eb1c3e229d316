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
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path};
use std::sync::{Arc, Mutex};
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

/// How long what a drainer learnt about a session's transcript (its open descriptor, or that
/// there is nothing to read) lets later events of the session be prepared on their worker:
/// after it, the next event goes to a drainer again, which opens the path anew (a transcript
/// replaced under the same name is seen then).
pub const WATCH_FOR: Duration = Duration::from_millis(250);
/// The most an async worker reads of a transcript for one event; more growth goes to a drainer.
pub const READ_HERE: u64 = 64 * 1024;
/// The most sessions whose transcript is watched at once (each an open descriptor at most,
/// counted in the connections' descriptor reserve, `conn::FD_RESERVE`).
pub const WATCHED: usize = 32;

/// Per-session read offsets, cached in memory; the database keeps the committed ones. And, for
/// the sessions of the last [`WATCH_FOR`] (at most [`WATCHED`]), what their transcript is, so that their next events
/// read its growth without opening anything (see [`Tailer::here`]).
#[derive(Default)]
pub struct Tailer {
    offsets: Mutex<HashMap<String, u64>>,
    watched: Mutex<HashMap<String, Watch>>,
    /// [`WATCH_FOR`], or what a test sets.
    watch_for: Option<Duration>,
}

/// What a drainer found at a session's transcript path.
struct Watch {
    path: String,
    seen: Instant,
    file: Option<Arc<std::fs::File>>,
}

/// What an async worker may read of a session's transcript without opening anything, from
/// [`Tailer::here`]; [`Tailer::tail_here`] reads it.
#[derive(Debug, Clone)]
pub enum Here {
    /// Missing, or not a regular file of the user's: nothing to read.
    Nothing,
    /// The transcript's descriptor, on a local file system.
    Open(Arc<std::fs::File>),
}

impl Tailer {
    /// A tailer whose drainers' findings hold for `d` instead of [`WATCH_FOR`] (tests).
    #[cfg(test)]
    pub fn watching_for(d: Duration) -> Tailer {
        Tailer {
            watch_for: Some(d),
            ..Tailer::default()
        }
    }

    /// Read what `path` gained since `session`'s last offset. `stored` gives the committed offset
    /// the first time a session is seen. Opens the path: on a blocking thread only.
    pub fn tail(
        &self,
        session: &str,
        path: &str,
        max_chars: usize,
        stored: impl FnOnce() -> u64,
    ) -> Tail {
        let Some(safe) = safe_transcript_path(path) else {
            return Tail::default();
        };
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nmem_proto::paths::NOFOLLOW_FLAGS)
            .open(safe)
        {
            Ok(f) => f,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::NotFound {
                    self.watch(session, path, None);
                }
                return Tail::default();
            }
        };
        let Ok(meta) = file.metadata() else {
            return Tail::default();
        };
        // Only the user's own regular files.
        if !meta.is_file() || meta.uid() != unsafe { libc::geteuid() } {
            self.watch(session, path, None);
            return Tail::default();
        }
        // The committed offset is a database read: only for a transcript there is to read (a
        // missing one, every event of a harness or test that names none on disk, read it on every
        // event: 12% of the daemon's CPU under sustained ingest, measured with perf).
        let cached = self.offsets.lock().unwrap().get(session).copied();
        let start = cached.unwrap_or_else(stored);
        let tail = self.read(
            session,
            &file,
            meta.len(),
            (start, cached.is_some()),
            MAX_READ,
            max_chars,
        );
        if on_local_disk(&file) {
            // The offset the next event reads from, committed or just read; then the descriptor.
            self.offsets
                .lock()
                .unwrap()
                .entry(session.to_string())
                .or_insert(start);
            self.watch(session, path, Some(file));
        }
        tail
    }

    /// Whether `session`'s next read of `path` needs no file opened, and so may run on an async
    /// worker: a drainer looked at the path less than [`WATCH_FOR`] ago and found nothing to
    /// read, or a regular file on a local file system that has grown by at most [`READ_HERE`]
    /// since (one `fstat` of the open descriptor). `None`: a drainer reads it.
    pub fn here(&self, session: &str, path: &str) -> Option<Here> {
        let file = {
            let w = self.watched.lock().unwrap();
            let watch = w.get(session)?;
            if watch.path != path || watch.seen.elapsed() >= self.watch_for.unwrap_or(WATCH_FOR) {
                return None;
            }
            match &watch.file {
                None => return Some(Here::Nothing),
                Some(f) => f.clone(),
            }
        };
        let start = *self.offsets.lock().unwrap().get(session)?;
        let len = file.metadata().ok()?.len();
        (len >= start && len - start <= READ_HERE).then_some(Here::Open(file))
    }

    /// Read `session`'s transcript through what [`Tailer::here`] gave: no file is opened, and at
    /// most [`READ_HERE`] bytes are read (what grew beyond waits for the next event).
    pub fn tail_here(&self, session: &str, here: &Here, max_chars: usize) -> Tail {
        let Here::Open(file) = here else {
            return Tail::default();
        };
        // `here` found the offset; a failed commit since forgot it: read again on a drainer.
        let Some(start) = self.offsets.lock().unwrap().get(session).copied() else {
            return Tail::default();
        };
        match file.metadata() {
            Ok(meta) => self.read(
                session,
                file,
                meta.len(),
                (start, true),
                READ_HERE,
                max_chars,
            ),
            Err(_) => Tail::default(),
        }
    }

    /// What `file` (`len` bytes long) holds from `start`, at most `max_read` bytes of it.
    /// `from`: the offset read from, and whether it came from the cache (else the database).
    fn read(
        &self,
        session: &str,
        file: &std::fs::File,
        len: u64,
        from: (u64, bool),
        max_read: u64,
        max_chars: usize,
    ) -> Tail {
        let start = from.0;
        // A transcript that shrank was replaced: start over from its beginning.
        let start = if len < start { 0 } else { start };
        if len == start {
            return Tail {
                thoughts: Vec::new(),
                offset: None,
            };
        }
        let want = (len - start).min(max_read);
        let Some(buf) = read_bounded(file, start, want, READ_BUDGET) else {
            return Tail::default();
        };
        let Some(last_nl) = buf.iter().rposition(|&b| b == b'\n') else {
            // No complete line yet. A single line over MAX_READ is skipped whole.
            return if buf.len() as u64 == MAX_READ {
                self.advance(session, from, start + want)
            } else {
                Tail::default()
            };
        };
        let mut thoughts = Vec::new();
        for line in buf[..last_nl].split(|&b| b == b'\n') {
            thoughts.extend(thoughts_of(line, session, max_chars));
        }
        let mut tail = self.advance(session, from, start + last_nl as u64 + 1);
        tail.thoughts = thoughts;
        tail
    }

    /// Remember what a drainer found at `session`'s transcript `path` (`None`: nothing to read).
    fn watch(&self, session: &str, path: &str, file: Option<std::fs::File>) {
        let watch_for = self.watch_for.unwrap_or(WATCH_FOR);
        let mut gone = Vec::new();
        {
            let mut w = self.watched.lock().unwrap();
            // Sessions quiet for longer than the watch are forgotten with their descriptors.
            w.retain(|_, v| {
                let keep = v.seen.elapsed() < watch_for;
                if !keep {
                    gone.push(v.file.take());
                }
                keep
            });
            if w.len() >= WATCHED && !w.contains_key(session) {
                gone.extend(w.drain().map(|(_, v)| v.file));
            }
            let old = w.insert(
                session.to_string(),
                Watch {
                    path: path.to_string(),
                    seen: Instant::now(),
                    file: file.map(Arc::new),
                },
            );
            gone.extend(old.map(|v| v.file));
        }
        // Closed with the lock released: a worker's `here` never waits on a close.
        drop(gone);
    }

    /// Move `session`'s offset to `offset`, read from `from` (the offset, and whether it came
    /// from the cache): only if the cache still holds what was read from (or, read from the
    /// database, still holds nothing). Two events of a session prepared at once (one on a
    /// worker, one on a drainer) then never move it back, and a read that began before a failed
    /// commit made the cache forget never puts back an offset past thinking not stored.
    fn advance(&self, session: &str, from: (u64, bool), offset: u64) -> Tail {
        let mut offsets = self.offsets.lock().unwrap();
        let current = offsets.get(session).copied();
        let unchanged = match from {
            (start, true) => current == Some(start),
            (_, false) => current.is_none(),
        };
        if unchanged {
            offsets.insert(session.to_string(), offset);
        }
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

/// Up to `want` bytes from `start`, in chunks, stopping early when `budget` is spent (what was
/// read is kept: only its whole lines are used). `None` on a read error. Positioned reads, so
/// one descriptor serves concurrent events of a session.
fn read_bounded(file: &std::fs::File, start: u64, want: u64, budget: Duration) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let started = Instant::now();
    let mut buf = vec![0u8; want as usize];
    let mut got = 0;
    while got < buf.len() && started.elapsed() < budget {
        let end = (got + 256 * 1024).min(buf.len());
        match file.read_at(&mut buf[got..end], start + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(got);
    Some(buf)
}

/// Whether `file` is on a file system of this machine's own disks or memory, where `fstat` and
/// a read of what was just appended wait for no network: ext4, XFS, Btrfs, F2FS, bcachefs, ZFS,
/// tmpfs and overlayfs by `fstatfs`'s magic number on Linux, `MNT_LOCAL` on macOS. A network or
/// FUSE file system (NFS, SMB, sshfs), or one not known here, is read on a drainer only.
#[cfg(any(target_os = "linux", target_os = "macos"))]
pub(crate) fn on_local_disk(file: &std::fs::File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed statfs, filled by the kernel for a descriptor we own.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    local_file_system(&st)
}

#[cfg(target_os = "linux")]
fn local_file_system(st: &libc::statfs) -> bool {
    const LOCAL: [u32; 8] = [
        0xEF53,      // ext2/3/4
        0x5846_5342, // XFS
        0x9123_683E, // Btrfs
        0xF2F5_2010, // F2FS
        0xCA45_1A4E, // bcachefs
        0x2FC1_2FC1, // ZFS
        0x0102_1994, // tmpfs
        0x794C_7630, // overlayfs
    ];
    LOCAL.contains(&(st.f_type as u32))
}

#[cfg(target_os = "macos")]
fn local_file_system(st: &libc::statfs) -> bool {
    st.f_flags & libc::MNT_LOCAL as u32 != 0
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
pub(crate) fn on_local_disk(_: &std::fs::File) -> bool {
    false
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

    fn thought_line(id: &str, text: &str) -> String {
        format!(
            "{{\"type\":\"assistant\",\"uuid\":\"u-{id}\",\"timestamp\":\"2026-08-20T09:14:07.630Z\",\"message\":{{\"id\":\"{id}\",\"content\":[{{\"type\":\"thinking\",\"thinking\":\"{text}\"}}]}}}}\n"
        )
    }

    fn contents(t: &Tail) -> Vec<&str> {
        t.thoughts.iter().map(|t| t.content.as_str()).collect()
    }

    /// After a drainer has opened a session's transcript, its next events read the growth
    /// through that descriptor, opening nothing, until the watch ends, the growth is large, the
    /// path differs or the offset was forgotten: then a drainer reads again.
    #[test]
    fn a_drainers_look_lets_the_next_events_read_here() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        let p = path.to_str().unwrap();
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(thought_line("m1", "first").as_bytes()).unwrap();
        if !on_local_disk(&f) {
            eprintln!("skipped: the temporary folder is not on a local file system, where only drainers read transcripts");
            return;
        }
        let t = Tailer::watching_for(Duration::from_secs(3600));
        assert!(
            t.here("s", p).is_none(),
            "nothing is known before a drainer looks"
        );
        assert_eq!(contents(&t.tail("s", p, 100, || 0)), ["first"]);
        let here = t.here("s", p).expect("the drainer's descriptor");
        assert!(matches!(here, Here::Open(_)));
        f.write_all(thought_line("m2", "second").as_bytes())
            .unwrap();
        let b = t.tail_here("s", &here, 100);
        assert_eq!(contents(&b), ["second"]);
        assert_eq!(b.offset, Some(std::fs::metadata(&path).unwrap().len()));
        assert!(
            t.tail_here("s", &here, 100).thoughts.is_empty(),
            "nothing twice"
        );
        // Another path for the session, or another session: a drainer opens it.
        assert!(t.here("s", "/elsewhere/s.jsonl").is_none());
        assert!(t.here("other", p).is_none());
        // More growth than a worker reads: a drainer reads it, and the watch goes on after.
        let long = "x".repeat(READ_HERE as usize);
        f.write_all(thought_line("m3", &long).as_bytes()).unwrap();
        assert!(t.here("s", p).is_none());
        assert_eq!(t.tail("s", p, 5, || 0).thoughts.len(), 1);
        let here = t.here("s", p).expect("watched again");
        // A failed commit forgets the offset: the database's is read again, on a drainer.
        t.forget("s");
        assert!(t.here("s", p).is_none());
        assert_eq!(t.tail_here("s", &here, 100), Tail::default());
        // The watch ends: a drainer looks again.
        let brief = Tailer::watching_for(Duration::ZERO);
        brief.tail("s", p, 100, || 0);
        assert!(brief.here("s", p).is_none());
    }

    /// A missing transcript, or anything but a regular file, is nothing to read for the watch:
    /// the worker reads nothing and opens nothing.
    #[test]
    fn nothing_to_read_is_remembered_for_the_watch() {
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("fifo.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let missing = tmp.path().join("missing.jsonl");
        let t = Tailer::watching_for(Duration::from_secs(3600));
        for p in [&fifo, &missing] {
            let p = p.to_str().unwrap();
            assert_eq!(t.tail("s", p, 100, || 0), Tail::default());
            let here = t.here("s", p).expect("remembered");
            assert!(matches!(here, Here::Nothing), "{p}");
            assert_eq!(t.tail_here("s", &here, 100), Tail::default());
        }
        // The file appears: the worker still reads nothing until the watch ends, then a drainer
        // finds it.
        std::fs::write(&missing, thought_line("m1", "late")).unwrap();
        let m = missing.to_str().unwrap();
        let here = t.here("s", m).expect("still watched");
        assert_eq!(t.tail_here("s", &here, 100), Tail::default());
        let brief = Tailer::watching_for(Duration::ZERO);
        assert_eq!(contents(&brief.tail("s", m, 100, || 0)), ["late"]);
    }

    /// However many sessions name transcripts, at most [`WATCHED`] are remembered (each may hold
    /// a descriptor).
    #[test]
    fn the_watched_sessions_are_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s.jsonl");
        std::fs::write(&path, thought_line("m1", "one")).unwrap();
        let p = path.to_str().unwrap();
        let t = Tailer::watching_for(Duration::from_secs(3600));
        for i in 0..WATCHED * 3 {
            t.tail(&format!("s{i}"), p, 100, || 0);
            assert!(t.watched.lock().unwrap().len() <= WATCHED);
        }
        assert!(t.here(&format!("s{}", WATCHED * 3 - 1), p).is_some());
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
