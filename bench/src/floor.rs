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
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Many clients on kept-alive connections (a thread each), one writer thread committing
    /// every event waiting in one transaction (group commit).
    Ingest,
    /// The same clients served by one thread: `poll` on every connection, read every request
    /// that is there, commit them in one transaction, answer them; no hand-off at all.
    IngestPolled,
    /// The same as [`Kind::IngestPolled`] without the commit: what the exchange alone allows
    /// (the load generator, one read and one reply per event, the wake-ups on both sides).
    IngestAnswer,
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
        Kind::Answer | Kind::IngestAnswer => Store::Nothing,
        Kind::Commit | Kind::IngestPolled => Store::Here(open(db)?),
        Kind::Handoff | Kind::Ingest => {
            let c = open(db)?;
            let (tx, rx) = std::sync::mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("floor-writer".into())
                .spawn(move || writer(c, rx))?;
            Store::Writer(tx)
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let thread = std::thread::Builder::new()
        .name("floor".into())
        .spawn(move || match (kind, store) {
            (Kind::IngestPolled, Store::Here(c)) => serve_polled(listener, Some(c), &flag),
            (Kind::IngestAnswer, _) => serve_polled(listener, None, &flag),
            (kind, store) => serve(listener, store, kind == Kind::Ingest, &flag),
        })?;
    Ok(Floor {
        socket: socket.to_path_buf(),
        stop,
        thread: Some(thread),
    })
}

/// What the writer thread is handed: the event's body, its number, where to say it is stored.
type Job = (Vec<u8>, u64, Sender<Result<(), String>>);

/// Group commit: every event waiting when the writer is free shares one transaction.
fn writer(c: Connection, rx: std::sync::mpsc::Receiver<Job>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < 512 {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let stored = (|| {
            c.execute_batch("BEGIN IMMEDIATE")?;
            for (body, n, _) in &batch {
                insert(&c, body, *n)?;
            }
            c.execute_batch("COMMIT")
        })();
        if stored.is_err() {
            let _ = c.execute_batch("ROLLBACK");
        }
        for (_, _, done) in batch {
            let _ = done.send(stored.as_ref().map_err(|e| e.to_string()).copied());
        }
    }
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
const REPLY_KEEP: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

/// The ingest floors: `events` from the load generator of nmemd's "ingest through the socket
/// API" line (8 kept-alive connections) against a server of `kind` ([`Kind::Ingest`],
/// [`Kind::IngestPolled`] or [`Kind::IngestAnswer`]) on `socket`, storing into `db` (nmemd
/// stopped); events per second.
/// The server and the load share this process.
pub fn ingest(
    socket: &Path,
    kind: Kind,
    db: &Path,
    events: usize,
) -> anyhow::Result<(f64, std::time::Duration)> {
    let floor = start(socket, kind, db)?;
    // This process's CPU time: the server's and the load generator's together.
    let (rate, (cpu, _), _) = crate::api_ingest(socket, events, 8, std::process::id())?;
    answered(floor.stop()?, events, "the ingest floor")?;
    Ok((rate, cpu))
}

/// The ingest floors, as the bench prints them; the last stores nothing (the ceiling of the
/// exchange itself on this machine).
pub const INGESTS: [(&str, &str, Kind); 3] = [
    (
        "floor: ingest, threads and a writer thread",
        "floor_ingest_threads_events_per_s",
        Kind::Ingest,
    ),
    (
        "floor: ingest, one thread (poll, group commit)",
        "floor_ingest_one_thread_events_per_s",
        Kind::IngestPolled,
    ),
    (
        "floor: ingest, one thread answering at once",
        "floor_ingest_answer_events_per_s",
        Kind::IngestAnswer,
    ),
];

/// Measure and print the ingest floors' lines; each figure under its key for the report.
pub fn ingest_lines(socket: &Path, db: &Path, events: usize) -> anyhow::Result<Vec<(String, f64)>> {
    let mut out = Vec::new();
    for (what, key, kind) in INGESTS {
        let (rate, cpu) = ingest(socket, kind, db, events)?;
        let ack = if kind == Kind::IngestAnswer {
            "no commit"
        } else {
            "ack after commit"
        };
        println!(
            "{what:<48} {rate:>10.0} events/s  (8 connections, {events} events, {ack}; \
             {:.1} µs of CPU per event, server and load together)",
            cpu.as_secs_f64() * 1e6 / events as f64
        );
        out.push((key.to_string(), rate));
    }
    Ok(out)
}

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
    Writer(Sender<Job>),
}

/// Accept until stopped. One connection at a time, one request each (a hook's), or with
/// `keep_alive` a thread per connection answering its requests until the client closes it.
fn serve(
    listener: UnixListener,
    how: Store,
    keep_alive: bool,
    stop: &AtomicBool,
) -> anyhow::Result<u64> {
    let answered = Arc::new(AtomicU64::new(0));
    // Ids unique across the servers one run starts on the same database.
    let base = nmem_proto::now_ms() as u64 * 1_000_000;
    let mut buf = vec![0u8; 1 << 20];
    let mut clients = Vec::new();
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(mut s) = stream else { continue };
        if keep_alive {
            let Store::Writer(tx) = &how else {
                anyhow::bail!("a keep-alive floor stores through its writer")
            };
            let (tx, answered) = (tx.clone(), answered.clone());
            clients.push(std::thread::spawn(move || -> anyhow::Result<()> {
                let mut buf = vec![0u8; 1 << 20];
                while let Some((head_end, body_end)) = read_request(&mut s, &mut buf) {
                    let n = base + answered.fetch_add(1, Ordering::SeqCst);
                    let (done, wait) = std::sync::mpsc::channel();
                    tx.send((buf[head_end..body_end].to_vec(), n, done))?;
                    wait.recv()?.map_err(anyhow::Error::msg)?;
                    s.write_all(REPLY_KEEP)?;
                }
                Ok(())
            }));
            continue;
        }
        let Some((head_end, body_end)) = read_request(&mut s, &mut buf) else {
            continue;
        };
        if buf.starts_with(b"POST") {
            let body = &buf[head_end..body_end];
            let n = base + answered.fetch_add(1, Ordering::SeqCst);
            match &how {
                Store::Nothing => {}
                Store::Here(c) => {
                    c.execute_batch("BEGIN IMMEDIATE")?;
                    insert(c, body, n)?;
                    c.execute_batch("COMMIT")?;
                }
                Store::Writer(tx) => {
                    let (done, wait) = std::sync::mpsc::channel();
                    tx.send((body.to_vec(), n, done))?;
                    wait.recv()?.map_err(anyhow::Error::msg)?;
                }
            }
        }
        let _ = s.write_all(REPLY);
    }
    for c in clients {
        c.join()
            .map_err(|_| anyhow::anyhow!("a floor connection panicked"))??;
    }
    Ok(answered.load(Ordering::SeqCst))
}

/// [`Kind::IngestPolled`]: one thread for every connection and the commits; without a
/// connection, [`Kind::IngestAnswer`]: the same, answering at once.
fn serve_polled(
    listener: UnixListener,
    c: Option<Connection>,
    stop: &AtomicBool,
) -> anyhow::Result<u64> {
    use std::os::fd::AsRawFd;
    let base = nmem_proto::now_ms() as u64 * 1_000_000;
    let mut answered = 0u64;
    let mut conns: Vec<std::os::unix::net::UnixStream> = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .chain(conns.iter().map(|s| s.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is an array of `fds.len()` initialised pollfd structures we own.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } < 0 {
            continue; // interrupted
        }
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let mut ready = Vec::new();
        let mut bodies = Vec::new();
        let mut closed = Vec::new();
        for (i, f) in fds[1..].iter().enumerate() {
            if f.revents == 0 {
                continue;
            }
            match read_request(&mut conns[i], &mut buf) {
                Some((head_end, body_end)) => {
                    bodies.push(buf[head_end..body_end].to_vec());
                    ready.push(i);
                }
                None => closed.push(i),
            }
        }
        if !bodies.is_empty() {
            match &c {
                Some(c) => {
                    c.execute_batch("BEGIN IMMEDIATE")?;
                    for b in &bodies {
                        insert(c, b, base + answered)?;
                        answered += 1;
                    }
                    c.execute_batch("COMMIT")?;
                }
                None => answered += bodies.len() as u64,
            }
            for &i in &ready {
                conns[i].write_all(REPLY_KEEP)?;
            }
        }
        for &i in closed.iter().rev() {
            conns.swap_remove(i);
        }
        if fds[0].revents != 0 {
            if let Ok((s, _)) = listener.accept() {
                conns.push(s);
            }
        }
    }
    Ok(answered)
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

/// The writer's statements for one tool call (the observation's content is the payload itself,
/// cut to 1 KB: about what a Bash call's condensed output stores), in the caller's transaction.
fn insert(c: &Connection, body: &[u8], n: u64) -> rusqlite::Result<()> {
    let content = String::from_utf8_lossy(&body[..body.len().min(1024)]);
    let session = "7d3f9a2e-4b1c-4e8a-9f6d-2c5b8e1a0f47";
    let project = "acme-api";
    let now = nmem_proto::now_ms();
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
    Ok(())
}
