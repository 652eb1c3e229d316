-- Sync across teams (docs/sync.md, "Team spaces"): the spaces this home belongs to with their
-- keys by key id, each team space's own outbound stream, what is routed where, and this
-- device's X25519 identity. Nothing is written to these tables while sync is off.

-- Every space this home belongs to. The personal space's row mirrors `sync_state` (which keeps
-- the home's identity: device, url, enabled, cloned); team spaces live only here. `key_id` is
-- the key new events are sealed under; `role` is `owner` (created it) or `member` (joined).
-- `locked` holds why this device can no longer write the space (removed from the team: the key
-- rotated without it), NULL while it can.
CREATE TABLE sync_spaces (
    space       TEXT PRIMARY KEY,
    kind        TEXT NOT NULL CHECK (kind IN ('personal', 'team')),
    key_id      TEXT NOT NULL,
    role        TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    locked      TEXT,
    created_at  INTEGER NOT NULL
);

-- Every key a space has had, by key id: a rotation adds one, and events sealed under an older
-- key still open with it.
CREATE TABLE sync_keys (
    space   TEXT NOT NULL,
    key_id  TEXT NOT NULL,
    key     BLOB NOT NULL,
    PRIMARY KEY (space, key_id)
) WITHOUT ROWID;

-- A home that synced before this migration: its personal space, upgraded in place.
INSERT INTO sync_spaces (space, kind, key_id, role, created_at)
    SELECT space, 'personal', key_id, 'owner', created_at FROM sync_state;
INSERT INTO sync_keys (space, key_id, key) SELECT space, key_id, space_key FROM sync_state;

-- Each team space's outbound stream, written like `sync_log` (the personal space's stream) by
-- the writer in the event's own transaction: `seq` is dense per space.
CREATE TABLE sync_space_log (
    space       TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    event_id    TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    envelope    BLOB NOT NULL,
    PRIMARY KEY (space, seq),
    UNIQUE (space, event_id)
);

-- Projects kept local: never logged for the personal space (`nmem sync exclude PROJECT`).
CREATE TABLE sync_excluded (
    project  TEXT PRIMARY KEY
) WITHOUT ROWID;

-- Projects shared with a team space (`nmem share PROJECT --team SPACE`). `extra` lists what is
-- shared beyond the default types: `prompts`, `all`, or observation type names, comma separated.
CREATE TABLE sync_shares (
    project  TEXT NOT NULL,
    space    TEXT NOT NULL,
    extra    TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (project, space)
) WITHOUT ROWID;

-- This device's X25519 identity (an age identity): team keys are wrapped for its public key.
-- The secret never leaves this file.
CREATE TABLE sync_identity (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    secret      TEXT NOT NULL,
    public_key  TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
