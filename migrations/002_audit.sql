-- What retention and purge removed, and when: one row per run that deleted something.
CREATE TABLE audit (
    id          INTEGER PRIMARY KEY,
    timestamp   INTEGER NOT NULL,
    action      TEXT NOT NULL,          -- retention | purge | redact
    detail      TEXT NOT NULL,          -- JSON: the request and the counts
    observations INTEGER NOT NULL DEFAULT 0,
    prompts     INTEGER NOT NULL DEFAULT 0
) STRICT;
