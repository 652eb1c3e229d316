-- Documents: sources ingested by `nmem ingest` (files, a repository's files, a conversation, a
-- web page, PDF text) and their chunks, searchable beside observations (daemon/src/docs/).
--
-- A source is one locator in one project (a path, a URL, `conversation:<name>`), with the
-- SHA-256 of its redacted text: ingesting it again with the same hash changes nothing. Its chunks
-- carry their own hash, so a changed source replaces only the chunks whose text changed; the
-- others keep their ids. Written only by nmemd's writer, like everything else.
--
-- The chunks have their own full-text table, not the observations' one: a repository's
-- documentation is often larger than months of observations, and sharing the index would change
-- every observation's BM25 statistics and the lexical budget of every search. It is an
-- external-content table over `doc_chunks` (the text is stored once), indexed by triggers in the
-- writer's transaction: ingestion is rare and in bulk, so nothing needs deferring.
CREATE TABLE doc_sources (
    id          INTEGER PRIMARY KEY,
    project     TEXT NOT NULL,
    locator     TEXT NOT NULL,
    kind        TEXT NOT NULL
                CHECK (kind IN ('file', 'markdown', 'repo-file', 'conversation', 'web', 'pdf')),
    hash        TEXT NOT NULL,
    byte_size   INTEGER NOT NULL,
    ingested_at INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    UNIQUE (project, locator)
) STRICT;

CREATE TABLE doc_chunks (
    id         INTEGER PRIMARY KEY,
    source_id  INTEGER NOT NULL REFERENCES doc_sources(id) ON DELETE CASCADE,
    ordinal    INTEGER NOT NULL,
    heading    TEXT NOT NULL DEFAULT '',
    line_start INTEGER NOT NULL,
    line_end   INTEGER NOT NULL,
    content    TEXT NOT NULL,
    hash       TEXT NOT NULL
) STRICT;

CREATE INDEX doc_chunks_source ON doc_chunks (source_id, ordinal);
-- Duplicate detection within a project looks chunks up by hash.
CREATE INDEX doc_chunks_hash ON doc_chunks (hash);

CREATE VIRTUAL TABLE doc_chunks_fts USING fts5(
    content,
    heading,
    content = 'doc_chunks',
    content_rowid = 'id',
    tokenize = 'porter unicode61'
);

CREATE TRIGGER doc_chunks_ai AFTER INSERT ON doc_chunks BEGIN
    INSERT INTO doc_chunks_fts (rowid, content, heading) VALUES (new.id, new.content, new.heading);
END;

CREATE TRIGGER doc_chunks_ad AFTER DELETE ON doc_chunks BEGIN
    INSERT INTO doc_chunks_fts (doc_chunks_fts, rowid, content, heading)
        VALUES ('delete', old.id, old.content, old.heading);
END;

CREATE TRIGGER doc_chunks_au AFTER UPDATE OF content, heading ON doc_chunks BEGIN
    INSERT INTO doc_chunks_fts (doc_chunks_fts, rowid, content, heading)
        VALUES ('delete', old.id, old.content, old.heading);
    INSERT INTO doc_chunks_fts (rowid, content, heading) VALUES (new.id, new.content, new.heading);
END;
