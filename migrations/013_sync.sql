-- Sync (docs/sync.md): this device's identity and space, the outbound log, pull cursors and
-- where inbound events came from. Nothing is written to these tables while sync is disabled.

-- One row: this home's sync identity. `device` is random, made at `nmem sync enable|join`, so a
-- copied home keeps it (that is how a cloned home is caught). `space_key` is the space's 32-byte
-- key, which never leaves this file unencrypted (the recovery phrase is shown once instead).
CREATE TABLE sync_state (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    enabled     INTEGER NOT NULL DEFAULT 0,
    device      TEXT NOT NULL,
    space       TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    space_key   BLOB NOT NULL,
    url         TEXT,
    -- Another home pushed under this device id: syncing stops until the user fixes it.
    cloned      INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL
);

-- The outbound log: each stored event's prepared, redacted record (a versioned JSON envelope),
-- appended by the writer in the event's own transaction. `seq` is dense (max + 1 under the single
-- writer); it is this device's sequence number on the server.
CREATE TABLE sync_log (
    seq         INTEGER PRIMARY KEY,
    event_id    TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL,
    envelope    BLOB NOT NULL
);

-- How far each other device's stream has been applied here, per space.
CREATE TABLE sync_cursors (
    space   TEXT NOT NULL,
    device  TEXT NOT NULL,
    seq     INTEGER NOT NULL,
    PRIMARY KEY (space, device)
) WITHOUT ROWID;

-- Events received from another device: their origin (the local rows carry the event id).
CREATE TABLE sync_origin (
    event_id  TEXT PRIMARY KEY,
    device    TEXT NOT NULL,
    seq       INTEGER NOT NULL
) WITHOUT ROWID;
