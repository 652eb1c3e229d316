-- Governed knowledge and work items (daemon/src/knowledge/).
--
-- `knowledge` holds both classes: knowledge (facts, decisions, procedures, concepts, notes; status
-- candidate, active, superseded, contested or archived) and work items (tasks, bugs, follow-ups
-- that outlive a session; status open, done or dropped). Every item says why it exists
-- (`reason`), who said so (`memory_source`) and where it holds (`scope`: its project, or every
-- project). A structured claim has `subject`, `predicate` and `value` (canonical JSON of the
-- payload's value or object): the duplicate and conflict rules compare those three.
--
-- Each memory saved with `save_memory` (an observation of type `memory`) is also a knowledge item
-- of kind `note`, `user_declared`, active, linked by `obs_id`, so it can be promoted, superseded
-- and contested like any other; the triggers below keep the two in step (created with the row,
-- re-redacted with it, gone with it).
CREATE TABLE knowledge (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    class         TEXT NOT NULL CHECK (class IN ('knowledge', 'work_item')),
    kind          TEXT NOT NULL,
    project       TEXT NOT NULL,
    scope         TEXT NOT NULL CHECK (scope IN ('project', 'global')),
    title         TEXT NOT NULL,
    summary       TEXT NOT NULL,
    reason        TEXT NOT NULL,
    memory_source TEXT NOT NULL CHECK (memory_source IN
                      ('user_declared', 'human_curated', 'agent_inferred', 'system_generated', 'imported')),
    status        TEXT NOT NULL CHECK (status IN
                      ('candidate', 'active', 'superseded', 'contested', 'archived', 'open', 'done', 'dropped')),
    confidence    REAL,
    subject       TEXT,
    predicate     TEXT,
    value         TEXT,
    payload       TEXT,                      -- JSON, as given
    obs_id        INTEGER UNIQUE,            -- the `memory` observation a note mirrors
    superseded_by INTEGER,
    stale_obs_id  INTEGER,                   -- possibly stale: the observation that touched its evidence
    is_pinned     INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;

CREATE INDEX idx_knowledge_project ON knowledge(project, class, status);
CREATE INDEX idx_knowledge_stale ON knowledge(stale_obs_id) WHERE stale_obs_id IS NOT NULL;
CREATE INDEX idx_knowledge_claim ON knowledge(subject, predicate) WHERE subject IS NOT NULL;

-- What an item cites: an observation (`obs_id`), or a document chunk (`source_id`, `segment_id`).
-- `file_path` is the file the cited observation names: a later edit of that file makes the item
-- possibly stale (the trigger below, in the same transaction as the edit).
CREATE TABLE knowledge_evidence (
    knowledge_id INTEGER NOT NULL REFERENCES knowledge(id) ON DELETE CASCADE,
    ord          INTEGER NOT NULL,
    obs_id       INTEGER,
    source_id    TEXT,
    segment_id   TEXT,
    hash         TEXT,
    file_path    TEXT,
    PRIMARY KEY (knowledge_id, ord)
) STRICT, WITHOUT ROWID;

CREATE INDEX idx_evidence_file ON knowledge_evidence(file_path) WHERE file_path IS NOT NULL;
CREATE INDEX idx_evidence_obs ON knowledge_evidence(obs_id) WHERE obs_id IS NOT NULL;

-- Every change of an item's status, with its reason: created, promoted, superseded, contested,
-- stale (raised by `other_id`, an observation), status (a work item done, dropped or reopened).
CREATE TABLE knowledge_audit (
    id           INTEGER PRIMARY KEY,
    knowledge_id INTEGER NOT NULL REFERENCES knowledge(id) ON DELETE CASCADE,
    at           INTEGER NOT NULL,
    action       TEXT NOT NULL,
    from_status  TEXT,
    to_status    TEXT,
    reason       TEXT,
    other_id     INTEGER
) STRICT;

CREATE INDEX idx_knowledge_audit ON knowledge_audit(knowledge_id, id);

-- A later edit or write of a file that an active item's evidence names flags the item, once, with
-- the observation that touched it. Only edits made after the cited observation count.
CREATE TRIGGER knowledge_stale_on_edit AFTER INSERT ON observations
WHEN NEW.file_path IS NOT NULL AND NEW.obs_type IN ('file_edit', 'file_write')
BEGIN
    UPDATE knowledge SET stale_obs_id = NEW.id, updated_at = NEW.timestamp
     WHERE status = 'active' AND stale_obs_id IS NULL
       AND id IN (SELECT knowledge_id FROM knowledge_evidence
                   WHERE file_path = NEW.file_path AND (obs_id IS NULL OR obs_id < NEW.id));
    INSERT INTO knowledge_audit (knowledge_id, at, action, from_status, to_status, reason, other_id)
        SELECT id, NEW.timestamp, 'stale', status, status,
               'a later change of ' || NEW.file_path || ' may have made it out of date', NEW.id
          FROM knowledge WHERE stale_obs_id = NEW.id;
END;

-- A saved memory is a note.
CREATE TRIGGER knowledge_note_ai AFTER INSERT ON observations
WHEN NEW.obs_type = 'memory'
BEGIN
    INSERT INTO knowledge (class, kind, project, scope, title, summary, reason, memory_source,
                           status, obs_id, created_at, updated_at)
    VALUES ('knowledge', 'note', NEW.project, 'project',
            COALESCE(CASE WHEN json_valid(NEW.metadata) THEN json_extract(NEW.metadata, '$.title') END,
                     substr(NEW.content, 1, 80)),
            NEW.content, 'saved with save_memory', 'user_declared', 'active', NEW.id,
            NEW.timestamp, NEW.timestamp);
    INSERT INTO knowledge_audit (knowledge_id, at, action, to_status, reason, other_id)
    VALUES (last_insert_rowid(), NEW.timestamp, 'created', 'active', 'saved with save_memory', NEW.id);
END;

-- Re-redaction of the memory rewrites the note's text too.
CREATE TRIGGER knowledge_note_au AFTER UPDATE OF content, metadata ON observations
WHEN NEW.obs_type = 'memory'
BEGIN
    UPDATE knowledge
       SET title = COALESCE(CASE WHEN json_valid(NEW.metadata) THEN json_extract(NEW.metadata, '$.title') END,
                     substr(NEW.content, 1, 80)),
           summary = NEW.content
     WHERE obs_id = NEW.id;
END;

CREATE TRIGGER knowledge_note_ad AFTER DELETE ON observations
WHEN OLD.obs_type = 'memory'
BEGIN
    DELETE FROM knowledge WHERE obs_id = OLD.id;
END;

-- Open work items are in the SessionStart digest: changing one changes the digest's generation.
CREATE TRIGGER digest_gen_work_ai AFTER INSERT ON knowledge
WHEN NEW.class = 'work_item'
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER digest_gen_work_au AFTER UPDATE ON knowledge
WHEN NEW.class = 'work_item'
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER digest_gen_work_ad AFTER DELETE ON knowledge
WHEN OLD.class = 'work_item'
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (OLD.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

-- The memories saved before this version are notes too.
INSERT INTO knowledge (class, kind, project, scope, title, summary, reason, memory_source, status,
                       obs_id, created_at, updated_at)
SELECT 'knowledge', 'note', project, 'project',
       COALESCE(CASE WHEN json_valid(metadata) THEN json_extract(metadata, '$.title') END,
                substr(content, 1, 80)), content,
       'saved with save_memory', 'user_declared', 'active', id, timestamp, timestamp
  FROM observations WHERE obs_type = 'memory';
