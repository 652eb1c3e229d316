-- nmem schema, version 1: ADR-001 plus what DESIGN.md §3 adds.
-- Timestamps are Unix milliseconds: a session is ordered by (timestamp, id), and a spooled event
-- keeps its original receive time while getting a later id. Ids are AUTOINCREMENT: an id a user
-- was shown never comes back as another record after a purge.
--
-- Full-text indexing is deferred: the writer commits rows first (and acknowledges them), then
-- indexes everything above fts_state's watermarks in bulk as soon as it is idle, or every few
-- thousand rows under sustained load. The delete and update triggers only touch rows at or below
-- the watermark, the ones the index holds.
-- auto_vacuum and WAL are set by the daemon before this runs (they cannot be set in a transaction).

CREATE TABLE sessions (
    id              TEXT PRIMARY KEY,           -- the harness's session id (validated charset)
    harness         TEXT NOT NULL,              -- claude-code | codex | gemini | cursor
    project         TEXT NOT NULL,              -- basename of the git root, else of the cwd
    project_root    TEXT,                       -- that root's full path
    cwd             TEXT,
    started_at      INTEGER NOT NULL,
    ended_at        INTEGER,                    -- set by SessionEnd
    end_reason      TEXT,
    start_source    TEXT,                       -- startup | resume | clear | compact | fork (first start)
    last_source     TEXT,                       -- the most recent start's source
    model           TEXT,
    title           TEXT,
    compactions     INTEGER NOT NULL DEFAULT 0,
    signature       TEXT,                       -- JSON: count of each obs_type, at SessionEnd or Stop
    summary         TEXT,
    transcript_path TEXT,
    transcript_offset INTEGER NOT NULL DEFAULT 0 -- bytes of the transcript already read for reasoning
) STRICT;

CREATE INDEX idx_sessions_project ON sessions(project, started_at);

CREATE TABLE prompts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id  TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    timestamp   INTEGER NOT NULL,
    source      TEXT NOT NULL CHECK (source IN ('user', 'agent')),
    content     TEXT NOT NULL,                 -- truncated and redacted
    project     TEXT NOT NULL,
    harness     TEXT NOT NULL,
    event_id    TEXT UNIQUE,                   -- makes a replay idempotent
    prompt_uid  TEXT,                          -- the harness's own prompt id, when it sends one
    is_pinned   INTEGER NOT NULL DEFAULT 0,
    redacted    INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX idx_prompts_session ON prompts(session_id, timestamp, id);
CREATE INDEX idx_prompts_project ON prompts(project, timestamp);
CREATE INDEX idx_prompts_time ON prompts(timestamp);

CREATE TABLE observations (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id   TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    prompt_id    INTEGER REFERENCES prompts(id) ON DELETE SET NULL,
    timestamp    INTEGER NOT NULL,
    obs_type     TEXT NOT NULL,
    source_event TEXT NOT NULL,                -- the harness's event name
    tool_name    TEXT,
    file_path    TEXT,                         -- absolute
    rel_path     TEXT,                         -- relative to project_root, when inside it
    content      TEXT NOT NULL,                -- what FTS indexes
    metadata     TEXT,                         -- JSON
    project      TEXT NOT NULL,
    project_root TEXT,
    harness      TEXT NOT NULL,
    event_id     TEXT UNIQUE,
    tool_use_id  TEXT,
    is_pinned    INTEGER NOT NULL DEFAULT 0,
    redacted     INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX idx_obs_session ON observations(session_id, timestamp, id);
CREATE INDEX idx_obs_project ON observations(project, timestamp);
CREATE INDEX idx_obs_time ON observations(timestamp);
CREATE INDEX idx_obs_prompt ON observations(prompt_id);
CREATE INDEX idx_obs_project_type ON observations(project, obs_type, timestamp);
CREATE INDEX idx_obs_file ON observations(file_path) WHERE file_path IS NOT NULL;
CREATE INDEX idx_obs_pinned ON observations(project, timestamp) WHERE is_pinned = 1;
-- The same hook wired twice (plugin and settings) delivers one tool call twice: store it once.
CREATE UNIQUE INDEX idx_obs_tool_use ON observations(session_id, source_event, tool_use_id)
    WHERE tool_use_id IS NOT NULL;

CREATE VIRTUAL TABLE observations_fts USING fts5(
    content,
    content='observations',
    content_rowid='id',
    tokenize='porter unicode61'
);

CREATE TABLE fts_state (
    id                INTEGER PRIMARY KEY CHECK (id = 1),
    observations_upto INTEGER NOT NULL,        -- observations with id <= this are indexed
    prompts_upto      INTEGER NOT NULL
) STRICT;
INSERT INTO fts_state VALUES (1, 0, 0);

CREATE TRIGGER observations_ad AFTER DELETE ON observations
WHEN old.id <= (SELECT observations_upto FROM fts_state) BEGIN
    INSERT INTO observations_fts(observations_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER observations_au AFTER UPDATE OF content ON observations
WHEN old.id <= (SELECT observations_upto FROM fts_state) BEGIN
    INSERT INTO observations_fts(observations_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO observations_fts(rowid, content) VALUES (new.id, new.content);
END;

CREATE VIRTUAL TABLE prompts_fts USING fts5(
    content,
    content='prompts',
    content_rowid='id',
    tokenize='porter unicode61'
);

CREATE TRIGGER prompts_ad AFTER DELETE ON prompts
WHEN old.id <= (SELECT prompts_upto FROM fts_state) BEGIN
    INSERT INTO prompts_fts(prompts_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
END;

CREATE TRIGGER prompts_au AFTER UPDATE OF content ON prompts
WHEN old.id <= (SELECT prompts_upto FROM fts_state) BEGIN
    INSERT INTO prompts_fts(prompts_fts, rowid, content)
        VALUES ('delete', old.id, old.content);
    INSERT INTO prompts_fts(rowid, content) VALUES (new.id, new.content);
END;
