-- Knowledge items as sync events (docs/sync.md, "Knowledge items"): each item written from now on
-- has a random `uid`, the same on every device that holds it, by which the changes of its status
-- (promote, supersede, contest, archive, done, drop, reopen) and its pin travel as events. Items
-- written before this migration have none and stay on their device; a saved memory's note is
-- named by its memory's event id instead.
ALTER TABLE knowledge ADD COLUMN uid TEXT;
CREATE UNIQUE INDEX idx_knowledge_uid ON knowledge(uid) WHERE uid IS NOT NULL;
