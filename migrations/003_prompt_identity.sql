-- A user prompt the harness identified (Claude Code's prompt_id / promptId, Codex's turn_id) is
-- stored once per session, whether it came live from a hook or from an imported transcript.
-- Earlier versions could store one twice (the same hook wired twice): keep the first, and point
-- the observations of the others at it, before the index makes it unique.
UPDATE observations SET prompt_id = (
    SELECT MIN(k.id) FROM prompts k JOIN prompts d ON d.session_id = k.session_id AND d.prompt_uid = k.prompt_uid
    WHERE d.id = observations.prompt_id AND k.source = 'user')
WHERE prompt_id IN (
    SELECT id FROM prompts p WHERE source = 'user' AND prompt_uid IS NOT NULL
      AND id > (SELECT MIN(id) FROM prompts q WHERE q.session_id = p.session_id AND q.prompt_uid = p.prompt_uid AND q.source = 'user'));
DELETE FROM prompts WHERE source = 'user' AND prompt_uid IS NOT NULL
  AND id > (SELECT MIN(id) FROM prompts q WHERE q.session_id = prompts.session_id AND q.prompt_uid = prompts.prompt_uid AND q.source = 'user');
CREATE UNIQUE INDEX idx_prompts_uid ON prompts(session_id, prompt_uid)
    WHERE prompt_uid IS NOT NULL AND source = 'user';
