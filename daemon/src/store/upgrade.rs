//! The Rust step of migration 006 (capture fidelity): rows stored by earlier versions are brought
//! to what this version would have stored, once, inside the migration's transaction.
//!
//! * declined tool calls stored as `command_error`/`tool_error` become `tool_rejected`;
//! * a `session_compact` row right after the `compaction` row of the same compaction goes;
//! * turn and subagent ends without content (`turn ended`, `subagent … finished`, Cursor's bare
//!   `completed`) go, counted first on their session (`turns`, `subagents`);
//! * terminal control sequences are stripped from observations (content and metadata) and
//!   prompts.
//!
//! Rows deleted or changed leave the full-text index and their vectors through the triggers of
//! migrations 001/005 (a changed row is re-indexed at once, its vector queued again), so the index
//! holds exactly the new text without a full rebuild. Redactions already stored stay as they are:
//! the originals are gone. Progress is logged step by step.

use rusqlite::functions::FunctionFlags;
use rusqlite::{Connection, Transaction};

/// What the upgrade changed, for the log and the tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Upgraded {
    pub rejections: usize,
    pub compactions: usize,
    pub lifecycle: usize,
    pub cleaned: usize,
}

/// Run the data steps of migration 006.
pub fn fidelity(tx: &Transaction) -> rusqlite::Result<Upgraded> {
    register(tx)?;
    let mut up = Upgraded::default();
    tracing::info!("upgrading stored memory (migration 006), step 1/4: declined tool calls");
    up.rejections = tx.execute(
        "UPDATE observations SET obs_type = 'tool_rejected'
         WHERE obs_type IN ('command_error', 'tool_error')
           AND (nmem_is_rejection(content) OR nmem_is_rejection(COALESCE(metadata, '')))",
        [],
    )?;
    tracing::info!(
        reclassified = up.rejections,
        "migration 006, step 2/4: second rows of compactions"
    );
    up.compactions = tx.execute(
        "DELETE FROM observations WHERE obs_type = 'session_compact' AND (
           SELECT o2.obs_type FROM observations o2
           WHERE o2.session_id = observations.session_id
             AND o2.obs_type IN ('compaction', 'session_compact')
             AND (o2.timestamp < observations.timestamp
                  OR (o2.timestamp = observations.timestamp AND o2.id < observations.id))
           ORDER BY o2.timestamp DESC, o2.id DESC LIMIT 1) = 'compaction'",
        [],
    )?;
    tracing::info!(
        removed = up.compactions,
        "migration 006, step 3/4: turn and subagent ends without content become counters"
    );
    tx.execute_batch(
        "UPDATE sessions SET
           turns = (SELECT COUNT(*) FROM observations o
                    WHERE o.session_id = sessions.id AND o.obs_type = 'turn_end'),
           subagents = (SELECT COUNT(*) FROM observations o
                        WHERE o.session_id = sessions.id AND o.obs_type = 'subagent_end');",
    )?;
    up.lifecycle = tx.execute(
        "DELETE FROM observations WHERE
           (obs_type = 'turn_end' AND (TRIM(content) IN ('', 'turn ended')
              OR (harness = 'cursor' AND content IN ('completed', 'aborted', 'error'))))
           OR (obs_type = 'subagent_end' AND content GLOB 'subagent * finished'
               AND content NOT GLOB '*[\n]*' AND LENGTH(content) <= 80)
           OR (obs_type = 'subagent_end' AND content = 'subagent  finished')",
        [],
    )?;
    tracing::info!(
        removed = up.lifecycle,
        "migration 006, step 4/4: terminal control sequences"
    );
    up.cleaned = tx.execute(
        "UPDATE observations SET content = nmem_strip_controls(content)
         WHERE nmem_needs_cleaning(content)",
        [],
    )?;
    up.cleaned += tx.execute(
        "UPDATE observations SET metadata = nmem_strip_controls_json(metadata)
         WHERE metadata IS NOT NULL AND metadata GLOB '*\\u00[01]*'
           AND nmem_strip_controls_json(metadata) IS NOT metadata",
        [],
    )?;
    up.cleaned += tx.execute(
        "UPDATE prompts SET content = nmem_strip_controls(content)
         WHERE nmem_needs_cleaning(content)",
        [],
    )?;
    tracing::info!(
        rejections = up.rejections,
        compactions = up.compactions,
        lifecycle = up.lifecycle,
        cleaned = up.cleaned,
        "migration 006 done"
    );
    Ok(up)
}

/// The SQL functions the upgrade needs, on its own connection only.
fn register(conn: &Connection) -> rusqlite::Result<()> {
    // The update triggers re-index changed rows with it (registered again here for a
    // connection that did not, such as `Migrations::validate`'s).
    super::terms::register(conn)?;
    let flags = FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC;
    conn.create_scalar_function("nmem_is_rejection", 1, flags, |ctx| {
        let s: Option<String> = ctx.get(0)?;
        Ok(s.is_some_and(|s| crate::ingest::is_rejection_text(&s)))
    })?;
    conn.create_scalar_function("nmem_needs_cleaning", 1, flags, |ctx| {
        let s: Option<String> = ctx.get(0)?;
        Ok(s.is_some_and(|s| crate::ingest::needs_cleaning(&s)))
    })?;
    conn.create_scalar_function("nmem_strip_controls", 1, flags, |ctx| {
        let s: Option<String> = ctx.get(0)?;
        Ok(s.map(|s| crate::ingest::strip_controls(&s).into_owned()))
    })?;
    // Metadata is JSON: control characters are escaped there (`\u001b`), so it is parsed,
    // cleaned and written back; anything that does not parse is kept as it was.
    conn.create_scalar_function("nmem_strip_controls_json", 1, flags, |ctx| {
        let s: Option<String> = ctx.get(0)?;
        Ok(
            s.map(|s| match serde_json::from_str::<serde_json::Value>(&s) {
                Ok(mut v) => {
                    let before = v.clone();
                    crate::ingest::strip_controls_json(&mut v);
                    if v == before {
                        s
                    } else {
                        v.to_string()
                    }
                }
                Err(_) => s,
            }),
        )
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::schema;
    use rusqlite::Connection;
    use rusqlite_migration::{Migrations, M};

    /// A database as nmem wrote it before this migration: schema 5, rows of each kind the
    /// upgrade must change, indexed.
    fn old_database(path: &std::path::Path) {
        let mut c = Connection::open(path).unwrap();
        super::super::terms::register(&c).unwrap();
        Migrations::new(schema::OLD_MIGRATION_SQL.iter().map(|s| M::up(s)).collect())
            .to_latest(&mut c)
            .unwrap();
        let esc = '\u{1b}';
        c.execute_batch(&format!(
            "INSERT INTO sessions (id, harness, project, started_at) VALUES ('s1', 'claude-code', 'acme-api', 1), ('s2', 'cursor', 'acme-api', 1);
             INSERT INTO observations (session_id, timestamp, obs_type, source_event, content, metadata, project, harness, event_id) VALUES
               ('s1', 10, 'command_error', 'PostToolUseFailure', 'git push --force origin main
The user doesn''t want to proceed with this tool use. The tool use was rejected', NULL, 'acme-api', 'claude-code', 'e1'),
               ('s1', 20, 'command_error', 'PostToolUseFailure', 'cargo build
{esc}[91merror[E0308]{esc}[0m: mismatched types', '{{\"output\":\"\\u001b[91merror\\u001b[0m: mismatched\"}}', 'acme-api', 'claude-code', 'e2'),
               ('s1', 30, 'turn_end', 'Stop', 'turn ended', NULL, 'acme-api', 'claude-code', 'e3'),
               ('s1', 31, 'turn_end', 'Stop', 'Decision: skip the cursor row', NULL, 'acme-api', 'claude-code', 'e4'),
               ('s1', 32, 'subagent_end', 'SubagentStop', 'subagent  finished', NULL, 'acme-api', 'claude-code', 'e5'),
               ('s1', 33, 'subagent_end', 'SubagentStop', 'subagent Explore finished', NULL, 'acme-api', 'claude-code', 'e6'),
               ('s1', 40, 'compaction', 'PreCompact', 'compaction (auto)', NULL, 'acme-api', 'claude-code', 'e7'),
               ('s1', 41, 'session_compact', 'SessionStart', 'compact', NULL, 'acme-api', 'claude-code', 'e8'),
               ('s1', 50, 'session_compact', 'SessionStart', 'compact', NULL, 'acme-api', 'claude-code', 'e9'),
               ('s2', 60, 'turn_end', 'stop', 'completed', NULL, 'acme-api', 'cursor', 'e10'),
               ('s1', 70, 'command_error', 'PostToolUseFailure', 'npm test
FAIL src/a.test.ts', NULL, 'acme-api', 'claude-code', 'e11');
             INSERT INTO prompts (session_id, timestamp, source, content, project, harness, event_id) VALUES
               ('s1', 5, 'user', 'why is it {esc}[1mbold{esc}[0m', 'acme-api', 'claude-code', 'p1');"
        ))
        .unwrap();
        super::super::fts::index_all(&mut c).unwrap();
    }

    #[test]
    fn an_old_database_is_upgraded_once() {
        // Removed with everything in it when the test ends, passed or not.
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let db = dir.join("nmem.db");
        old_database(&db);
        let mut c = schema::open_writer(&db).unwrap();
        // Later migrations (007) may reset the index's watermarks: let the writer's catch-up run.
        super::super::fts::index_all(&mut c).unwrap();
        let types: Vec<(String, String)> = c
            .prepare("SELECT event_id, obs_type FROM observations ORDER BY id")
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<(String, String)> = [
            ("e1", "tool_rejected"),
            ("e2", "command_error"),
            ("e4", "turn_end"),
            ("e7", "compaction"),
            ("e9", "session_compact"),
            ("e11", "command_error"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(types, want);
        let (content, meta): (String, String) = c
            .query_row(
                "SELECT content, metadata FROM observations WHERE event_id = 'e2'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(content, "cargo build\nerror[E0308]: mismatched types");
        assert_eq!(meta, r#"{"output":"error: mismatched"}"#);
        let prompt: String = c
            .query_row("SELECT content FROM prompts", [], |r| r.get(0))
            .unwrap();
        assert_eq!(prompt, "why is it bold");
        assert_eq!(counters(&c, "s1"), (2, 2));
        assert_eq!(counters(&c, "s2"), (1, 0));
        // The full-text index holds the new text, and nothing of the rows that went.
        let fts = |q: &str| -> i64 {
            c.query_row(
                "SELECT COUNT(*) FROM observations_fts WHERE observations_fts MATCH ?1",
                [q],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(fts("mismatched"), 1);
        assert_eq!(fts("\"91merror\""), 0);
        assert_eq!(fts("ended"), 0);
        assert_eq!(fts("rejected"), 1);
        drop(c);
        // Once: opening it again changes nothing.
        let c = schema::open_writer(&db).unwrap();
        let n: i64 = c
            .query_row("SELECT COUNT(*) FROM observations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, 6);
        assert_eq!(counters(&c, "s1"), (2, 2), "counted once, not again");
        drop(c);
    }

    /// For tests: the per-session counters.
    fn counters(conn: &Connection, session: &str) -> (i64, i64) {
        conn.query_row(
            "SELECT turns, subagents FROM sessions WHERE id = ?1",
            [session],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
    }
}
