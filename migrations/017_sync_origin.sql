-- Where each row was captured (search by origin, docs/sync.md "Origin"), and the row ids the
-- event log keeps so that `nmem rebuild` stores a lost row again under its own id.

-- The sources rows arrive from: one per (space, device) pulled from. `kind` is `my-devices`
-- (another device of this user: the personal space, or a team space's event from a device the
-- personal space knows; `space` is then the personal space) or `team` (a teammate's device,
-- through the team space `space`).
CREATE TABLE sync_sources (
    id      INTEGER PRIMARY KEY,
    kind    TEXT NOT NULL CHECK (kind IN ('my-devices', 'team')),
    space   TEXT NOT NULL,
    device  TEXT NOT NULL,
    UNIQUE (space, device)
);

-- A row's source; NULL for a row captured on this device (every row recorded here). Adding a
-- column with no default rewrites no row.
ALTER TABLE observations ADD COLUMN origin INTEGER;
ALTER TABLE prompts ADD COLUMN origin INTEGER;

-- The ids an event's rows were given here: its record's (`row_id`) and its thoughts' (a JSON
-- array in their order, null for one not stored; NULL when it has none). Events logged before
-- this migration have none: a rebuild stores their rows under new ids and records those.
ALTER TABLE sync_log ADD COLUMN row_id INTEGER;
ALTER TABLE sync_log ADD COLUMN thought_ids TEXT;
ALTER TABLE sync_inbound ADD COLUMN row_id INTEGER;
ALTER TABLE sync_inbound ADD COLUMN thought_ids TEXT;

-- Backfill, in the size of what was received (never a pass over every row): the devices pulled
-- from so far, by their cursors; a device the personal space knows is one of this user's.
INSERT OR IGNORE INTO sync_sources (kind, space, device)
    SELECT 'my-devices', c.space, c.device FROM sync_cursors c
    JOIN sync_spaces p ON p.space = c.space AND p.kind = 'personal';
INSERT OR IGNORE INTO sync_sources (kind, space, device)
    SELECT 'team', c.space, c.device FROM sync_cursors c
    JOIN sync_spaces p ON p.space = c.space AND p.kind = 'team'
    WHERE c.device NOT IN (SELECT device FROM sync_sources WHERE kind = 'my-devices');

-- The rows of events received before, through `sync_origin` (by event id, the unique index):
-- their device's source, one of this user's first.
UPDATE observations SET origin = (
    SELECT s.id FROM sync_origin g JOIN sync_sources s ON s.device = g.device
    WHERE g.event_id = observations.event_id ORDER BY s.kind = 'team', s.id LIMIT 1)
  WHERE event_id IN (SELECT event_id FROM sync_origin);
UPDATE prompts SET origin = (
    SELECT s.id FROM sync_origin g JOIN sync_sources s ON s.device = g.device
    WHERE g.event_id = prompts.event_id ORDER BY s.kind = 'team', s.id LIMIT 1)
  WHERE event_id IN (SELECT event_id FROM sync_origin);
-- Their thoughts (stored as prompts under their own ids), named in the received envelopes.
UPDATE prompts SET origin = t.source FROM (
    SELECT json_extract(j.value, '$.uid') AS uid,
           (SELECT s.id FROM sync_sources s WHERE s.device = i.device
             ORDER BY s.kind = 'team', s.id LIMIT 1) AS source
      FROM sync_inbound i, json_each(CAST(i.envelope AS TEXT), '$.thoughts') j
     WHERE instr(CAST(i.envelope AS TEXT), '"thoughts"') > 0
  ) AS t
  WHERE prompts.event_id = t.uid AND prompts.origin IS NULL;
