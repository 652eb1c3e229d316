//! `nmem_in_project(rowid)`: which rows of `observations` or `prompts` belong to a project, as an
//! in-memory bit set, for the project filter of a full-text search.
//!
//! Why: a search in one project walks the full-text index newest first and keeps the project's
//! matches. Checked by a join, every match walked costs a B-tree probe of the (id, project)
//! index, and a project holding a tenth of the rows needs ten matches walked per one kept: at 1M
//! observations, `perf` on the bench's 20 queries put one-project lexical search at 15.7 ms of
//! nmemd's CPU per query against 4.5 ms for all projects, most of it in those probes
//! (`sqlite3BtreeIndexMoveto`, record compares, page-cache lookups). A bit test is a few
//! nanoseconds (ARCHITECTURE.md, "Search at 1M observations", has the figures).
//!
//! Exactness: ids are AUTOINCREMENT (never reused) and a row's project never changes, so a set
//! built once is brought up to date by adding the rows with a larger id, read in the search's own
//! read transaction: every row the search's snapshot holds is in the set. The one writer of a
//! lower id, `nmem rebuild` (a lost row stored again under its own id), clears the sets. A deleted row's bit
//! stays set, which is harmless: the full-text index no longer returns its id. Results are
//! therefore the join's, row for row.
//!
//! Memory: one bit per id up to the table's largest (125 KB per project at 1M observations), at
//! most [`MAX_BYTES`] in all, least recently used sets dropped first; a set that alone would
//! exceed the bound is not built, and the search falls back to the join.
//!
//! The function reads the set of the search running on its thread ([`with_filter`]): SQLite calls
//! a function on the thread that steps the statement, so no pointer crosses threads and a set in
//! use is never dropped under a running statement.

use rusqlite::functions::FunctionFlags;
use rusqlite::Connection;
use std::cell::RefCell;
use std::sync::{Arc, Mutex};

/// All the sets together stay under this (bytes of bits).
pub const MAX_BYTES: usize = 4 << 20;

/// One project's rows of one table, by id.
#[derive(Debug, Clone, Default)]
pub struct Bits {
    words: Vec<u64>,
}

impl Bits {
    fn set(&mut self, id: i64) {
        let Ok(i) = usize::try_from(id) else { return };
        let w = i / 64;
        if w >= self.words.len() {
            self.words.resize(w + 1, 0);
        }
        self.words[w] |= 1 << (i % 64);
    }

    /// Whether row `id` is the project's.
    pub fn has(&self, id: i64) -> bool {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.words.get(i / 64).map(|w| w >> (i % 64) & 1 == 1))
            .unwrap_or(false)
    }

    fn bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

struct Entry {
    table: &'static str,
    project: String,
    bits: Arc<Bits>,
    /// The largest id the set has been brought up to.
    upto: i64,
    /// For least-recently-used eviction.
    used: u64,
}

/// The sets of recently searched projects, shared by the reader connections of one database.
#[derive(Default)]
pub struct ProjectIds {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: Vec<Entry>,
    clock: u64,
}

impl ProjectIds {
    /// The set of `project`'s rows of `table` (`observations` or `prompts`), up to date for the
    /// read transaction `c` is in; None when it would exceed [`MAX_BYTES`] (use the join).
    pub fn get(
        &self,
        c: &Connection,
        table: &'static str,
        project: &str,
    ) -> rusqlite::Result<Option<Arc<Bits>>> {
        let max: i64 = c
            .query_row(&format!("SELECT max(id) FROM {table}"), [], |r| {
                r.get::<_, Option<i64>>(0)
            })?
            .unwrap_or(0);
        if (max.max(0) as usize) / 8 > MAX_BYTES {
            return Ok(None);
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        let at = inner
            .entries
            .iter()
            .position(|e| e.table == table && e.project == project);
        let at = match at {
            Some(i) => {
                let e = &mut inner.entries[i];
                if max > e.upto {
                    // Only rows newer than the set: the rowid range, never the project index
                    // (which would walk every row of the project).
                    let mut stmt = c.prepare_cached(&format!(
                        "SELECT id FROM {table} NOT INDEXED WHERE id > ?1 AND id <= ?2 AND project = ?3"
                    ))?;
                    let mut rows = stmt.query(rusqlite::params![e.upto, max, project])?;
                    let bits = Arc::make_mut(&mut e.bits);
                    while let Some(r) = rows.next()? {
                        bits.set(r.get(0)?);
                    }
                    e.upto = max;
                }
                i
            }
            None => {
                let index = if table == "observations" {
                    "idx_obs_project"
                } else {
                    "idx_prompts_project"
                };
                let mut stmt = c.prepare_cached(&format!(
                    "SELECT id FROM {table} INDEXED BY {index} WHERE project = ?1 AND id <= ?2"
                ))?;
                let mut rows = stmt.query(rusqlite::params![project, max])?;
                let mut bits = Bits::default();
                bits.words.reserve_exact((max.max(0) as usize) / 64 + 1);
                while let Some(r) = rows.next()? {
                    bits.set(r.get(0)?);
                }
                inner.entries.push(Entry {
                    table,
                    project: project.to_owned(),
                    bits: Arc::new(bits),
                    upto: max,
                    used: now,
                });
                inner.entries.len() - 1
            }
        };
        inner.entries[at].used = now;
        let bits = inner.entries[at].bits.clone();
        // Within the bound: drop the least recently used sets (never the one just asked for).
        while inner.entries.iter().map(|e| e.bits.bytes()).sum::<usize>() > MAX_BYTES
            && inner.entries.len() > 1
        {
            let oldest = inner
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.used != now)
                .min_by_key(|(_, e)| e.used)
                .map(|(i, _)| i);
            match oldest {
                Some(i) => drop(inner.entries.remove(i)),
                None => break,
            }
        }
        Ok(Some(bits))
    }

    /// Drop every set: rows were stored under ids below the ones the sets were brought up to
    /// (`nmem rebuild` restores rows under their old ids), which the rule above would miss.
    pub fn clear(&self) {
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entries
            .clear();
    }

    /// Bytes held by the sets (for tests and figures).
    pub fn bytes(&self) -> usize {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.entries.iter().map(|e| e.bits.bytes()).sum()
    }
}

thread_local! {
    static FILTER: RefCell<Option<Arc<Bits>>> = const { RefCell::new(None) };
}

/// Run `f` (which steps statements using `nmem_in_project`) with `bits` as the project's set.
pub fn with_filter<T>(bits: Arc<Bits>, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<Arc<Bits>>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let prev = self.0.take();
            FILTER.with(|s| *s.borrow_mut() = prev);
        }
    }
    let prev = FILTER.with(|s| s.borrow_mut().replace(bits));
    let _reset = Reset(prev);
    f()
}

/// Register `nmem_in_project(id)` on a connection.
pub fn register(c: &Connection) -> rusqlite::Result<()> {
    c.create_scalar_function(
        "nmem_in_project",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DIRECTONLY,
        |ctx| {
            let id: i64 = ctx.get(0)?;
            FILTER.with(|s| match s.borrow().as_ref() {
                Some(bits) => Ok(bits.has(id)),
                None => Err(rusqlite::Error::UserFunctionError(
                    "nmem_in_project: no project set on this thread (search sets it)".into(),
                )),
            })
        },
    )
}

/// The project of row `id`, for tests.
#[cfg(test)]
fn project_of(c: &Connection, table: &str, id: i64) -> Option<String> {
    use rusqlite::OptionalExtension;
    c.query_row(
        &format!("SELECT project FROM {table} WHERE id = ?1"),
        [id],
        |r| r.get(0),
    )
    .optional()
    .ok()
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(
            "CREATE TABLE observations (id INTEGER PRIMARY KEY AUTOINCREMENT, project TEXT NOT NULL, timestamp INTEGER NOT NULL DEFAULT 0);
             CREATE INDEX idx_obs_project ON observations(project, timestamp);",
        )
        .unwrap();
        register(&c).unwrap();
        c
    }

    fn add(c: &Connection, project: &str, n: usize) {
        for _ in 0..n {
            c.execute("INSERT INTO observations (project) VALUES (?1)", [project])
                .unwrap();
        }
    }

    /// The set agrees with the table for every id, after it is built and after rows are added.
    #[test]
    fn the_set_is_the_projects_rows_and_follows_inserts() {
        let c = db();
        add(&c, "a", 70);
        add(&c, "b", 30);
        add(&c, "a", 5);
        let ids = ProjectIds::default();
        let check = |bits: &Bits| {
            let max: i64 = c
                .query_row("SELECT max(id) FROM observations", [], |r| r.get(0))
                .unwrap();
            for id in 0..=max + 70 {
                assert_eq!(
                    bits.has(id),
                    project_of(&c, "observations", id).as_deref() == Some("a"),
                    "id {id}"
                );
            }
        };
        let first = ids.get(&c, "observations", "a").unwrap().unwrap();
        check(&first);
        add(&c, "b", 100);
        add(&c, "a", 3);
        let second = ids.get(&c, "observations", "a").unwrap().unwrap();
        check(&second);
        // The set a running search holds does not change under it.
        assert!(!first.has(209));
        assert!(second.has(208));
        // A deleted row's bit may stay: no full-text match returns its id again.
        c.execute("DELETE FROM observations WHERE id = 1", [])
            .unwrap();
        assert!(ids.get(&c, "observations", "a").unwrap().unwrap().has(1));
    }

    #[test]
    fn the_function_filters_by_the_set_of_its_thread() {
        let c = db();
        add(&c, "a", 3);
        add(&c, "b", 3);
        let ids = ProjectIds::default();
        let bits = ids.get(&c, "observations", "b").unwrap().unwrap();
        let got: Vec<i64> = with_filter(bits, || {
            let mut s = c
                .prepare("SELECT id FROM observations WHERE nmem_in_project(id) ORDER BY id")
                .unwrap();
            s.query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        });
        assert_eq!(got, vec![4, 5, 6]);
        // Outside a search it is an error, not a silent empty result.
        let err = c
            .query_row("SELECT nmem_in_project(1)", [], |r| r.get::<_, bool>(0))
            .unwrap_err();
        assert!(err.to_string().contains("no project set"), "{err}");
    }

    #[test]
    fn sets_stay_within_their_bound() {
        let c = db();
        // Ids up to ~8M: 1 MB per set; five projects would hold 5 MB.
        c.execute(
            "INSERT INTO sqlite_sequence (name, seq) VALUES ('observations', 8000000)",
            [],
        )
        .ok();
        c.execute(
            "UPDATE sqlite_sequence SET seq = 8000000 WHERE name = 'observations'",
            [],
        )
        .unwrap();
        for p in ["p1", "p2", "p3", "p4", "p5"] {
            add(&c, p, 2);
        }
        let ids = ProjectIds::default();
        for p in ["p1", "p2", "p3", "p4", "p5"] {
            let bits = ids.get(&c, "observations", p).unwrap().unwrap();
            assert!(bits.has(project_first(&c, p)));
            assert!(ids.bytes() <= MAX_BYTES, "{} bytes", ids.bytes());
        }
        // Past the bound for a single set: none, and the search joins instead.
        c.execute(
            "UPDATE sqlite_sequence SET seq = 40000000 WHERE name = 'observations'",
            [],
        )
        .unwrap();
        add(&c, "p1", 1);
        assert!(ids.get(&c, "observations", "p1").unwrap().is_none());
    }

    fn project_first(c: &Connection, p: &str) -> i64 {
        c.query_row(
            "SELECT min(id) FROM observations WHERE project = ?1",
            [p],
            |r| r.get(0),
        )
        .unwrap()
    }
}
