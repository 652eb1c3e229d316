-- Team streams as the personal one (docs/sync.md, "Team spaces"): each row of a team space's
-- stream has a state like `sync_log`'s (migration 016: live, forgotten, nulled, quarantined,
-- released, out of quarantine), since one push serves every space: a team stream's events pass
-- the uploader's redaction check, and a forget (purge, `redact --apply`) of a shared event
-- empties its envelope, sends a tombstone to the team and nulls its ciphertext on the server.
ALTER TABLE sync_space_log ADD COLUMN state INTEGER NOT NULL DEFAULT 0;

-- A forget finds an event's rows in every team stream by its local id.
CREATE INDEX sync_space_log_event ON sync_space_log (event_id);
