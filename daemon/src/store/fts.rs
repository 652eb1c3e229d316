//! Deferred full-text indexing.
//!
//! Rows are committed (and acknowledged) without touching the FTS5 indexes: a new FTS segment per
//! small transaction cost as much as the row itself. The writer indexes everything above the
//! watermarks in `fts_state` in bulk as soon as its queue is empty, or every
//! [`INDEX_UNDER_LOAD`] rows under sustained load, and before it stops. Ids are AUTOINCREMENT, so
//! every new row lies above the watermark; the delete and update triggers only touch rows at or
//! below it, the ones the index holds.

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// Rows indexed per transaction, so a long catch-up never holds new events back for long.
pub const CHUNK: i64 = 5_000;
/// Under sustained load, index once this many rows are waiting.
pub const INDEX_UNDER_LOAD: u64 = 20_000;

/// Index up to `CHUNK` waiting rows of each table. Returns how many were indexed.
pub fn index_pending(conn: &mut Connection) -> rusqlite::Result<u64> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut total = 0;
    for (table, mark) in [
        ("observations", "observations_upto"),
        ("prompts", "prompts_upto"),
    ] {
        let upto: i64 = tx.query_row(&format!("SELECT {mark} FROM fts_state"), [], |r| r.get(0))?;
        let bound: Option<i64> = tx
            .query_row(
                &format!("SELECT id FROM {table} WHERE id > ?1 ORDER BY id LIMIT 1 OFFSET ?2"),
                params![upto, CHUNK - 1],
                |r| r.get(0),
            )
            .optional()?;
        let bound = match bound {
            Some(b) => b,
            None => match tx.query_row(
                &format!("SELECT MAX(id) FROM {table} WHERE id > ?1"),
                [upto],
                |r| r.get::<_, Option<i64>>(0),
            )? {
                Some(b) => b,
                None => continue,
            },
        };
        let path = if table == "observations" {
            // A file outside the project has no relative path: its absolute one then.
            "COALESCE(rel_path, file_path)"
        } else {
            "NULL"
        };
        total += tx.execute(
            &format!("INSERT INTO {table}_fts(rowid, content, terms) SELECT id, content, nmem_terms(content, {path}) FROM {table} WHERE id > ?1 AND id <= ?2"),
            params![upto, bound],
        )? as u64;
        tx.execute(&format!("UPDATE fts_state SET {mark} = ?1"), [bound])?;
    }
    tx.commit()?;
    Ok(total)
}

/// Index everything that waits.
pub fn index_all(conn: &mut Connection) -> rusqlite::Result<u64> {
    let mut total = 0;
    loop {
        let n = index_pending(conn)?;
        total += n;
        if n == 0 {
            return Ok(total);
        }
    }
}

/// How many rows wait to be indexed.
pub fn pending(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT (SELECT COUNT(*) FROM observations WHERE id > observations_upto)
              + (SELECT COUNT(*) FROM prompts WHERE id > prompts_upto) FROM fts_state",
        [],
        |r| r.get(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_become_searchable_and_deletes_stay_consistent() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let mut c = crate::store::schema::open_writer(&dir.join("nmem.db")).unwrap();
        c.execute("INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'claude-code', 'p', 0)", []).unwrap();
        let add = |c: &Connection, text: &str| {
            c.execute(
                "INSERT INTO observations (session_id, timestamp, obs_type, source_event, content, project, harness)
                 VALUES ('s', 0, 'command', 'PostToolUse', ?1, 'p', 'claude-code')",
                [text],
            )
            .unwrap();
        };
        let hits = |c: &Connection, q: &str| -> i64 {
            c.query_row(
                "SELECT COUNT(*) FROM observations_fts WHERE observations_fts MATCH ?1",
                [q],
                |r| r.get(0),
            )
            .unwrap()
        };
        add(&c, "cargo build alpha");
        add(&c, "cargo test beta");
        assert_eq!(
            hits(&c, "cargo"),
            0,
            "not indexed before the writer gets to it"
        );
        assert_eq!(pending(&c).unwrap(), 2);
        assert_eq!(index_all(&mut c).unwrap(), 2);
        assert_eq!(hits(&c, "cargo"), 2);
        // A deleted indexed row leaves the index; a deleted unindexed row never entered it.
        add(&c, "cargo run gamma");
        c.execute(
            "DELETE FROM observations WHERE content LIKE '%alpha%' OR content LIKE '%gamma%'",
            [],
        )
        .unwrap();
        c.execute(
            "UPDATE observations SET content = 'npm test beta' WHERE content LIKE '%beta%'",
            [],
        )
        .unwrap();
        index_all(&mut c).unwrap();
        assert_eq!(hits(&c, "cargo"), 0);
        assert_eq!(hits(&c, "npm"), 1);
        c.execute(
            "INSERT INTO observations_fts(observations_fts, rank) VALUES ('integrity-check', 1)",
            [],
        )
        .unwrap();
    }
}
