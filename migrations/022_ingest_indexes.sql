-- Search's project filter is an in-memory set of a project's row ids (`store::project_ids`)
-- wherever the set fits (up to 33 million rows); `(id, project)` on observations only served
-- the fallback beyond that, where a lookup by rowid answers the same question. Every insert
-- paid for it: one b-tree of the nine the ingest path wrote per event (ARCHITECTURE.md, "The
-- hook at the floor", fifteenth round). The prompts' one stays: prompts are few.
DROP INDEX IF EXISTS idx_obs_id_project;
