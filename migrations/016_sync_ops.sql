-- Sync operations (docs/sync.md): tombstones, quarantine, and inbound envelopes for `nmem rebuild`.

-- What became of each logged event: 0 live; 1 forgotten (envelope emptied, its ciphertext still
-- to be nulled on the server); 2 forgotten and nulled; 3 quarantined by the current redaction
-- rules (envelope kept here, a NULL placeholder on the server, event_id suffixed '#quarantined');
-- 4 released from quarantine (logged again under a new seq, uploaded as is, not screened again);
-- 5 out of quarantine (released: envelope emptied, its copy is the state-4 row; dropped: envelope
-- kept here, never uploaded).
ALTER TABLE sync_log ADD COLUMN state INTEGER NOT NULL DEFAULT 0;

-- Event ids forgotten by a tombstone (local or inbound): an event arriving later under one of
-- them (from a device that had not seen the tombstone yet) is not stored again.
CREATE TABLE sync_tombstones (
    event_id    TEXT PRIMARY KEY,
    forgotten_at INTEGER NOT NULL
) WITHOUT ROWID;

-- The envelope of every event applied from another device, as stored here (after this device's
-- redactor): with `sync_log` it is the whole event log `nmem rebuild` regenerates from.
CREATE TABLE sync_inbound (
    event_id  TEXT PRIMARY KEY,
    device    TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    envelope  BLOB NOT NULL
) WITHOUT ROWID;
