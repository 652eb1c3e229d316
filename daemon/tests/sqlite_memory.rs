//! SQLite's memory in nmemd stays under its process-wide bound however many readers are open and
//! whatever they read. A test binary of its own: the bound is process-wide, and SQLite's memory
//! counter counts every connection of the process, so no other test may run beside it.

use nmem_daemon::store::readers::{limit_sqlite_memory, Readers, SQLITE_HEAP_LIMIT_MB};
use std::sync::{Arc, Barrier};

/// Rows of about one 4 KB page each: 48 MB, more than every reader's cache together.
const ROWS: i64 = 12_000;

fn memory_used() -> i64 {
    // SAFETY: reads a global counter.
    unsafe { rusqlite::ffi::sqlite3_memory_used() }
}

/// Four query readers and two vector readers, all open at once (a barrier holds each query
/// until all six are running), each reading the whole 48 MB table: without the bound their
/// caches add up to 4 × 8 + 2 × 1 = 34 MB; with it SQLite stays within the limit (plus one
/// page per connection of slack, as the limit is soft).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_memory_stays_under_the_limit_with_every_reader_busy() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nmem.db");
    {
        let w = nmem_daemon::store::schema::open_writer(&db).unwrap();
        w.execute_batch(&format!(
            "CREATE TABLE pages (id INTEGER PRIMARY KEY, v BLOB);
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {ROWS})
             INSERT INTO pages (v) SELECT randomblob(3900) FROM n;"
        ))
        .unwrap();
    }
    limit_sqlite_memory();
    let readers = Readers::with_budget(db, std::time::Duration::from_secs(120));
    let barrier = Arc::new(Barrier::new(6));
    let scan = |b: Arc<Barrier>| {
        move |c: &rusqlite::Connection| {
            b.wait();
            let n: i64 = c.query_row("SELECT SUM(length(v)) FROM pages", [], |r| r.get(0))?;
            // Twice: the second pass is where a cache that could grow would hold the table.
            let m: i64 = c.query_row("SELECT SUM(length(v)) FROM pages", [], |r| r.get(0))?;
            Ok(n + m)
        }
    };
    let mut tasks = Vec::new();
    for i in 0..6 {
        let (r, b) = (readers.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            if i < 4 {
                r.run(scan(b)).await
            } else {
                r.run_vectors(scan(b)).await
            }
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap(), 2 * ROWS * 3900);
    }
    let limit = SQLITE_HEAP_LIMIT_MB * 1024 * 1024;
    let used = memory_used();
    assert!(
        used <= limit + 6 * 8192,
        "SQLite holds {:.1} MB, over its {SQLITE_HEAP_LIMIT_MB} MB limit",
        used as f64 / 1048576.0
    );
    // The readers are pooled, not closed: what they hold is what nmemd would keep holding.
    drop(readers);
}
