-- Verified results (docs/verification.md): who computed each accepted
-- range, the checks that recomputed it, and the nodes a check proved
-- wrong. A quarantined node is revoked too: it cannot connect again.

ALTER TABLE journal DROP CONSTRAINT journal_type_check;
ALTER TABLE journal ADD CONSTRAINT journal_type_check CHECK (type BETWEEN 1 AND 7);
    -- 5: verify (node's range computed again by peer, same bytes), 6: quarantine (node),
    -- 7: an accept of a quarantined node, kept for the record (out of journal_accepted_once,
    --    so its range can be accepted again from another node)
ALTER TABLE journal ADD COLUMN peer_id bigint;
ALTER TABLE journal ADD COLUMN checked boolean NOT NULL DEFAULT false;
CREATE INDEX journal_by_node ON journal (node_id) WHERE type = 1;
CREATE INDEX journal_retracted ON journal (node_id) WHERE type = 7;

ALTER TABLE nodes
    ADD COLUMN quarantined_at timestamptz,
    ADD COLUMN checks_passed bigint NOT NULL DEFAULT 0 CHECK (checks_passed >= 0),
    ADD COLUMN checks_failed bigint NOT NULL DEFAULT 0 CHECK (checks_failed >= 0),
    ADD COLUMN streak integer NOT NULL DEFAULT 0 CHECK (streak >= 0);
