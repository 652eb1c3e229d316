-- `nmem sync verify` for every space (docs/sync.md, "Verify"): each row pulled from another
-- device, per (space, device, seq), with the event id the server gave it. A team space's server
-- ids are made from the sending device's own secret, so this home cannot derive them from the
-- local id: they are kept as received. `sync_origin` (one row per local event id) cannot say
-- through which space a row came when a device is in the personal space and a team space.
-- Rows whose ciphertext was nulled before they were pulled are not received, so not listed.
CREATE TABLE sync_received (
    space      TEXT NOT NULL,
    device     TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    event_id   TEXT NOT NULL,
    -- NULL: received before this migration (a personal space's id is derived from `event_id`
    -- by the space key; a team space's row is compared by its presence only).
    server_id  TEXT,
    PRIMARY KEY (space, device, seq)
) WITHOUT ROWID;

-- Backfill from `sync_origin`, where the space is known: a teammate's device came through its
-- team space; one of this user's devices through the personal space, unless a team space was
-- pulled from it too (then which stream a row was in is not known, and it is not listed).
INSERT OR IGNORE INTO sync_received (space, device, seq, event_id)
    SELECT s.space, g.device, g.seq, g.event_id FROM sync_origin g
      JOIN sync_sources s ON s.device = g.device
     WHERE s.kind = 'team'
        OR NOT EXISTS (SELECT 1 FROM sync_cursors c
                         JOIN sync_spaces p ON p.space = c.space AND p.kind = 'team'
                        WHERE c.device = g.device);
