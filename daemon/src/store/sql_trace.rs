//! Per-statement figures for diagnosis: with `NMEM_SQL_TRACE=1` in nmemd's environment, every
//! statement a connection finishes is logged (target `nmem_daemon::sql`) with SQLite's own
//! counters (virtual-machine steps, full-scan steps, sorts) and its time, and each distinct
//! full-text search statement's `EXPLAIN QUERY PLAN` once ([`explain`]).
//!
//! Why: the machine the daemon is measured on is shared, and wall-clock times swing 2–4× with
//! its load; SQLite's counters do not. They say which statement does the work (a search runs
//! a dozen: the tiers, each table, each candidate cap, the project's row set, the context), so
//! a slow search is explained by numbers that reproduce run after run.
//!
//! The counters of each statement are read and reset when it finishes (`sqlite3_trace_v2`'s
//! profile event), and each thread's total of VM steps is kept ([`thread_steps`]), so a test can
//! compare how much work two searches did. Off (the default) nothing is installed: no cost.

use rusqlite::{ffi, Connection};
use std::cell::Cell;
use std::collections::HashSet;
use std::ffi::{c_int, c_uint, c_void, CStr};
use std::sync::{Mutex, OnceLock};

/// Whether `NMEM_SQL_TRACE` asks for the figures (read once).
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("NMEM_SQL_TRACE").is_ok_and(|v| !v.is_empty() && v != "0"))
}

thread_local! {
    static STEPS: Cell<u64> = const { Cell::new(0) };
    static STATEMENTS: Cell<u64> = const { Cell::new(0) };
}

/// VM steps and statements finished on this thread, by connections with the trace installed,
/// since it started.
pub fn thread_steps() -> (u64, u64) {
    (STEPS.with(Cell::get), STATEMENTS.with(Cell::get))
}

/// Install the per-statement figures on `c` when [`enabled`].
pub fn install(c: &Connection) {
    if enabled() {
        install_always(c);
    }
}

/// Install them regardless of the environment (tests).
pub fn install_always(c: &Connection) {
    // SAFETY: the handle is valid while `c` lives, and the callback is removed with the
    // connection; the callback reads only what SQLite hands it.
    unsafe {
        ffi::sqlite3_trace_v2(
            c.handle(),
            ffi::SQLITE_TRACE_PROFILE as c_uint,
            Some(profile),
            std::ptr::null_mut(),
        );
    }
}

unsafe extern "C" fn profile(
    _code: c_uint,
    _ctx: *mut c_void,
    p: *mut c_void,
    x: *mut c_void,
) -> c_int {
    let stmt = p as *mut ffi::sqlite3_stmt;
    if stmt.is_null() {
        return 0;
    }
    // Read and reset: a cached statement's counters would otherwise add up over its runs.
    let steps = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_VM_STEP, 1);
    let fullscan = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_FULLSCAN_STEP, 1);
    let sorts = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_SORT, 1);
    let ns = if x.is_null() { 0 } else { *(x as *const i64) };
    STEPS.with(|s| s.set(s.get() + steps.max(0) as u64));
    STATEMENTS.with(|s| s.set(s.get() + 1));
    if enabled() {
        let sql = ffi::sqlite3_sql(stmt);
        let sql = if sql.is_null() {
            "?".into()
        } else {
            CStr::from_ptr(sql).to_string_lossy()
        };
        tracing::info!(
            target: "nmem_daemon::sql",
            vm_steps = steps,
            fullscan,
            sorts,
            us = ns / 1000,
            "{}",
            sql.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
    0
}

/// Log `EXPLAIN QUERY PLAN` of `sql` with `args` once per distinct statement, when [`enabled`].
pub fn explain(c: &Connection, sql: &str, args: &[rusqlite::types::Value]) {
    if !enabled() {
        return;
    }
    static SEEN: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    {
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        if !seen
            .get_or_insert_with(HashSet::new)
            .insert(sql.to_string())
        {
            return;
        }
    }
    let plan = c
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .and_then(|mut s| {
            s.query_map(rusqlite::params_from_iter(args), |r| {
                Ok(format!(
                    "{}:{} {}",
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(3)?
                ))
            })?
            .collect::<Result<Vec<_>, _>>()
        });
    match plan {
        Ok(lines) => tracing::info!(target: "nmem_daemon::sql", plan = %lines.join(" | "), "{sql}"),
        Err(e) => tracing::info!(target: "nmem_daemon::sql", "no plan ({e}): {sql}"),
    }
}
