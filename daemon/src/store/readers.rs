//! A small pool of read-only connections. Queries run on tokio's blocking threads, so a slow one
//! never stalls the socket or the writer.
//!
//! Every query runs under SQLite's progress handler, which interrupts it when its time budget
//! (`[limits] query_timeout_ms`) is spent, when the request that asked for it is dropped (its
//! client went away: the async future's guard raises a flag), or when the daemon is stopping
//! ([`Readers::interrupt_all`]). The handler is checked every few thousand VM instructions, so
//! a query is never beyond reach, whatever its shape.
//!
//! **Memory.** SQLite is built with `SQLITE_ENABLE_MEMORY_MANAGEMENT` (libsqlite3-sys), so the
//! page caches of all connections share one LRU list: a connection at its `cache_size` takes the
//! least recently used page of *any* connection, and what bounds the pages held is the sum of the
//! open connections' `cache_size`s, not each one. Measured at 1M rows (`nmem-bench
//! --search-only --model`, `sqlite3_memory_used` read with gdb): 9 MB after the lexical lines,
//! 27 MB after the hybrid ones, because a hybrid search's vector half took a second query reader
//! (its 8 MB added to the sum) while the lexical half held the first, and its scattered vector
//! pages, read once, pushed the index's pages out; nmemd's RSS went over its 64 MB budget. Now:
//! * [`limit_sqlite_memory`] sets a process-wide soft heap limit, [`SQLITE_HEAP_LIMIT_MB`]:
//!   past it SQLite frees least recently used pages before allocating, whatever the number of
//!   connections open;
//! * vector reads ([`Readers::run_vectors`]: a hybrid search's nearest rows, the codes a project
//!   loads) run on readers of their own with a 1 MB `cache_size`, so a hybrid search adds 1 MB,
//!   not 8, to the sum, and query readers ([`Readers::run`]) keep the index's pages.

use rusqlite::Connection;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What all of SQLite's memory (page caches, statements, the writer's buffers) may reach
/// before it frees cached pages instead of growing: the writer's 8 MB cache, one query reader's
/// 8 MB, two vector readers' and the statements. The lexical lines at 1M use 9 MB.
pub const SQLITE_HEAP_LIMIT_MB: i64 = 20;

/// Bound SQLite's memory in this process (module doc). Process-wide: nmemd calls it once, at
/// start.
pub fn limit_sqlite_memory() {
    // SAFETY: sets a global threshold; safe to call at any time, from any thread.
    unsafe {
        rusqlite::ffi::sqlite3_soft_heap_limit64(SQLITE_HEAP_LIMIT_MB * 1024 * 1024);
    }
}

/// Query readers kept open.
const KEEP: usize = 4;
/// Vector readers kept open: one per hybrid search running at once, which is the searches the
/// two cores run at once.
const KEEP_VECTORS: usize = 2;
/// The page cache of a query reader, KiB (SQLite's `cache_size`, negative: in KiB).
pub const QUERY_CACHE_KIB: i64 = 8192;
/// The page cache of a vector reader, KiB: the vector table's interior pages (about 300 at 1M
/// rows) and one search's leaf pages, not more.
pub const VECTOR_CACHE_KIB: i64 = 1024;
/// VM instructions between two checks of the budget (well under a millisecond).
const CHECK_EVERY: i32 = 4000;

#[derive(Clone)]
pub struct Readers {
    path: PathBuf,
    pool: Arc<Mutex<Vec<Connection>>>,
    /// Readers for vector reads, with a small page cache (module doc).
    vectors: Arc<Mutex<Vec<Connection>>>,
    budget: Duration,
    stopping: Arc<AtomicBool>,
    /// The phrase counts `nmem_bm25` remembers, shared by every connection of the pool.
    docfreq: Arc<super::bm25::DocFreq>,
    /// The project row sets `nmem_in_project` filters by, shared likewise.
    project_ids: Arc<super::project_ids::ProjectIds>,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("database read failed: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("query task failed: {0}")]
    Join(String),
    #[error("the query took longer than its {} ms budget (`[limits] query_timeout_ms`) and was stopped: narrow it (a project, a type, a date range, fewer words)", .0.as_millis())]
    TimedOut(Duration),
    #[error("nmemd is shutting down; retry once it is back")]
    Stopping,
    #[error("the query was cancelled: its client went away")]
    Cancelled,
}

/// Raises the cancel flag when the request's future is dropped before the query ended.
struct CancelOnDrop(Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

impl Readers {
    /// Readers with the default 2 s budget.
    pub fn new(path: PathBuf) -> Readers {
        Readers::with_budget(path, Duration::from_secs(2))
    }

    pub fn with_budget(path: PathBuf, budget: Duration) -> Readers {
        Readers {
            path,
            pool: Arc::new(Mutex::new(Vec::new())),
            vectors: Arc::new(Mutex::new(Vec::new())),
            budget,
            stopping: Arc::new(AtomicBool::new(false)),
            docfreq: Default::default(),
            project_ids: Default::default(),
        }
    }

    /// A new read-only connection, with `nmem_bm25` and `nmem_in_project` registered.
    fn open(&self) -> rusqlite::Result<Connection> {
        let conn = super::schema::open_reader(&self.path)?;
        super::bm25::register(&conn, self.docfreq.clone())?;
        super::project_ids::register(&conn)?;
        super::sql_trace::install(&conn);
        Ok(conn)
    }

    /// The project row sets of `nmem_in_project`.
    pub fn project_ids(&self) -> Arc<super::project_ids::ProjectIds> {
        self.project_ids.clone()
    }

    /// Interrupt every running query, and every later one: the daemon is stopping.
    pub fn interrupt_all(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Run `f` on a read-only connection, off the async threads.
    pub async fn run<T, F>(&self, f: F) -> Result<T, ReadError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.run_pooled(f, false).await
    }

    /// [`Readers::run`] on a reader for vector reads, whose page cache is
    /// [`VECTOR_CACHE_KIB`]: for reads of pages that the next query will not read again.
    pub async fn run_vectors<T, F>(&self, f: F) -> Result<T, ReadError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        self.run_pooled(f, true).await
    }

    /// `f` on a pooled reader (a vector reader when `vectors`), off the async threads,
    /// cancelled when the caller stops waiting.
    async fn run_pooled<T, F>(&self, f: F, vectors: bool) -> Result<T, ReadError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let this = self.clone();
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        tokio::task::spawn_blocking(move || this.run_cancellable(f, cancel, vectors))
            .await
            .map_err(|e| ReadError::Join(e.to_string()))?
    }

    /// Run `f` on a connection of its own, closed afterwards: for whole-table scans (status
    /// counts) that would otherwise fill a pooled connection's page cache with pages no query
    /// needs, and keep them in memory.
    pub async fn run_once<T, F>(&self, f: F) -> Result<T, ReadError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    {
        let this = self.clone();
        let cancel = Arc::new(AtomicBool::new(false));
        let _guard = CancelOnDrop(cancel.clone());
        tokio::task::spawn_blocking(move || {
            let conn = this.open()?;
            conn.execute_batch(&format!("PRAGMA cache_size = -{VECTOR_CACHE_KIB};"))?;
            this.bounded(&conn, f, cancel, true)
        })
        .await
        .map_err(|e| ReadError::Join(e.to_string()))?
    }

    /// On the calling thread, for ingest's own lookups: bounded by the budget, but not refused
    /// while stopping (the spool drain and queued events still need them).
    pub fn run_blocking<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, ReadError> {
        let conn = self.pool.lock().unwrap().pop();
        let conn = match conn {
            Some(c) => c,
            None => self.open()?,
        };
        let out = self.bounded(&conn, f, Arc::new(AtomicBool::new(false)), false);
        let mut pool = self.pool.lock().unwrap();
        if pool.len() < KEEP {
            pool.push(conn);
        }
        out
    }

    fn run_cancellable<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
        cancel: Arc<AtomicBool>,
        vectors: bool,
    ) -> Result<T, ReadError> {
        let (pool, keep) = if vectors {
            (&self.vectors, KEEP_VECTORS)
        } else {
            (&self.pool, KEEP)
        };
        let conn = pool.lock().unwrap().pop();
        let conn = match conn {
            Some(c) => c,
            None => {
                let c = self.open()?;
                if vectors {
                    c.execute_batch(&format!("PRAGMA cache_size = -{VECTOR_CACHE_KIB};"))?;
                }
                c
            }
        };
        let out = self.bounded(&conn, f, cancel, true);
        let mut pool = pool.lock().unwrap();
        if pool.len() < keep {
            pool.push(conn);
        }
        out
    }

    /// `f` under the progress handler (see the module doc), and why it was stopped if it was.
    fn bounded<T>(
        &self,
        conn: &Connection,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
        cancel: Arc<AtomicBool>,
        stoppable: bool,
    ) -> Result<T, ReadError> {
        if stoppable && self.stopping.load(Ordering::Relaxed) {
            return Err(ReadError::Stopping);
        }
        let deadline = Instant::now() + self.budget;
        let stopping = if stoppable {
            self.stopping.clone()
        } else {
            Arc::new(AtomicBool::new(false))
        };
        let flag = cancel.clone();
        conn.progress_handler(
            CHECK_EVERY,
            Some(move || {
                flag.load(Ordering::Relaxed)
                    || stopping.load(Ordering::Relaxed)
                    || Instant::now() >= deadline
            }),
        );
        let out = f(conn);
        conn.progress_handler(0, None::<fn() -> bool>);
        match out {
            Ok(v) => Ok(v),
            Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::OperationInterrupted) => {
                Err(if cancel.load(Ordering::Relaxed) {
                    ReadError::Cancelled
                } else if stoppable && self.stopping.load(Ordering::Relaxed) {
                    ReadError::Stopping
                } else {
                    ReadError::TimedOut(self.budget)
                })
            }
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A query that never ends by itself: counting without bound.
    const ENDLESS: &str =
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT COUNT(*) FROM n";

    /// Readers of a database in a fresh temporary folder, removed when the guard drops.
    fn readers(budget: Duration) -> (Readers, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nmem.db");
        drop(crate::store::schema::open_writer(&db).unwrap());
        (Readers::with_budget(db, budget), dir)
    }

    fn endless(c: &Connection) -> rusqlite::Result<i64> {
        c.query_row(ENDLESS, [], |r| r.get(0))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_past_its_budget_is_stopped() {
        let (r, _dir) = readers(Duration::from_millis(100));
        // The deadline detects a hang; it is far above the budget.
        let res = tokio::time::timeout(Duration::from_secs(30), r.run(endless))
            .await
            .expect("the query was not stopped");
        assert!(matches!(res, Err(ReadError::TimedOut(_))), "{res:?}");
        // The connection is usable afterwards (back in the pool, handler removed).
        let one = r.run(|c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)));
        assert_eq!(one.await.unwrap(), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_query_whose_client_left_is_stopped() {
        let (r, _dir) = readers(Duration::from_secs(3600));
        let started = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        let (s, e) = (started.clone(), ended.clone());
        let task = tokio::spawn({
            let r = r.clone();
            async move {
                r.run(move |c| {
                    s.store(true, Ordering::SeqCst);
                    let out = endless(c);
                    e.store(true, Ordering::SeqCst);
                    out
                })
                .await
            }
        });
        wait(&started).await;
        task.abort(); // the client went away: its future is dropped
        wait(&ended).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stopping_interrupts_running_queries_and_refuses_new_ones() {
        let (r, _dir) = readers(Duration::from_secs(3600));
        let started = Arc::new(AtomicBool::new(false));
        let s = started.clone();
        let task = tokio::spawn({
            let r = r.clone();
            async move {
                r.run(move |c| {
                    s.store(true, Ordering::SeqCst);
                    endless(c)
                })
                .await
            }
        });
        wait(&started).await;
        r.interrupt_all();
        let res = tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the query was not interrupted")
            .unwrap();
        assert!(matches!(res, Err(ReadError::Stopping)), "{res:?}");
        let later = r.run(|c| c.query_row("SELECT 1", [], |r| r.get::<_, i64>(0)));
        assert!(matches!(later.await, Err(ReadError::Stopping)));
    }

    /// Poll a flag with a deadline far above what it should take.
    async fn wait(flag: &AtomicBool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !flag.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "timed out");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
