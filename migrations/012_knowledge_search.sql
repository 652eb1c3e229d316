-- Knowledge and work items in `search` (daemon/src/knowledge.rs, `search`).
--
-- Their own full-text table, like documents' (migration 009) and for the same reason: the
-- observations' BM25 statistics and lexical budget stay the agent's own rows. It is an
-- external-content table over `knowledge` (the text is stored once): title, summary, and the
-- structured claim (subject, predicate, value), kept by triggers in the writer's transaction of
-- every write that creates, rewrites or deletes an item (a note re-redacted with its memory, a
-- purge). A change of status (promote, supersede, contest, archive, done) changes no text, so it
-- leaves the index alone: search reads the status from `knowledge` when it filters.
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
    title,
    summary,
    subject,
    predicate,
    value,
    content = 'knowledge',
    content_rowid = 'id',
    tokenize = 'porter unicode61'
);

CREATE TRIGGER knowledge_fts_ai AFTER INSERT ON knowledge BEGIN
    INSERT INTO knowledge_fts (rowid, title, summary, subject, predicate, value)
        VALUES (new.id, new.title, new.summary, new.subject, new.predicate, new.value);
END;

CREATE TRIGGER knowledge_fts_ad AFTER DELETE ON knowledge BEGIN
    INSERT INTO knowledge_fts (knowledge_fts, rowid, title, summary, subject, predicate, value)
        VALUES ('delete', old.id, old.title, old.summary, old.subject, old.predicate, old.value);
END;

CREATE TRIGGER knowledge_fts_au AFTER UPDATE OF title, summary, subject, predicate, value ON knowledge
BEGIN
    INSERT INTO knowledge_fts (knowledge_fts, rowid, title, summary, subject, predicate, value)
        VALUES ('delete', old.id, old.title, old.summary, old.subject, old.predicate, old.value);
    INSERT INTO knowledge_fts (rowid, title, summary, subject, predicate, value)
        VALUES (new.id, new.title, new.summary, new.subject, new.predicate, new.value);
END;

-- Pinned knowledge is in the SessionStart digest beside pinned observations: pinning,
-- unpinning, or changing or deleting a pinned item changes the digest's generation.
CREATE INDEX idx_knowledge_pinned ON knowledge(project) WHERE is_pinned = 1;

CREATE TRIGGER digest_gen_pinned_au AFTER UPDATE ON knowledge
WHEN NEW.class = 'knowledge' AND (NEW.is_pinned = 1 OR OLD.is_pinned = 1)
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER digest_gen_pinned_ad AFTER DELETE ON knowledge
WHEN OLD.class = 'knowledge' AND OLD.is_pinned = 1
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (OLD.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

-- Items written before this version: indexed now.
INSERT INTO knowledge_fts (knowledge_fts) VALUES ('rebuild');

-- A document chunk cited as evidence (`src:<source>`, `segment_id` the chunk's id) that is deleted
-- flags the items citing it possibly stale: a re-ingest keeps an unchanged chunk's row and
-- deletes one whose text (hash) changed, so this is "the cited chunk's hash changed". In the same
-- transaction as the re-ingest; the audit row first, while the items still match.
ALTER TABLE knowledge ADD COLUMN stale_doc_id INTEGER;

CREATE TRIGGER knowledge_stale_on_chunk AFTER DELETE ON doc_chunks
BEGIN
    INSERT INTO knowledge_audit (knowledge_id, at, action, from_status, to_status, reason, other_id)
        SELECT id, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER), 'stale', status, status,
               'the cited document chunk d' || OLD.id || ' changed or was removed', NULL
          FROM knowledge
         WHERE status = 'active' AND stale_obs_id IS NULL AND stale_doc_id IS NULL
           AND id IN (SELECT knowledge_id FROM knowledge_evidence
                       WHERE obs_id IS NULL AND segment_id = CAST(OLD.id AS TEXT));
    UPDATE knowledge SET stale_doc_id = OLD.id,
                         updated_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
     WHERE status = 'active' AND stale_obs_id IS NULL AND stale_doc_id IS NULL
       AND id IN (SELECT knowledge_id FROM knowledge_evidence
                   WHERE obs_id IS NULL AND segment_id = CAST(OLD.id AS TEXT));
END;

CREATE INDEX idx_evidence_segment ON knowledge_evidence(segment_id) WHERE segment_id IS NOT NULL;
