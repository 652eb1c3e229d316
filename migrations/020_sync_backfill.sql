-- Sync backfill (docs/sync.md, "Backfill"): history stored before `nmem sync enable`/`join` (and
-- before a project is shared with a team space) enters the space's stream in batches, through
-- the writer, in the order it was recorded. One row per job: the personal space (`project` '')
-- or one project shared with a team space. `obs_upto`/`prompts_upto` are the last row ids
-- stored when the job began (rows after them are logged by the writer as they are stored); the
-- cursor (`at_time`, `at_kind`, `at_id`: timestamp, 0 prompt / 1 observation, row id) is the
-- last row looked at, moved in the same transaction as the events it logged, so a crash
-- resumes where the last committed batch ended. `done` counts rows looked at, out of `total`.
CREATE TABLE sync_backfill (
    space        TEXT NOT NULL,
    project      TEXT NOT NULL DEFAULT '',
    obs_upto     INTEGER NOT NULL,
    prompts_upto INTEGER NOT NULL,
    at_time      INTEGER,
    at_kind      INTEGER NOT NULL DEFAULT 0,
    at_id        INTEGER NOT NULL DEFAULT 0,
    total        INTEGER NOT NULL,
    done         INTEGER NOT NULL DEFAULT 0,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    PRIMARY KEY (space, project)
) WITHOUT ROWID;
