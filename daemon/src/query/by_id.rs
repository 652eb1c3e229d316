//! Reading search candidates by id (the ones the semantic and context sources found, which the
//! lexical queries did not fetch), with the search's filters.
//!
//! Why a module of its own: the filters name indexed columns (`project`, `timestamp`,
//! `obs_type`, `file_path`), and without `ANALYZE` statistics SQLite's planner prefers an index
//! on an equality (`project = ?`) to the id list: it then walks every index entry of the
//! project and tests each against the ids. At 1M observations a one-project search fetching 60
//! ids took 756k VM steps in that statement (84k entries of `idx_obs_project`) against 1k for
//! all projects: this alone made one-project search ~3× the all-project one (ARCHITECTURE.md,
//! "Search at 1M observations"). `NOT INDEXED` forbids every index but still looks rows up by
//! rowid, so the statement costs the ids it is given, whatever the filters.

/// `SELECT {cols}, 0.0 FROM {table} {alias} NOT INDEXED WHERE {alias}.id IN (?, …)` with `n`
/// placeholders; the caller appends its filters (`AND …`) and binds the ids first.
pub fn select(cols: &str, table: &str, alias: &str, n: usize) -> String {
    format!(
        "SELECT {cols}, 0.0 FROM {table} {alias} NOT INDEXED WHERE {alias}.id IN ({})",
        vec!["?"; n].join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::sql_trace;
    use rusqlite::types::Value;
    use rusqlite::Connection;

    /// A real database (every migration) with `per` observations and prompts in each of four
    /// projects, interleaved as sessions of several projects are.
    fn db(per: usize) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let c = crate::store::schema::open_writer(&dir.path().join("nmem.db")).unwrap();
        let tx = c.unchecked_transaction().unwrap();
        for p in ["a", "b", "c", "d"] {
            tx.execute(
                "INSERT INTO sessions (id, harness, project, started_at) VALUES (?1, 'claude-code', ?1, 0)",
                [p],
            )
            .unwrap();
        }
        for i in 0..per * 4 {
            let p = ["a", "b", "c", "d"][i % 4];
            tx.execute(
                "INSERT INTO prompts (session_id, timestamp, source, content, project, harness)
                 VALUES (?1, ?2, 'user', 'why the retry', ?1, 'claude-code')",
                rusqlite::params![p, i as i64],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO observations (session_id, timestamp, obs_type, source_event, content, project, harness)
                 VALUES (?1, ?2, 'command', 'PostToolUse', 'cargo test', ?1, 'claude-code')",
                rusqlite::params![p, i as i64],
            )
            .unwrap();
        }
        // Every third row received from a teammate (`sync_sources`, migration 017).
        tx.execute_batch(
            "INSERT INTO sync_sources (kind, space, device) VALUES ('team', 'acme', 'd1');
             UPDATE observations SET origin = 1 WHERE id % 3 = 0;
             UPDATE prompts SET origin = 1 WHERE id % 3 = 0;",
        )
        .unwrap();
        tx.commit().unwrap();
        (dir, c)
    }

    /// VM steps of one run of `sql`, and its rows.
    fn run(c: &Connection, sql: &str, args: &[Value]) -> (u64, usize) {
        let before = sql_trace::thread_steps().0;
        let rows = {
            let mut s = c.prepare(sql).unwrap();
            let n = s
                .query_map(rusqlite::params_from_iter(args), |_| Ok(()))
                .unwrap()
                .count();
            n
        };
        (sql_trace::thread_steps().0 - before, rows)
    }

    fn plan(c: &Connection, sql: &str, args: &[Value]) -> String {
        let mut s = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        s.query_map(rusqlite::params_from_iter(args), |r| r.get::<_, String>(3))
            .unwrap()
            .map(Result::unwrap)
            .collect::<Vec<_>>()
            .join(" | ")
    }

    /// With any of the search's filters, the rows are looked up by id: the work is the ids',
    /// not the project's (or the time range's) size. The same statement with the indexes
    /// allowed walks the project's index, which is what this guards against.
    #[test]
    fn candidates_are_read_by_id_whatever_the_filters() {
        let (_d, c) = db(2_000);
        sql_trace::install_always(&c);
        let ids: Vec<i64> = (1..=60).map(|i| i * 97).collect();
        for (table, alias) in [("observations", "o"), ("prompts", "p")] {
            use nmem_proto::query::OriginFilter;
            let origins = [
                OriginFilter::ThisDevice,
                OriginFilter::MyDevices,
                OriginFilter::Team,
            ]
            .map(|o| {
                " AND {a}.project = ?".to_string()
                    + &crate::query::search::origin_sql(o, "{a}").unwrap()
            });
            for filters in [
                " AND {a}.project = ?",
                " AND {a}.project = ? AND {a}.timestamp >= ? AND {a}.timestamp <= ?",
                " AND {a}.timestamp >= ?",
            ]
            .iter()
            .copied()
            .chain(origins.iter().map(String::as_str))
            {
                let filters = filters.replace("{a}", alias);
                let mut args: Vec<Value> = ids.iter().map(|&i| Value::Integer(i)).collect();
                if filters.contains("project") {
                    args.push(Value::Text("a".into()));
                }
                if filters.contains(">=") {
                    args.push(Value::Integer(0));
                }
                if filters.contains("<=") {
                    args.push(Value::Integer(i64::MAX));
                }
                let sql = select("id", table, alias, ids.len()) + &filters;
                let p = plan(&c, &sql, &args);
                assert!(
                    p.contains("INTEGER PRIMARY KEY") && !p.contains("INDEX"),
                    "{table}{filters}: {p}"
                );
                let (steps, rows) = run(&c, &sql, &args);
                assert!(
                    rows > 0 && rows <= ids.len(),
                    "{table}{filters}: {rows} rows"
                );
                assert!(
                    steps < 40 * ids.len() as u64 + 200,
                    "{table}{filters}: {steps} VM steps for {} ids",
                    ids.len()
                );
                // The guard is real: with the indexes allowed, the project's index is walked.
                if filters.contains("project") {
                    let old = sql.replace(" NOT INDEXED", "");
                    let (old_steps, old_rows) = run(&c, &old, &args);
                    assert_eq!(old_rows, rows);
                    assert!(old_steps > 5 * steps, "{table}: {old_steps} vs {steps}");
                }
            }
        }
    }
}
