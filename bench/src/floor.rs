//! The floor under `nmem record`'s "daemon up" figure: what any daemon on this machine costs the
//! hook, measured with the real hook binary against servers far simpler than `nmemd`.
//!
//! A floor server is one thread, blocking, in this process: it accepts on the home's socket,
//! reads one HTTP request (headers, then `content-length` bytes), and answers `200 {}` with
//! `connection: close`. It has no async runtime, no parsing beyond the headers, no redaction, no
//! extraction. Three kinds ([`KINDS`]):
//!
//! * answering at once: the cost of the exchange itself (connect, one write, the server's
//!   wake-up, one reply, the hook's wake-up);
//! * committing first: the same, after storing the event as one row in a real `nmem.db` (the
//!   schema `nmemd` made, in WAL mode with `synchronous = NORMAL`, as nmemd opens it) with the
//!   writer's three statements for a tool call (the session, the observation, the digest's
//!   counter) in one `BEGIN IMMEDIATE … COMMIT`: acknowledging after a commit, and nothing else;
//! * the same with the commit on a second thread (a writer, as in every single-writer daemon):
//!   one hand-off there and one back, what a pair of thread switches costs on this machine.
//!
//! The difference between `nmemd` and these is what nmemd's own event path adds (its threads,
//! preparation and bookkeeping); the second is the lowest "daemon up" an acknowledgement after a
//! commit allows on this machine with this schema.

use rusqlite::{params, Connection};
use std::io::{Read, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// The floor servers, as the bench prints them: (line, what the server does with an event).
pub const KINDS: [(&str, Kind); 3] = [
    ("floor: server answering at once", Kind::Answer),
    ("floor: server committing the event first", Kind::Commit),
    ("floor: the same, commit on a writer thread", Kind::Handoff),
];

/// What a floor server does with an event before answering.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Nothing.
    Answer,
    /// Stores it on the thread that read it.
    Commit,
    /// Hands it to a writer thread that stores it and hands the result back (the two thread
    /// switches every daemon with a single writer pays at least).
    Handoff,
}

/// A running floor server; [`Floor::stop`] (or dropping it) ends it and removes its socket.
pub struct Floor {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<u64>>>,
}

/// Serve on `socket` until stopped; with a kind that stores, in the `nmem.db` `db`.
pub fn start(socket: &Path, kind: Kind, db: &Path) -> anyhow::Result<Floor> {
    let _ = std::fs::remove_file(socket);
    let listener = UnixListener::bind(socket)?;
    let store = match kind {
        Kind::Answer => Store::Nothing,
        Kind::Commit => Store::Here(open(db)?),
        Kind::Handoff => {
            let c = open(db)?;
            let (tx, rx) =
                std::sync::mpsc::channel::<(Vec<u8>, u64, Sender<rusqlite::Result<()>>)>();
            std::thread::Builder::new()
                .name("floor-writer".into())
                .spawn(move || {
                    for (body, n, done) in rx {
                        let _ = done.send(store(&c, &body, n));
                    }
                })?;
            Store::Writer(tx)
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("floor".into())
        .spawn(move || serve(listener, store, &flag))?;
    Ok(Floor {
        socket: socket.to_path_buf(),
        stop,
        thread: Some(thread),
    })
}

impl Floor {
    /// Stop serving; the events it answered (and stored, for a kind that stores).
    pub fn stop(mut self) -> anyhow::Result<u64> {
        self.halt()
    }

    fn halt(&mut self) -> anyhow::Result<u64> {
        let Some(t) = self.thread.take() else {
            return Ok(0);
        };
        self.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = std::os::unix::net::UnixStream::connect(&self.socket);
        let stored = t
            .join()
            .map_err(|_| anyhow::anyhow!("the floor server panicked"))??;
        let _ = std::fs::remove_file(&self.socket);
        Ok(stored)
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

const REPLY: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}";

/// A floor that did not answer every hook measured something else (hooks that spooled).
pub fn answered(n: u64, runs: usize, what: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        n == runs as u64,
        "{what}: the server answered {n} of {runs} hooks; its figure is not the floor"
    );
    Ok(())
}

fn open(db: &Path) -> rusqlite::Result<Connection> {
    let c = Connection::open(db)?;
    c.pragma_update(None, "journal_mode", "WAL")?;
    c.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")?;
    Ok(c)
}

type Sender<T> = std::sync::mpsc::Sender<T>;

enum Store {
    Nothing,
    Here(Connection),
    Writer(Sender<(Vec<u8>, u64, Sender<rusqlite::Result<()>>)>),
}

fn serve(listener: UnixListener, how: Store, stop: &AtomicBool) -> anyhow::Result<u64> {
    let mut stored = 0u64;
    // Ids unique across the servers one run starts on the same database.
    let base = nmem_proto::now_ms() as u64 * 1_000_000;
    let mut buf = vec![0u8; 1 << 20];
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut s) = stream else { continue };
        let Some((head_end, body_end)) = read_request(&mut s, &mut buf) else {
            continue;
        };
        if buf.starts_with(b"POST") {
            let body = &buf[head_end..body_end];
            match &how {
                Store::Nothing => {}
                Store::Here(c) => store(c, body, base + stored)?,
                Store::Writer(tx) => {
                    let (done, wait) = std::sync::mpsc::channel();
                    tx.send((body.to_vec(), base + stored, done))?;
                    wait.recv()??;
                }
            }
            stored += 1;
        }
        let _ = s.write_all(REPLY);
    }
    Ok(stored)
}

/// Read one request into `buf`: (end of the headers, end of the body), or None if the client
/// went away first.
fn read_request(s: &mut impl Read, buf: &mut [u8]) -> Option<(usize, usize)> {
    let mut got = 0;
    let mut head_end = None;
    let mut need = usize::MAX;
    loop {
        if got == buf.len() {
            return None;
        }
        let n = s.read(&mut buf[got..]).ok()?;
        if n == 0 {
            return None;
        }
        got += n;
        if head_end.is_none() {
            if let Some(i) = buf[..got].windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                head_end = Some(i + 4);
                need = i + 4 + len;
            }
        }
        if got >= need {
            return Some((head_end?, need));
        }
    }
}

/// The writer's statements for one tool call, in one transaction (the observation's content is
/// the payload itself, cut to 1 KB: about what a Bash call's condensed output stores).
fn store(c: &Connection, body: &[u8], n: u64) -> rusqlite::Result<()> {
    let content = String::from_utf8_lossy(&body[..body.len().min(1024)]);
    let session = "7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47";
    let project = "acme-api";
    let now = nmem_proto::now_ms();
    c.execute_batch("BEGIN IMMEDIATE")?;
    c.prepare_cached(
        "INSERT INTO sessions (id, harness, project, project_root, cwd, started_at)
         VALUES (?1, 'claude-code', ?2, '/home/dev/projects/acme-api', '/home/dev/projects/acme-api', ?3)
         ON CONFLICT(id) DO NOTHING",
    )?
    .execute(params![session, project, now])?;
    c.prepare_cached(
        "INSERT INTO observations
           (session_id, prompt_id, timestamp, obs_type, source_event, tool_name, content, metadata,
            project, project_root, harness, event_id, tool_use_id)
         VALUES (?1, (SELECT id FROM prompts WHERE session_id = ?1 AND timestamp <= ?2
                      ORDER BY timestamp DESC, id DESC LIMIT 1),
                 ?2, 'command', 'PostToolUse', 'Bash', ?3, '{\"exit_code\":0}', ?4,
                 '/home/dev/projects/acme-api', 'claude-code', ?5, ?6)",
    )?
    .execute(params![
        session,
        now,
        content,
        project,
        format!("floor{n:027}"),
        format!("toolu_floor_{n}")
    ])?;
    c.prepare_cached(
        "INSERT INTO digest_gen (project, n) VALUES (?1, 1)
         ON CONFLICT (project) DO UPDATE SET n = n + 1",
    )?
    .execute([project])?;
    c.execute_batch("COMMIT")
}
