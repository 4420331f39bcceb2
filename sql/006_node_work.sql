-- 006_node_work.sql — the work each node has done, kept across sessions.
--
-- A node's session writes what it has had accepted so far (chunks and
-- items) under a key of its own, drawn when the node is welcomed: every 12
-- heartbeat intervals while it works (a minute by default), and when it
-- ends. The row holds the
-- session's totals, not an increment, and an update never lowers them, so a
-- statement the store sends again after a broken connection counts nothing
-- twice. A node's work is the sum of its sessions' rows (GET /api/nodes).
-- A coordinator that stops writes every session's row first; one killed
-- loses at most the last 12 heartbeat intervals of each.

CREATE TABLE node_work (
    session     uuid PRIMARY KEY,
    node        bigint NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,
    chunks      bigint NOT NULL CHECK (chunks >= 0),
    items       bigint NOT NULL CHECK (items >= 0),
    started_at  timestamptz NOT NULL DEFAULT now(),
    saved_at    timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX node_work_node ON node_work (node);
