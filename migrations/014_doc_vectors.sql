-- Document chunks in the embedding backfill (issue 16): a chunk found by meaning, like an
-- observation.
--
-- `doc_vectors` is to `doc_chunks` what `obs_vectors` is to `observations`: one int8 vector with
-- its scale per chunk, for the active model, written by the backfill through the writer. The
-- watermarks `docs_hi`/`docs_lo` work as the observations' do (chunks above `docs_hi` are new,
-- at or below `docs_lo` the backlog, embedded newest first after the observations' and prompts').
-- A model registered before this migration has every existing chunk in its backlog.
--
-- A vector belongs to its chunk: a re-ingest that deletes a chunk, a purge of the project (or the
-- cascade from its source) deletes the vector in the same transaction; a changed text deletes it
-- and queues the chunk again (`embed_redo` kind 2).
ALTER TABLE embed_models ADD COLUMN docs_hi INTEGER NOT NULL DEFAULT 0;
ALTER TABLE embed_models ADD COLUMN docs_lo INTEGER NOT NULL DEFAULT 0;

UPDATE embed_models SET
    docs_hi = COALESCE((SELECT MAX(id) FROM doc_chunks), 0),
    docs_lo = COALESCE((SELECT MAX(id) FROM doc_chunks), 0);

CREATE TABLE doc_vectors (
    id     INTEGER PRIMARY KEY,         -- doc_chunks.id
    model  INTEGER NOT NULL,
    scale  REAL NOT NULL,
    vec    BLOB NOT NULL                -- dim int8 values
) STRICT;

CREATE TRIGGER doc_chunks_vec_ad AFTER DELETE ON doc_chunks BEGIN
    DELETE FROM doc_vectors WHERE id = old.id;
    DELETE FROM embed_redo WHERE kind = 2 AND id = old.id;
END;

CREATE TRIGGER doc_chunks_vec_au AFTER UPDATE OF content ON doc_chunks
WHEN EXISTS (SELECT 1 FROM doc_vectors WHERE id = old.id) BEGIN
    DELETE FROM doc_vectors WHERE id = old.id;
    INSERT OR IGNORE INTO embed_redo(kind, id) VALUES (2, old.id);
END;
