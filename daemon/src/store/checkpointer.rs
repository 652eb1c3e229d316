//! Checkpoints off the writer's path.
//!
//! A checkpoint copies the write-ahead log's pages back into the database file and syncs both:
//! about 30 ms for the log's bound ([`super::schema::WAL_AUTOCHECKPOINT`] pages) on the
//! 2-core machine, once every 2,000-2,500 events under ingest. Run by the writer after its
//! commit, it held every request in flight for that long (14% of the wall time of 40,000
//! events through the API). A checkpoint needs no write lock, so a second connection runs it
//! here, on its own thread, while the writer goes on committing.
//!
//! What this thread cannot do alone is let the log start over: SQLite rewinds the log only when
//! a write transaction begins with every frame already copied back, and a writer committing all
//! along keeps adding frames behind the checkpoint. So the thread chases the log (another pass
//! while more than [`RESIDUAL`] frames are left, each pass shorter than the one before), then
//! says the rest is small; the writer copies that rest itself right after one of its commits
//! (about a millisecond, not thirty), and its next transaction starts the log over. Should the
//! thread fall far behind ([`HARD_BOUND`]: starved of CPU, or unable to open its connection),
//! the writer checkpoints itself, as it always did.

use crate::stats::Stats;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

/// Frames a pass may leave for the writer to copy itself (about 1 MB: a millisecond or so).
pub const RESIDUAL: i64 = 256;

/// Past this many frames in the log the writer checkpoints itself after its commit, whatever
/// this thread is doing: the log's size stays bounded even if the thread cannot keep up.
pub const HARD_BOUND: i64 = 4 * super::schema::WAL_AUTOCHECKPOINT;

/// What the thread that just committed should do about the log ([`Checkpointer::after_commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Nothing: the log is within its bound, or the checkpointer is on it.
    Nothing,
    /// Checkpoint now on the write connection (passive): the checkpointer left only a small
    /// rest, or the log is past [`HARD_BOUND`]. Never in a request's own commit: a request
    /// hands it to the writer.
    Here,
}

#[derive(Default)]
struct State {
    /// A pass was asked for and has not started.
    asked: bool,
    /// A pass (or a chase of passes) is running.
    running: bool,
    /// The last chase left at most [`RESIDUAL`] frames for the writer to copy (perhaps none:
    /// then the writer copies what it committed since).
    rest_small: bool,
    stop: bool,
}

struct Shared {
    state: Mutex<State>,
    woken: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The checkpointing thread and its connection.
pub struct Checkpointer {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Checkpointer {
    /// Start the thread on its own connection to the database at `path`; None if that cannot
    /// be opened (the writer then checkpoints itself, as [`Due::Here`] says past the bound).
    pub fn spawn(path: &Path, stats: Arc<Stats>) -> Option<Checkpointer> {
        let conn = match open(path) {
            Ok(c) => c,
            Err(e) => {
                stats.error(format!(
                    "could not open a connection for checkpoints (the writer checkpoints): {e}"
                ));
                return None;
            }
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            woken: Condvar::new(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("nmem-checkpoint".into())
            .spawn(move || run(&conn, &s, &stats))
            .ok()?;
        Some(Checkpointer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// A commit left `frames` frames in the log (what the write connection's WAL hook noted; 0
    /// when this thread committed nothing since it last asked). Past the log's bound, asks the
    /// thread for a pass, or says when the writer should copy the rest itself.
    pub fn after_commit(&self, frames: i64) -> Due {
        let mut st = self.shared.lock();
        if frames < super::schema::WAL_AUTOCHECKPOINT {
            // Within the bound (the log started over, or never grew): a rest reported for an
            // older log means nothing now.
            if frames > 0 {
                st.rest_small = false;
            }
            return Due::Nothing;
        }
        if frames >= HARD_BOUND {
            return Due::Here;
        }
        if st.rest_small {
            st.rest_small = false;
            return Due::Here;
        }
        if !st.running && !st.asked {
            st.asked = true;
            self.shared.woken.notify_one();
        }
        Due::Nothing
    }

    /// Stop the thread (after the pass it is running, if any) and close its connection.
    pub fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.woken.notify_one();
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Wait until no pass is asked for or running (tests).
    #[cfg(test)]
    pub(crate) fn wait_idle(&self) {
        let mut st = self.shared.lock();
        while st.asked || st.running {
            st = self
                .shared
                .woken
                .wait(st)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A read-write connection used for nothing but checkpoints, synced as the writer's is
/// (`synchronous = NORMAL`: the log is synced before its pages are copied, the database after).
fn open(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA synchronous = NORMAL;")?;
    Ok(conn)
}

/// A pass copies thousands of pages in one go; on a machine with few cores it would take a
/// core from the requests for that long. Run at a lower priority (nice 10, this thread only),
/// it takes what they leave.
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on this thread's own id; a failure only leaves the priority
    // as it was.
    unsafe {
        let tid = libc::syscall(libc::SYS_gettid) as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, 10);
    }
}

/// One passive checkpoint: (frames in the log, frames copied back).
fn pass(conn: &Connection) -> rusqlite::Result<(i64, i64)> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((r.get(1)?, r.get(2)?))
    })
}

fn run(conn: &Connection, shared: &Shared, stats: &Stats) {
    lower_priority();
    loop {
        {
            let mut st = shared.lock();
            while !st.asked && !st.stop {
                st = shared.woken.wait(st).unwrap_or_else(|e| e.into_inner());
            }
            if st.stop {
                return;
            }
            st.asked = false;
            st.running = true;
        }
        // Frames copied back before this pass.
        let mut before = 0;
        let rest = loop {
            match pass(conn) {
                Ok((log, done)) => {
                    let (rest, copied) = (log - done, done - before);
                    before = done;
                    // Chase: a pass that copied many frames took long enough for the writer to
                    // add a good share of them again, so another pass takes those, until one
                    // copies only a few. Stop when a pass gets nowhere: a reader still on an
                    // old snapshot (the next commit asks again), or the log started over.
                    let small = rest <= RESIDUAL && copied <= RESIDUAL;
                    if small || copied <= 0 || shared.lock().stop {
                        break Some(rest);
                    }
                }
                Err(e) => {
                    stats.error(format!("WAL checkpoint failed (retried later): {e}"));
                    break None;
                }
            }
        };
        let mut st = shared.lock();
        st.running = false;
        // Even a pass that copied everything leaves the rest to the writer: it has most likely
        // begun its next transaction during the pass (a pass syncs twice; the writer commits
        // every few hundred microseconds under load), so that transaction cannot start the log
        // over, and what it adds is copied by the writer once it has committed.
        st.rest_small = rest.is_some_and(|r| r <= RESIDUAL);
        // For whoever waits for the pass to end (tests).
        shared.woken.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::schema::WAL_AUTOCHECKPOINT;

    thread_local! {
        /// Frames in the log after this test's last commit (its connection's WAL hook, called
        /// on the committing thread: each test its own).
        static FRAMES: std::cell::Cell<i64> = const { std::cell::Cell::new(0) };
    }

    fn note(_: &rusqlite::hooks::Wal, frames: std::ffi::c_int) -> rusqlite::Result<()> {
        FRAMES.set(i64::from(frames));
        Ok(())
    }

    /// A database in WAL mode whose connection never checkpoints by itself (as the writer's).
    fn writer_conn(path: &Path) -> Connection {
        let c = Connection::open(path).unwrap();
        c.pragma_update(None, "journal_mode", "WAL").unwrap();
        c.execute_batch("PRAGMA synchronous = NORMAL; CREATE TABLE IF NOT EXISTS t(x BLOB);")
            .unwrap();
        c.wal_hook(Some(note));
        c
    }

    /// One commit of `pages` pages of new rows; the frames then in the log.
    fn commit(c: &Connection, pages: usize) -> i64 {
        c.execute_batch("BEGIN").unwrap();
        for _ in 0..pages {
            c.execute("INSERT INTO t(x) VALUES (zeroblob(3900))", [])
                .unwrap();
        }
        c.execute_batch("COMMIT").unwrap();
        FRAMES.get()
    }

    /// Past the bound, one request starts a pass on the checkpointer's thread (the committing
    /// thread copies nothing) and a pass that copied the whole log lets the next commit start
    /// the log over; a log within the bound asks nothing.
    #[test]
    fn the_log_is_copied_back_off_the_committing_thread_and_starts_over() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("c.db");
        let c = writer_conn(&path);
        let ckpt = Checkpointer::spawn(&path, Arc::new(Stats::default())).unwrap();
        let mut frames = 0;
        while frames < WAL_AUTOCHECKPOINT {
            frames = commit(&c, 500);
            if frames < WAL_AUTOCHECKPOINT {
                assert_eq!(ckpt.after_commit(frames), Due::Nothing);
            }
        }
        // Nothing copied back yet: SQLite checkpoints nothing by itself with a WAL hook set.
        assert!(commit(&c, 1) > frames);
        assert_eq!(ckpt.after_commit(frames), Due::Nothing, "the thread's job");
        ckpt.wait_idle();
        // Copied whole while nothing was committed: the next transaction starts the log over.
        let after = commit(&c, 1);
        assert!(
            after < 10,
            "{after} frames after the pass: the log did not start over"
        );
        assert_eq!(ckpt.after_commit(after), Due::Nothing);
        drop(ckpt);
    }

    /// A pass that cannot copy everything (a reader still on an older snapshot, as a commit
    /// racing the pass would leave) leaves the small rest to the writer: the next commit past
    /// the bound is told to checkpoint here, once; a log past the hard bound always is.
    #[test]
    fn a_small_rest_is_left_to_the_writer_and_the_hard_bound_holds() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("c.db");
        let c = writer_conn(&path);
        let ckpt = Checkpointer::spawn(&path, Arc::new(Stats::default())).unwrap();
        let mut frames = 0;
        while frames < WAL_AUTOCHECKPOINT {
            frames = commit(&c, 500);
        }
        // A reader pins the log as it is now; then a few more frames.
        let reader = Connection::open(&path).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap();
        let frames = commit(&c, 50);
        assert_eq!(ckpt.after_commit(frames), Due::Nothing);
        ckpt.wait_idle();
        let frames = commit(&c, 1);
        assert_eq!(
            ckpt.after_commit(frames),
            Due::Here,
            "the rest is the writer's"
        );
        // Told once: the next commit asks the thread again instead.
        let frames = commit(&c, 1);
        assert_eq!(ckpt.after_commit(frames), Due::Nothing);
        ckpt.wait_idle();
        // A log that started over forgets a rest reported for the old one.
        assert_eq!(ckpt.after_commit(5), Due::Nothing);
        assert_eq!(ckpt.after_commit(WAL_AUTOCHECKPOINT + 1), Due::Nothing);
        ckpt.wait_idle();
        assert_eq!(ckpt.after_commit(HARD_BOUND), Due::Here);
        reader.execute_batch("COMMIT").unwrap();
    }
}
