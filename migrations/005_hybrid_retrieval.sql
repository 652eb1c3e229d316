-- Hybrid retrieval: a full-text index that matches more than the stored text, and embeddings.
--
-- The full-text tables become contentless (they keep only the index; deletes by rowid), so what
-- is indexed no longer has to equal the stored column: each row is indexed with its text and,
-- in a second column weighted lower, the words of its identifiers (`parseInvoiceTotal` →
-- "parse invoice total") and of its file's project-relative path. That text is computed by the
-- writer (the function `nmem_terms`, registered on the write connection only), so the update
-- trigger works on the writer alone, which is the only connection that writes.
--
-- Rebuilding the index: the watermarks go back to 0 and the writer re-indexes every row in
-- chunks when it is idle, logging its progress; searches meanwhile use what is indexed.

DROP TRIGGER IF EXISTS observations_ad;
DROP TRIGGER IF EXISTS observations_au;
DROP TRIGGER IF EXISTS prompts_ad;
DROP TRIGGER IF EXISTS prompts_au;
DROP TABLE IF EXISTS observations_fts;
DROP TABLE IF EXISTS prompts_fts;

CREATE VIRTUAL TABLE observations_fts USING fts5(
    content,
    terms,
    content='',
    contentless_delete=1,
    tokenize='porter unicode61'
);

CREATE VIRTUAL TABLE prompts_fts USING fts5(
    content,
    terms,
    content='',
    contentless_delete=1,
    tokenize='porter unicode61'
);

UPDATE fts_state SET observations_upto = 0, prompts_upto = 0;

CREATE TRIGGER observations_ad AFTER DELETE ON observations
WHEN old.id <= (SELECT observations_upto FROM fts_state) BEGIN
    DELETE FROM observations_fts WHERE rowid = old.id;
END;

CREATE TRIGGER observations_au AFTER UPDATE OF content ON observations
WHEN old.id <= (SELECT observations_upto FROM fts_state) BEGIN
    DELETE FROM observations_fts WHERE rowid = old.id;
    INSERT INTO observations_fts(rowid, content, terms)
        VALUES (new.id, new.content, nmem_terms(new.content, new.rel_path));
END;

CREATE TRIGGER prompts_ad AFTER DELETE ON prompts
WHEN old.id <= (SELECT prompts_upto FROM fts_state) BEGIN
    DELETE FROM prompts_fts WHERE rowid = old.id;
END;

CREATE TRIGGER prompts_au AFTER UPDATE OF content ON prompts
WHEN old.id <= (SELECT prompts_upto FROM fts_state) BEGIN
    DELETE FROM prompts_fts WHERE rowid = old.id;
    INSERT INTO prompts_fts(rowid, content, terms)
        VALUES (new.id, new.content, nmem_terms(new.content, NULL));
END;

-- Embeddings. One model is active at a time (`embed_models.active`); a vector is int8 with a
-- scale (cosine is computed on the int8 values), written by the writer after the row it belongs
-- to has been committed, newest rows first. A vector belongs to its row: deleting the row deletes
-- it, changing the row's text (redaction) deletes it and queues the row to be embedded again.
CREATE TABLE embed_models (
    id        INTEGER PRIMARY KEY,
    name      TEXT NOT NULL UNIQUE,     -- the model id (all-MiniLM-L6-v2, custom-<hash>)
    dim       INTEGER NOT NULL,
    active    INTEGER NOT NULL DEFAULT 0,
    -- Watermarks per table: every row with lo < id <= hi has been embedded with this model
    -- (or queued in embed_redo); rows above hi are new, rows at or below lo are the backlog.
    obs_hi    INTEGER NOT NULL DEFAULT 0,
    obs_lo    INTEGER NOT NULL DEFAULT 0,
    prompts_hi INTEGER NOT NULL DEFAULT 0,
    prompts_lo INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE obs_vectors (
    id     INTEGER PRIMARY KEY,         -- observations.id
    model  INTEGER NOT NULL,
    scale  REAL NOT NULL,
    vec    BLOB NOT NULL                -- dim int8 values
) STRICT;

CREATE TABLE prompt_vectors (
    id     INTEGER PRIMARY KEY,         -- prompts.id
    model  INTEGER NOT NULL,
    scale  REAL NOT NULL,
    vec    BLOB NOT NULL
) STRICT;

-- Rows whose text changed after they were embedded (kind 0: observation, 1: prompt).
CREATE TABLE embed_redo (
    kind INTEGER NOT NULL,
    id   INTEGER NOT NULL,
    PRIMARY KEY (kind, id)
) STRICT, WITHOUT ROWID;

CREATE TRIGGER observations_vec_ad AFTER DELETE ON observations BEGIN
    DELETE FROM obs_vectors WHERE id = old.id;
    DELETE FROM embed_redo WHERE kind = 0 AND id = old.id;
END;

CREATE TRIGGER observations_vec_au AFTER UPDATE OF content ON observations
WHEN EXISTS (SELECT 1 FROM obs_vectors WHERE id = old.id) BEGIN
    DELETE FROM obs_vectors WHERE id = old.id;
    INSERT OR IGNORE INTO embed_redo(kind, id) VALUES (0, old.id);
END;

CREATE TRIGGER prompts_vec_ad AFTER DELETE ON prompts BEGIN
    DELETE FROM prompt_vectors WHERE id = old.id;
    DELETE FROM embed_redo WHERE kind = 1 AND id = old.id;
END;

CREATE TRIGGER prompts_vec_au AFTER UPDATE OF content ON prompts
WHEN EXISTS (SELECT 1 FROM prompt_vectors WHERE id = old.id) BEGIN
    DELETE FROM prompt_vectors WHERE id = old.id;
    INSERT OR IGNORE INTO embed_redo(kind, id) VALUES (1, old.id);
END;
