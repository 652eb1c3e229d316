-- `nmem sync verify` for every space (docs/sync.md, "Verify"): each row pulled from another
-- device, per (space, device) stream and seq. A team space's server event ids are made from the
-- sending device's own secret, so this home cannot derive them from the local id: they are kept
-- as received. A personal space's are derived from the local id by the space key, so that is
-- kept instead. `sync_origin` (one row per local event id) cannot say through which space a row
-- came when a device is in the personal space and a team space. Rows whose ciphertext was
-- nulled before they were pulled are not received, so not listed.

-- The streams pulled from: one row per (space, device), so that each received row names its
-- stream by a small integer (about 50 bytes a row instead of 160).
CREATE TABLE sync_streams (
    id      INTEGER PRIMARY KEY,
    space   TEXT NOT NULL,
    device  TEXT NOT NULL,
    UNIQUE (space, device)
);

-- `server_id`: the server's event id as pulled (a team space's row); `event_id`: the local event
-- id (a personal space's row, whose server id the space key derives; or a team space's row
-- received before this migration, then compared by its presence only).
CREATE TABLE sync_received (
    stream     INTEGER NOT NULL,
    seq        INTEGER NOT NULL,
    event_id   TEXT,
    server_id  TEXT,
    PRIMARY KEY (stream, seq),
    CHECK (event_id IS NOT NULL OR server_id IS NOT NULL)
) WITHOUT ROWID;

-- Backfill from `sync_origin`, where the space is known: a teammate's device came through its
-- team space; one of this user's devices through the personal space, unless a team space was
-- pulled from it too (then which stream a row was in is not known, and it is not listed).
CREATE TEMP TABLE received_before AS
    SELECT s.space AS space, g.device AS device, g.seq AS seq, g.event_id AS event_id
      FROM sync_origin g JOIN sync_sources s ON s.device = g.device
     WHERE s.kind = 'team'
        OR NOT EXISTS (SELECT 1 FROM sync_cursors c
                         JOIN sync_spaces p ON p.space = c.space AND p.kind = 'team'
                        WHERE c.device = g.device);
INSERT OR IGNORE INTO sync_streams (space, device)
    SELECT DISTINCT space, device FROM temp.received_before;
INSERT OR IGNORE INTO sync_received (stream, seq, event_id)
    SELECT t.id, r.seq, r.event_id FROM temp.received_before r
      JOIN sync_streams t ON t.space = r.space AND t.device = r.device;
DROP TABLE temp.received_before;
