-- 011_fleet.sql — fleets: claim tokens of many uses, which token enrolled
-- each node, and nodes that can be removed.
--
-- A claim token enrols up to `uses` new keys before it expires; `used`
-- counts them. A key the token enrolled already (nodes.enrolled_by) comes
-- back with it without using another, so a node restarted with the token
-- still in its environment, or a statement the store sends again, counts
-- once. The count is raised in the UPDATE that checks it: concurrent
-- enrolments queue on the token's row, and each sees the count the one
-- before it left (session_enrol.c), so a token of 10 uses enrols 10 keys
-- however many race for it.

ALTER TABLE tokens
    ADD COLUMN uses integer NOT NULL DEFAULT 1 CHECK (uses BETWEEN 1 AND 100000),
    ADD COLUMN used integer NOT NULL DEFAULT 0 CHECK (used >= 0);
ALTER TABLE tokens ADD CONSTRAINT tokens_used_within CHECK (used <= uses);
UPDATE tokens SET used = 1 WHERE kind = 'claim' AND used_at IS NOT NULL;

-- The claim token that enrolled the node (NULL: enrolled as a public node,
-- or before this migration by a token whose used_by names it, below).
ALTER TABLE nodes ADD COLUMN enrolled_by bigint;
UPDATE nodes SET enrolled_by = t.id FROM tokens t
 WHERE t.kind = 'claim' AND t.used_by = nodes.public_key;

-- A node's name: what `simfarm node --name` says (the host name by
-- default), or a browser node's browser.
ALTER TABLE nodes ADD CONSTRAINT nodes_name_length CHECK (length(name) BETWEEN 1 AND 64);

-- Removing a node (DELETE /api/nodes/{id}, POST /api/nodes/prune) keeps
-- the journal's rows of its results: they are the record of what each job
-- accepted. So the journal's node_id has no foreign key any more, as its
-- job_id has none (004): the key's check at a delete would scan the whole
-- journal for each node removed (its indexes by node are partial), and at
-- each insert it was one lookup in nodes per row. Node ids are never
-- reused, so a removed node's number still names only it.
ALTER TABLE journal DROP CONSTRAINT journal_node_id_fkey;

-- For pruning: the nodes not seen for longest.
CREATE INDEX nodes_last_seen ON nodes (last_seen);
