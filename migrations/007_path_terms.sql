-- Worktrees, branches and file names.
--
-- A linked git worktree belongs to its main repository's project; the session keeps the
-- worktree's own folder and the branch checked out when it started (read from the checkout's
-- HEAD at SessionStart).
ALTER TABLE sessions ADD COLUMN worktree TEXT;
ALTER TABLE sessions ADD COLUMN branch TEXT;

-- The identifier words of an observation now include its file's name and path suffixes
-- (`requirements.txt`, `src/ledger.ts`) even when the text holds only an absolute path or none,
-- so what the index holds changed: rebuild it as migration 005 did (the writer re-indexes every
-- row when idle; searches meanwhile use what is indexed). The contentless tables are emptied by
-- recreating them; the triggers stay as 005 wrote them, but also index the absolute path of a
-- file outside the project.
DROP TRIGGER IF EXISTS observations_ad;
DROP TRIGGER IF EXISTS observations_au;
DROP TABLE IF EXISTS observations_fts;

CREATE VIRTUAL TABLE observations_fts USING fts5(
    content,
    terms,
    content='',
    contentless_delete=1,
    tokenize='porter unicode61'
);

UPDATE fts_state SET observations_upto = 0;

CREATE TRIGGER observations_ad AFTER DELETE ON observations
WHEN old.id <= (SELECT observations_upto FROM fts_state) BEGIN
    DELETE FROM observations_fts WHERE rowid = old.id;
END;

CREATE TRIGGER observations_au AFTER UPDATE OF content ON observations
WHEN old.id <= (SELECT observations_upto FROM fts_state) BEGIN
    DELETE FROM observations_fts WHERE rowid = old.id;
    INSERT INTO observations_fts(rowid, content, terms)
        VALUES (new.id, new.content, nmem_terms(new.content, COALESCE(new.rel_path, new.file_path)));
END;
