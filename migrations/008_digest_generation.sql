-- Change counters for the SessionStart digest's cache (daemon/src/context.rs).
--
-- `digest_gen` has one row per project, bumped in the same transaction as every insert, update
-- or delete of a row its startup digest reads: its observations (except session bookkeeping,
-- `session_*`, which the digest never shows, so a SessionStart does not invalidate the digest it
-- is about to read) and its prompts. `digest_gen_all` is bumped by every user prompt of any
-- project (the digest's "Elsewhere" section). A reader that finds both counters unchanged in its
-- snapshot knows the digest's queries would return what they returned before.
CREATE TABLE digest_gen (
    project TEXT PRIMARY KEY,
    n       INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE digest_gen_all (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n  INTEGER NOT NULL
) STRICT;
INSERT INTO digest_gen_all (id, n) VALUES (1, 0);

CREATE TRIGGER digest_gen_obs_ai AFTER INSERT ON observations
WHEN NEW.obs_type NOT LIKE 'session\_%' ESCAPE '\'
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER digest_gen_obs_au AFTER UPDATE ON observations
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (OLD.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER digest_gen_obs_ad AFTER DELETE ON observations
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (OLD.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER digest_gen_prompts_ai AFTER INSERT ON prompts
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
    UPDATE digest_gen_all SET n = n + 1 WHERE NEW.source = 'user';
END;

CREATE TRIGGER digest_gen_prompts_au AFTER UPDATE ON prompts
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (OLD.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
    INSERT INTO digest_gen (project, n) VALUES (NEW.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
    UPDATE digest_gen_all SET n = n + 1 WHERE OLD.source = 'user' OR NEW.source = 'user';
END;

CREATE TRIGGER digest_gen_prompts_ad AFTER DELETE ON prompts
BEGIN
    INSERT INTO digest_gen (project, n) VALUES (OLD.project, 1)
        ON CONFLICT (project) DO UPDATE SET n = n + 1;
    UPDATE digest_gen_all SET n = n + 1 WHERE OLD.source = 'user';
END;
