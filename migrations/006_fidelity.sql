-- Capture fidelity (issue 12): turn and subagent ends without content become counters on their
-- session instead of rows. The data of existing databases (rejections reclassified, duplicate
-- compactions and content-less lifecycle rows removed, terminal control sequences stripped) is
-- upgraded by this migration's Rust step, `daemon/src/store/upgrade.rs`, which runs right after
-- this SQL in the same transaction and logs what it changed. Changed and deleted rows leave the
-- full-text index and the vectors through the existing triggers (re-indexed or queued again).

ALTER TABLE sessions ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN subagents INTEGER NOT NULL DEFAULT 0;
