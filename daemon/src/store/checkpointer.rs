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
//! while the last one copied more than [`RESIDUAL`] frames and the passes keep getting shorter,
//! at most [`MAX_PASSES`]), syncs the database file (SQLite syncs it only in a pass that reaches
//! the end of the log, which under load is the writer's), then hands the rest over; the writer
//! copies it right after one of its commits (a few milliseconds at most, not thirty), and its
//! next transaction starts the log over. Should the thread fall far behind ([`HARD_BOUND`]:
//! starved of CPU, a slow disk, or unable to open its connection), the writer takes over and
//! checkpoints itself, as it always did.

use crate::stats::Stats;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};

/// Frames a pass may leave for the writer to copy itself (about 1 MB: a millisecond or so).
pub const RESIDUAL: i64 = 256;

/// Past this many frames in the log the writer checkpoints itself after its commits, and this
/// thread stops chasing: the log's size stays bounded even if the thread cannot keep up.
pub const HARD_BOUND: i64 = 4 * super::schema::WAL_AUTOCHECKPOINT;

/// The most passes in one chase: on a slow disk a pass's syncs take long enough for the writer
/// to add as much again, and the chase would never end.
pub const MAX_PASSES: u32 = 6;

/// Frames the writer may have added since the hand-over and still copy the rest itself;
/// beyond that (a large maintenance job committed meanwhile) the thread chases again.
pub const HANDOVER_SLACK: i64 = 4 * RESIDUAL;

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
    /// The log's size when the last chase handed the rest over to the writer (at most
    /// [`RESIDUAL`] frames, or what [`MAX_PASSES`] left; perhaps none: then the writer copies
    /// what it committed since).
    handed_over: Option<i64>,
    /// The log passed [`HARD_BOUND`]: the writer checkpoints itself, the thread does not chase.
    taken_over: bool,
    /// Frames of this log copied back by the thread's last pass (0 once the log started over).
    copied_back: i64,
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
        let db = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("nmem-checkpoint".into())
            .spawn({
                let stats = stats.clone();
                move || run(&conn, &db, &s, &stats)
            })
            .inspect_err(|e| {
                stats.error(format!(
                    "could not start the checkpoint thread (the writer checkpoints): {e}"
                ))
            })
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
            // Within the bound (the log started over, or never grew): a hand-over or take-over
            // for an older log means nothing now.
            if frames > 0 {
                st.handed_over = None;
                st.taken_over = false;
                st.copied_back = 0;
            }
            return Due::Nothing;
        }
        if frames >= HARD_BOUND {
            // Until the log starts over; a pass running now ends the chase.
            st.taken_over = true;
            st.handed_over = None;
            return Due::Here;
        }
        if let Some(at) = st.handed_over.take() {
            if frames.saturating_sub(at) <= HANDOVER_SLACK {
                return Due::Here;
            }
        }
        if !st.running && !st.asked && !st.taken_over {
            st.asked = true;
            self.shared.woken.notify_all();
        }
        Due::Nothing
    }

    /// What [`Due::Here`] asks, on the writer's connection `conn`: one passive checkpoint, after
    /// which the writer's next transaction starts the log over. Past [`HARD_BOUND`] it first
    /// waits for the thread's pass if one runs (a checkpoint cannot run beside another; the
    /// thread ends its chase after that pass, and the writer adds nothing meanwhile, so the log
    /// stops growing). A hand-over's rest never waits: a pass found running then (a new chase,
    /// asked since) leaves it to the next commit. Only on the writer thread: it may block for a
    /// pass.
    pub fn checkpoint_here(&self, conn: &Connection) -> rusqlite::Result<()> {
        {
            let mut st = self.shared.lock();
            while st.taken_over && st.running {
                st = self
                    .shared
                    .woken
                    .wait(st)
                    .unwrap_or_else(|e| e.into_inner());
            }
        }
        pass(conn).map(|_| ())
    }

    /// Stop the thread (after the pass it is running, if any) and close its connection.
    pub fn stop(&self) {
        self.shared.lock().stop = true;
        self.shared.woken.notify_all();
        let handle = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Whether a chase is asked for and not started (tests).
    #[cfg(test)]
    pub(crate) fn asked(&self) -> bool {
        self.shared.lock().asked
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
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 10);
    }
}

/// Sync the database file's data, opened as the database is (never through a symlink).
fn sync_file(db: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(db)?
        .sync_data()
}

/// One passive checkpoint: (frames in the log, frames copied back), or None when another
/// checkpoint held the log (the writer's, maintenance's, another process's): a passive one
/// never waits for it.
pub(crate) fn pass(conn: &Connection) -> rusqlite::Result<Option<(i64, i64)>> {
    conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        let busy: i64 = r.get(0)?;
        Ok((busy == 0).then_some((r.get(1)?, r.get(2)?)))
    })
}

fn run(conn: &Connection, db: &Path, shared: &Shared, stats: &Stats) {
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
            if st.taken_over {
                continue;
            }
            st.running = true;
        }
        let handed = match chase(conn, shared, stats) {
            // SQLite syncs the database file only in a pass that reaches the end of the log:
            // under load, the writer's. Synced here, the writer's sync has only its rest to
            // write.
            Some(log) => match sync_file(db) {
                Ok(()) => Some(log),
                Err(e) => {
                    stats.error(format!("syncing the database after a checkpoint: {e}"));
                    None
                }
            },
            None => None,
        };
        let mut st = shared.lock();
        st.running = false;
        if !st.taken_over {
            st.handed_over = handed;
        }
        // For whoever waits for the chase to end (tests).
        shared.woken.notify_all();
    }
}

/// Passes until one copies only a few frames, the passes stop getting shorter, or
/// [`MAX_PASSES`]: the log's size at the last pass, to hand the rest over; None when there is
/// nothing to hand over (a pass found another checkpoint running or failed, a reader on an old
/// snapshot held more than a small rest back, or the writer took over or is stopping).
fn chase(conn: &Connection, shared: &Shared, stats: &Stats) -> Option<i64> {
    let mut before_copied = i64::MAX;
    for n in 1..=MAX_PASSES {
        let (log, done) = match pass(conn) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                stats.error(format!("WAL checkpoint failed (retried later): {e}"));
                return None;
            }
        };
        let copied = {
            let mut st = shared.lock();
            // A log that started over since counts from its start.
            let copied = if done >= st.copied_back {
                done - st.copied_back
            } else {
                done
            };
            st.copied_back = done;
            if st.stop || st.taken_over {
                return None;
            }
            copied
        };
        let rest = log - done;
        if copied <= 0 && rest > RESIDUAL {
            // Held back by a reader: the next commit asks again.
            return None;
        }
        // A pass that copied many frames took long enough for the writer to add a good share of
        // them again: another pass takes those, while each copies fewer than the one before.
        let small = rest <= RESIDUAL && copied <= RESIDUAL;
        if small || copied >= before_copied || n == MAX_PASSES {
            return Some(log);
        }
        before_copied = copied;
    }
    None
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

    /// A database whose log has just passed its bound (nothing copied back yet), with a
    /// checkpointer on it: the folder (kept for the test's length), the database's path, the
    /// writing connection, the checkpointer, and the frames in the log.
    fn past_the_bound() -> (
        tempfile::TempDir,
        std::path::PathBuf,
        Connection,
        Checkpointer,
        i64,
    ) {
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
        (tmp, path, c, ckpt, frames)
    }

    /// Past the bound, one request starts a pass on the checkpointer's thread (the committing
    /// thread copies nothing) and a pass that copied the whole log lets the next commit start
    /// the log over; a log within the bound asks nothing.
    #[test]
    fn the_log_is_copied_back_off_the_committing_thread_and_starts_over() {
        let (_tmp, _, c, ckpt, frames) = past_the_bound();
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
    /// the bound is told to checkpoint here, once; past the hard bound the writer always is,
    /// and the thread is not asked again until the log starts over.
    #[test]
    fn a_small_rest_is_left_to_the_writer_and_the_hard_bound_holds() {
        let (_tmp, path, c, ckpt, _) = past_the_bound();
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
        // A log that started over forgets a rest handed over for the old one.
        assert_eq!(ckpt.after_commit(5), Due::Nothing);
        assert_eq!(ckpt.after_commit(WAL_AUTOCHECKPOINT + 1), Due::Nothing);
        assert!(ckpt.asked(), "a new log past the bound asks for a chase");
        ckpt.wait_idle();
        assert_eq!(ckpt.after_commit(5), Due::Nothing);
        // Past the hard bound: the writer's, every time, and the thread is left alone.
        assert_eq!(ckpt.after_commit(HARD_BOUND), Due::Here);
        assert_eq!(ckpt.after_commit(HARD_BOUND + 1), Due::Here);
        assert_eq!(ckpt.after_commit(WAL_AUTOCHECKPOINT + 1), Due::Nothing);
        assert!(
            !ckpt.asked(),
            "taken over: no chase until the log starts over"
        );
        assert_eq!(ckpt.after_commit(5), Due::Nothing);
        assert_eq!(ckpt.after_commit(WAL_AUTOCHECKPOINT + 1), Due::Nothing);
        assert!(
            ckpt.asked(),
            "a log that started over is the thread's again"
        );
        reader.execute_batch("COMMIT").unwrap();
    }

    /// The real case: the writer commits all along while the thread chases. The writer copies
    /// a rest after a commit (handed over, or past the hard bound when the thread could not
    /// keep up, as on a machine this busy), and the log starts over, never much past the hard
    /// bound.
    #[test]
    fn a_log_written_all_along_is_handed_over_and_starts_over() {
        let (_tmp, _, c, ckpt, frames) = past_the_bound();
        let (mut most, mut handed, mut started_over) = (frames, 0, 0);
        let mut past = true;
        for _ in 0..200_000 {
            let frames = commit(&c, 8);
            most = most.max(frames);
            if past && frames < WAL_AUTOCHECKPOINT {
                started_over += 1;
                past = false;
                if started_over == 3 {
                    break;
                }
            }
            past |= frames >= WAL_AUTOCHECKPOINT;
            if ckpt.after_commit(frames) == Due::Here {
                handed += 1;
                ckpt.checkpoint_here(&c).unwrap();
            }
        }
        assert_eq!(
            started_over, 3,
            "the log never started over ({most} frames at most)"
        );
        assert!(handed >= 3, "the writer never copied a rest");
        // Past the hard bound the writer takes over at its next commit, waiting for the
        // thread's pass: the log never grows further.
        assert!(
            most < HARD_BOUND + 100,
            "{most} frames: nothing bounded the log"
        );
    }
}
