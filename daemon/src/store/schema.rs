//! Opening the database: PRAGMAs, `auto_vacuum` on a new file, migrations, and refusing a file
//! written by a newer nmem.

use rusqlite::{Connection, OpenFlags};
use rusqlite_migration::{Migrations, M};
use std::path::Path;

const MIGRATION_SQL: &[&str] = &[
    include_str!("../../../migrations/001_initial.sql"),
    include_str!("../../../migrations/002_audit.sql"),
    include_str!("../../../migrations/003_prompt_identity.sql"),
    include_str!("../../../migrations/004_project_lookup.sql"),
    include_str!("../../../migrations/005_hybrid_retrieval.sql"),
];

/// The migrations after 006, plain SQL.
const LATER_SQL: &[&str] = &[
    include_str!("../../../migrations/007_path_terms.sql"),
    include_str!("../../../migrations/008_digest_generation.sql"),
    include_str!("../../../migrations/009_documents.sql"),
    include_str!("../../../migrations/010_knowledge.sql"),
    include_str!("../../../migrations/011_writer_follow_ups.sql"),
    include_str!("../../../migrations/012_knowledge_search.sql"),
    include_str!("../../../migrations/013_sync.sql"),
    include_str!("../../../migrations/014_doc_vectors.sql"),
    include_str!("../../../migrations/015_sync_team.sql"),
    include_str!("../../../migrations/016_sync_ops.sql"),
    include_str!("../../../migrations/017_sync_origin.sql"),
    include_str!("../../../migrations/018_sync_team_streams.sql"),
    include_str!("../../../migrations/019_knowledge_sync.sql"),
    include_str!("../../../migrations/020_sync_backfill.sql"),
    include_str!("../../../migrations/021_sync_received.sql"),
    include_str!("../../../migrations/022_ingest_indexes.sql"),
];

/// The migrations before 006, for tests that build a database as older versions wrote it.
#[cfg(test)]
pub(crate) const OLD_MIGRATION_SQL: &[&str] = MIGRATION_SQL;

/// Migration 006: its SQL, then a Rust step for the data (`store::upgrade`).
const FIDELITY_SQL: &str = include_str!("../../../migrations/006_fidelity.sql");

/// WAL pages after which a commit checkpoints (SQLite's default is 1,000, about 4 MB). Every
/// commit of a few events appends about 15 pages (the table's and each index's last leaf, the
/// counters), mostly the same pages again, so at 1,000 an ingest burst checkpointed every ~80
/// events: two `fsync`s on the writer thread each time, and the same hot pages copied back again
/// and again. At 10,000 (about 40 MB of WAL at most) nmemd spent measurably less CPU per event
/// under `nmem-bench --ingest-only` (ARCHITECTURE.md, "The ingest path"). The cost is disk: after
/// a burst the log file keeps its size (SQLite reuses it from the start) until maintenance
/// (when idle, at most every 6 hours) or shutdown truncates it. The daemon's writer replaces
/// SQLite's automatic checkpoint with its own at the same bound, on its own thread only
/// (`store::writer`: a request that commits its event itself never checkpoints).
pub const WAL_AUTOCHECKPOINT: i64 = 10_000;

/// The schema version this build writes (`PRAGMA user_version` after migrating).
pub const SCHEMA_VERSION: u32 = (MIGRATION_SQL.len() + 1 + LATER_SQL.len()) as u32;

fn migrations() -> Migrations<'static> {
    let mut ms: Vec<M> = MIGRATION_SQL.iter().map(|sql| M::up(sql)).collect();
    ms.push(M::up_with_hook(
        FIDELITY_SQL,
        |tx: &rusqlite::Transaction| {
            super::upgrade::fidelity(tx)?;
            Ok(())
        },
    ));
    ms.extend(LATER_SQL.iter().map(|sql| M::up(sql)));
    Migrations::new(ms)
}

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "{path} was written by a newer nmem (schema version {found}, this build knows up to \
         {known}); it was not modified. Upgrade nmem, or point NMEM_DB at another file."
    )]
    TooNew {
        path: String,
        found: u32,
        known: u32,
    },
    #[error("cannot open the database {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("cannot migrate the database {path}: {source}")]
    Migrate {
        path: String,
        #[source]
        source: rusqlite_migration::Error,
    },
}

/// Open the single write connection, creating and migrating the file as needed.
pub fn open_writer(path: &Path) -> Result<Connection, OpenError> {
    let p = path.display().to_string();
    let sql = |source| OpenError::Sqlite {
        path: p.clone(),
        source,
    };
    // NOFOLLOW: a database path that is a symlink is refused, not followed to another file.
    let flags = OpenFlags::default() | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    // The log's frames of a commit in one write (`walbuf`).
    let mut conn = match super::walbuf::register() {
        Some(vfs) => Connection::open_with_flags_and_vfs(path, flags, vfs),
        None => Connection::open_with_flags(path, flags),
    }
    .map_err(sql)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(sql)?;
    // Refuse a newer file before anything (even the journal mode) is changed.
    let found: u32 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(sql)?;
    if found > SCHEMA_VERSION {
        return Err(OpenError::TooNew {
            path: p,
            found,
            known: SCHEMA_VERSION,
        });
    }
    let pages: i64 = conn
        .pragma_query_value(None, "page_count", |r| r.get(0))
        .map_err(sql)?;
    if pages == 0 {
        // Only takes effect on an empty file, before the first table and before WAL, and not
        // inside a transaction (where migrations run).
        conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")
            .map_err(sql)?;
    }
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(sql)?;
    conn.execute_batch(
        "PRAGMA synchronous = NORMAL;
         PRAGMA temp_store = MEMORY;
         PRAGMA foreign_keys = ON;
         PRAGMA cache_size = -8192;",
    )
    .map_err(sql)?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT)
        .map_err(sql)?;
    // The full-text triggers compute the identifier words of a changed row.
    super::terms::register(&conn).map_err(sql)?;
    super::sql_trace::install(&conn);
    migrations()
        .to_latest(&mut conn)
        .map_err(|source| OpenError::Migrate {
            path: p.clone(),
            source,
        })?;
    Ok(conn)
}

/// A read-only connection for queries.
pub fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch(&format!(
        "PRAGMA temp_store = MEMORY; PRAGMA cache_size = -{};",
        super::readers::QUERY_CACHE_KIB
    ))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database path in a fresh temporary folder, removed when the guard drops.
    fn temp_db() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("nmem.db");
        (dir, db)
    }

    #[test]
    fn migrations_are_valid() {
        migrations().validate().unwrap();
    }

    #[test]
    fn new_file_gets_incremental_vacuum_and_wal() {
        let (_dir, db) = temp_db();
        let conn = open_writer(&db).unwrap();
        let av: i64 = conn
            .pragma_query_value(None, "auto_vacuum", |r| r.get(0))
            .unwrap();
        assert_eq!(av, 2, "auto_vacuum must be INCREMENTAL (2)");
        let jm: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        assert_eq!(jm, "wal");
        let v: u32 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        drop(conn);
        // Reopening an existing file is fine and changes nothing.
        open_writer(&db).unwrap();
    }

    /// An ingest burst is not checkpointed every 1,000 pages (SQLite's default, two `fsync`s on
    /// the writer each time): the log keeps growing up to [`WAL_AUTOCHECKPOINT`] pages.
    #[test]
    fn the_writer_checkpoints_only_past_its_wal_bound() {
        let (_dir, db) = temp_db();
        let conn = open_writer(&db).unwrap();
        conn.execute_batch("CREATE TABLE burst(x TEXT)").unwrap();
        // One commit per row, each at least one page in the log: past SQLite's default bound.
        for i in 0..1_500 {
            conn.execute("INSERT INTO burst VALUES (?1)", [format!("row {i}")])
                .unwrap();
        }
        let (_, log, _): (i64, i64, i64) = conn
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .unwrap();
        assert!(
            (1_500..WAL_AUTOCHECKPOINT).contains(&log),
            "{log} frames in the log: it was checkpointed before its bound"
        );
    }

    /// A file written before 007 is migrated once: sessions gain `worktree` and `branch`, and
    /// the observations index is rebuilt with the paths of files outside the project.
    #[test]
    fn a_file_from_before_007_is_reindexed_with_paths() {
        let (_dir, db) = temp_db();
        {
            let mut c = Connection::open(&db).unwrap();
            super::super::terms::register(&c).unwrap();
            Migrations::new(MIGRATION_SQL[..5].iter().map(|sql| M::up(sql)).collect())
                .to_latest(&mut c)
                .unwrap();
            c.execute_batch(
                "INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'claude-code', 'p', 0);
                 INSERT INTO observations (session_id, timestamp, obs_type, source_event, file_path, content, project, harness)
                 VALUES ('s', 0, 'tool_error', 'PostToolUseFailure', '/elsewhere/deps/requirements.txt', 'Read: File does not exist.', 'p', 'claude-code');",
            )
            .unwrap();
            super::super::fts::index_all(&mut c).unwrap();
        }
        let mut c = open_writer(&db).unwrap();
        let upto: i64 = c
            .query_row("SELECT observations_upto FROM fts_state", [], |r| r.get(0))
            .unwrap();
        assert_eq!(upto, 0, "the index is rebuilt");
        super::super::fts::index_all(&mut c).unwrap();
        let hits: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM observations_fts WHERE observations_fts MATCH '\"requirements txt\"'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(hits, 1);
        c.execute("UPDATE sessions SET worktree = '/w', branch = 'main'", [])
            .unwrap();
    }

    /// A file as the build whose last migration was `LATER_SQL[later - 1]` wrote it.
    fn migrated_up_to(db: &Path, later: usize) -> Connection {
        let mut c = Connection::open(db).unwrap();
        super::super::terms::register(&c).unwrap();
        let mut ms: Vec<M> = MIGRATION_SQL.iter().map(|sql| M::up(sql)).collect();
        ms.push(M::up_with_hook(
            FIDELITY_SQL,
            |tx: &rusqlite::Transaction| {
                super::super::upgrade::fidelity(tx)?;
                Ok(())
            },
        ));
        ms.extend(LATER_SQL[..later].iter().map(|sql| M::up(sql)));
        Migrations::new(ms).to_latest(&mut c).unwrap();
        c
    }

    /// Where a migration is in `LATER_SQL`, by its file's first line.
    fn later_index(first_line: &str) -> usize {
        LATER_SQL
            .iter()
            .position(|s| s.starts_with(first_line))
            .unwrap()
    }

    /// Memories saved before the knowledge tables existed become notes when the file is
    /// upgraded, a malformed metadata column included.
    #[test]
    fn memories_from_before_knowledge_become_notes() {
        let (_dir, db) = temp_db();
        {
            let c = migrated_up_to(&db, later_index("-- Governed knowledge"));
            c.execute_batch(
                "INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'nmem', 'p', 0);
                 INSERT INTO observations (id, session_id, timestamp, obs_type, source_event, content, metadata, project, harness) VALUES
                   (1, 's', 5, 'memory', 'save_memory', 'Retry policy\nbackoff, max 5', '{\"title\":\"Retry policy\"}', 'p', 'nmem'),
                   (2, 's', 6, 'memory', 'save_memory', 'Node 20 only', 'not json', 'p', 'nmem'),
                   (3, 's', 7, 'command', 'PostToolUse', 'npm test', NULL, 'p', 'claude-code');",
            )
            .unwrap();
        }
        let c = open_writer(&db).unwrap();
        let notes: Vec<(i64, String, String)> = c
            .prepare(
                "SELECT obs_id, title, status FROM knowledge WHERE kind = 'note' ORDER BY obs_id",
            )
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(
            notes,
            [
                (1, "Retry policy".to_string(), "active".to_string()),
                (2, "Node 20 only".to_string(), "active".to_string())
            ]
        );
    }

    /// A file written with the insert triggers of 008 and 010 loses them when upgraded (their
    /// work is the writer's now, `store::follow`), keeps every row, and keeps the update and
    /// delete triggers.
    #[test]
    fn a_file_from_010_loses_its_insert_triggers_and_nothing_else() {
        let (_dir, db) = temp_db();
        let triggers = |c: &Connection| -> Vec<String> {
            c.prepare("SELECT name FROM sqlite_master WHERE type = 'trigger' ORDER BY name")
                .unwrap()
                .query_map([], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        let before = {
            // The file as the version before 011 wrote it.
            let c = migrated_up_to(
                &db,
                later_index("-- The AFTER INSERT triggers of migrations 008 and 010"),
            );
            c.execute_batch(
                "INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'nmem', 'p', 0);
                 INSERT INTO observations (id, session_id, timestamp, obs_type, source_event, content, project, harness) VALUES
                   (1, 's', 5, 'memory', 'save_memory', 'Retry policy: backoff, max 5', 'p', 'nmem');",
            )
            .unwrap();
            triggers(&c)
        };
        for t in [
            "digest_gen_obs_ai",
            "knowledge_note_ai",
            "knowledge_stale_on_edit",
        ] {
            assert!(before.contains(&t.to_string()), "{t} in {before:?}");
        }
        let c = open_writer(&db).unwrap();
        let after = triggers(&c);
        let gone = [
            "digest_gen_obs_ai",
            "digest_gen_prompts_ai",
            "knowledge_note_ai",
            "knowledge_stale_on_edit",
        ];
        // Every other trigger stays (later migrations may add their own).
        for t in before.iter().filter(|t| !gone.contains(&t.as_str())) {
            assert!(after.contains(t), "{t} kept in {after:?}");
        }
        for t in gone {
            assert!(!after.iter().any(|a| a == t), "{t} dropped, in {after:?}");
        }
        assert!(after.contains(&"digest_gen_obs_au".to_string()));
        // The note the trigger made before the upgrade is still there.
        let notes: i64 = c
            .query_row("SELECT COUNT(*) FROM knowledge WHERE obs_id = 1", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(notes, 1);
        let v: u32 = c
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
    }

    /// Knowledge written before its full-text table existed is searchable after the upgrade,
    /// and the triggers keep the table in step with later writes.
    #[test]
    fn knowledge_from_before_its_index_is_indexed_on_upgrade() {
        let (_dir, db) = temp_db();
        {
            // Before 011, so the insert trigger of 010 still makes the memory's note.
            let c = migrated_up_to(
                &db,
                later_index("-- The AFTER INSERT triggers of migrations 008 and 010"),
            );
            c.execute_batch(
                "INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'nmem', 'p', 0);
                 INSERT INTO observations (id, session_id, timestamp, obs_type, source_event, content, project, harness) VALUES
                   (1, 's', 5, 'memory', 'save_memory', 'Webhooks are retried with exponential backoff', 'p', 'nmem');
                 INSERT INTO knowledge (class, kind, project, scope, title, summary, reason, memory_source, status, subject, predicate, value, created_at, updated_at)
                   VALUES ('knowledge', 'fact', 'p', 'project', 'Invoice numbering', 'Invoices are numbered per tenant', 'seen in billing', 'user_declared', 'active', 'invoices', 'numbering', '\"sequential\"', 1, 1);",
            )
            .unwrap();
        }
        let c = open_writer(&db).unwrap();
        let find = |c: &Connection, q: &str| -> Vec<i64> {
            c.prepare("SELECT rowid FROM knowledge_fts WHERE knowledge_fts MATCH ?1 ORDER BY rowid")
                .unwrap()
                .query_map([q], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        // Both the note (from 010's own backfill) and the item are found, by any column.
        assert_eq!(find(&c, "backoff").len(), 1);
        assert_eq!(find(&c, "tenant").len(), 1);
        assert_eq!(find(&c, "numbering").len(), 1);
        assert_eq!(find(&c, "sequential").len(), 1);
        // Rewritten, the old words go and the new come; deleted, nothing is left.
        c.execute(
            "UPDATE knowledge SET summary = 'Invoices are numbered globally' WHERE kind = 'fact'",
            [],
        )
        .unwrap();
        assert!(find(&c, "tenant").is_empty());
        assert_eq!(find(&c, "globally").len(), 1);
        c.execute("DELETE FROM observations WHERE id = 1", [])
            .unwrap();
        assert!(find(&c, "backoff").is_empty());
        c.execute(
            "INSERT INTO knowledge_fts (knowledge_fts) VALUES ('integrity-check')",
            [],
        )
        .unwrap();
    }

    /// Rows received through sync before migration 017 get their origin on upgrade: a device of
    /// the personal space is one of mine, a team space's other device a teammate's, thoughts
    /// through their envelopes; rows captured here stay NULL.
    #[test]
    fn rows_received_before_017_get_their_origin() {
        let (_dir, db) = temp_db();
        {
            let c = migrated_up_to(&db, later_index("-- Where each row was captured"));
            c.execute_batch(
                "INSERT INTO sync_spaces (space, kind, key_id, role, created_at) VALUES
                   ('me', 'personal', 'k1', 'owner', 0), ('acme', 'team', 'k2', 'member', 0);
                 INSERT INTO sync_cursors (space, device, seq) VALUES
                   ('me', 'laptop', 3), ('acme', 'laptop', 1), ('acme', 'mate', 2);
                 INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'claude-code', 'p', 0);
                 INSERT INTO observations (session_id, timestamp, obs_type, source_event, content, project, harness, event_id) VALUES
                   ('s', 1, 'command', 'PostToolUse', 'here', 'p', 'claude-code', 'e-here'),
                   ('s', 2, 'command', 'PostToolUse', 'laptop', 'p', 'claude-code', 'e-laptop'),
                   ('s', 3, 'git_commit', 'PostToolUse', 'mate', 'p', 'claude-code', 'e-mate');
                 INSERT INTO prompts (session_id, timestamp, source, content, project, harness, event_id) VALUES
                   ('s', 4, 'agent', 'a thought of the laptop', 'p', 'claude-code', 't:m1:0'),
                   ('s', 5, 'user', 'mine', 'p', 'claude-code', 'p-here');
                 INSERT INTO sync_origin (event_id, device, seq) VALUES
                   ('e-laptop', 'laptop', 1), ('e-mate', 'mate', 1);
                 INSERT INTO sync_inbound (event_id, device, seq, envelope) VALUES
                   ('e-laptop', 'laptop', 1, CAST('{\"v\":1,\"thoughts\":[{\"uid\":\"t:m1:0\",\"timestamp\":4,\"content\":\"x\"}]}' AS BLOB)),
                   ('e-mate', 'mate', 1, CAST('{\"v\":1}' AS BLOB));",
            )
            .unwrap();
        }
        use rusqlite::OptionalExtension;
        let c = open_writer(&db).unwrap();
        let origin = |table: &str, id: &str| -> Option<(String, String, String)> {
            c.query_row(
                &format!(
                    "SELECT s.kind, s.space, s.device FROM {table} t JOIN sync_sources s ON s.id = t.origin
                     WHERE t.event_id = ?1"
                ),
                [id],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()
            .unwrap()
        };
        let of = |k: &str, s: &str, d: &str| Some((k.into(), s.into(), d.into()));
        assert_eq!(origin("observations", "e-here"), None);
        assert_eq!(origin("prompts", "p-here"), None);
        assert_eq!(
            origin("observations", "e-laptop"),
            of("my-devices", "me", "laptop")
        );
        assert_eq!(origin("observations", "e-mate"), of("team", "acme", "mate"));
        assert_eq!(
            origin("prompts", "t:m1:0"),
            of("my-devices", "me", "laptop")
        );
    }

    /// Rows received before migration 021 are listed for `sync verify` where their space is
    /// known: a teammate's through its team space, a device of mine through the personal space
    /// unless a team space was pulled from it too.
    #[test]
    fn rows_received_before_021_are_listed_where_their_space_is_known() {
        let (_dir, db) = temp_db();
        {
            let c = migrated_up_to(&db, later_index("-- `nmem sync verify` for every space"));
            c.execute_batch(
                "INSERT INTO sync_spaces (space, kind, key_id, role, created_at) VALUES
                   ('me', 'personal', 'k1', 'owner', 0), ('acme', 'team', 'k2', 'member', 0);
                 INSERT INTO sync_sources (kind, space, device) VALUES
                   ('my-devices', 'me', 'laptop'), ('my-devices', 'me', 'desk'),
                   ('team', 'acme', 'mate');
                 INSERT INTO sync_cursors (space, device, seq) VALUES
                   ('me', 'laptop', 2), ('me', 'desk', 1), ('acme', 'desk', 1), ('acme', 'mate', 1);
                 INSERT INTO sync_origin (event_id, device, seq) VALUES
                   ('e-laptop', 'laptop', 2), ('e-mate', 'mate', 1), ('e-desk', 'desk', 1);",
            )
            .unwrap();
        }
        let c = open_writer(&db).unwrap();
        type Received = (String, String, i64, Option<String>, Option<String>);
        let rows: Vec<Received> = c
            .prepare(
                "SELECT s.space, s.device, r.seq, r.event_id, r.server_id
                   FROM sync_received r JOIN sync_streams s ON s.id = r.stream
                  ORDER BY s.space, s.device",
            )
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        let row = |space: &str, device: &str, seq: i64, id: &str| {
            (
                space.to_string(),
                device.to_string(),
                seq,
                Some(id.to_string()),
                None,
            )
        };
        assert_eq!(
            rows,
            [
                row("acme", "mate", 1, "e-mate"),
                row("me", "laptop", 2, "e-laptop")
            ]
        );
    }

    /// What migration 017 costs on a large file: prints the time to upgrade a file of 1M
    /// observations (and 250k prompts) of which 100k were received through sync, 10k of those
    /// with a thought. `cargo test --release -p nmem-daemon --lib origin_migration_at_1m --
    /// --ignored --nocapture`.
    #[test]
    #[ignore]
    fn origin_migration_at_1m_rows() {
        let (_dir, db) = temp_db();
        let (obs, prompts, received) = (1_000_000, 250_000, 100_000);
        {
            let mut c = migrated_up_to(&db, later_index("-- Where each row was captured"));
            let t = std::time::Instant::now();
            let tx = c.transaction().unwrap();
            tx.execute_batch(
                "INSERT INTO sync_spaces (space, kind, key_id, role, created_at) VALUES ('me', 'personal', 'k', 'owner', 0);
                 INSERT INTO sync_cursors (space, device, seq) VALUES ('me', 'laptop', 100000);
                 INSERT INTO sessions (id, harness, project, started_at) VALUES ('s', 'claude-code', 'p', 0);",
            )
            .unwrap();
            {
                let mut o = tx
                    .prepare(
                        "INSERT INTO observations (session_id, timestamp, obs_type, source_event, content, project, harness, event_id)
                         VALUES ('s', ?1, 'command', 'PostToolUse', 'cargo test --release', 'p', 'claude-code', ?2)",
                    )
                    .unwrap();
                let mut p = tx
                    .prepare(
                        "INSERT INTO prompts (session_id, timestamp, source, content, project, harness, event_id)
                         VALUES ('s', ?1, 'user', 'why does the retry loop', 'p', 'claude-code', ?2)",
                    )
                    .unwrap();
                let mut g = tx
                    .prepare(
                        "INSERT INTO sync_origin (event_id, device, seq) VALUES (?1, 'laptop', ?2)",
                    )
                    .unwrap();
                let mut i = tx
                    .prepare("INSERT INTO sync_inbound (event_id, device, seq, envelope) VALUES (?1, 'laptop', ?2, ?3)")
                    .unwrap();
                let envelope = format!("{{\"v\":1,\"content\":\"{}\"}}", "x".repeat(900));
                for n in 0..obs {
                    let id = format!("e-{n}");
                    o.execute(rusqlite::params![n, id]).unwrap();
                    if n % 10 == 0 {
                        g.execute(rusqlite::params![id, n]).unwrap();
                        let env = if n % 100 == 0 {
                            p.execute(rusqlite::params![n, format!("t:{n}:0")]).unwrap();
                            format!(
                                "{{\"v\":1,\"thoughts\":[{{\"uid\":\"t:{n}:0\",\"timestamp\":1,\"content\":\"y\"}}]}}"
                            )
                        } else {
                            envelope.clone()
                        };
                        i.execute(rusqlite::params![id, n, env.into_bytes()])
                            .unwrap();
                    }
                }
                for n in 0..prompts - received / 10 {
                    p.execute(rusqlite::params![n, format!("p-{n}")]).unwrap();
                }
            }
            tx.commit().unwrap();
            eprintln!("filled in {:.1} s", t.elapsed().as_secs_f64());
        }
        let t = std::time::Instant::now();
        let c = open_writer(&db).unwrap();
        eprintln!(
            "migration 017 on {obs} observations, {prompts} prompts, {received} received: {:.2} s",
            t.elapsed().as_secs_f64()
        );
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM observations WHERE origin IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, received);
        let n: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM prompts WHERE origin IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(n, received / 10);
    }

    #[test]
    fn newer_file_is_refused_untouched() {
        let (_dir, db) = temp_db();
        {
            let c = Connection::open(&db).unwrap();
            c.execute_batch("CREATE TABLE t(x); PRAGMA user_version = 99;")
                .unwrap();
        }
        let before = std::fs::read(&db).unwrap();
        let err = open_writer(&db).unwrap_err();
        assert!(matches!(err, OpenError::TooNew { found: 99, .. }), "{err}");
        assert!(err.to_string().contains("newer nmem"));
        assert_eq!(std::fs::read(&db).unwrap(), before);
    }
}
