-- Search filters a project's matches while walking the full-text index newest first: a compact
-- (id, project) index answers "is this match in the project?" without reading the row, so the
-- ranking only ever looks at the project's own matches.
CREATE INDEX idx_obs_id_project ON observations(id, project);
CREATE INDEX idx_prompts_id_project ON prompts(id, project);
