-- The AFTER INSERT triggers of migrations 008 and 010 move into the writer
-- (daemon/src/store/follow.rs), which does their work in the same transaction as the insert.
--
-- Why: with an AFTER INSERT trigger on a table, SQLite treats every insert into it as a
-- statement that may have to be rolled back alone (a "multi-write"; the immediate foreign-key
-- check becomes a counter checked at the statement's end), so each insert copied every page it
-- touched to a statement journal first: 14% of the writer's time under a stream of events. The
-- writer knows each row's type, path and project without reading them back, bumps each project's
-- digest counter once per transaction instead of once per row, and runs the knowledge statements
-- only for the rows they concern (`memory`; `file_edit`/`file_write` with a path).
--
-- Only inserts move: the writer is the only code that inserts into `observations` and `prompts`.
-- The UPDATE and DELETE triggers stay (re-redaction, pins, retention and purges update and delete
-- from several places, and are not on the ingest path).
DROP TRIGGER IF EXISTS digest_gen_obs_ai;
DROP TRIGGER IF EXISTS digest_gen_prompts_ai;
DROP TRIGGER IF EXISTS knowledge_stale_on_edit;
DROP TRIGGER IF EXISTS knowledge_note_ai;
