-- 002_access.sql — what API tokens, claim tokens and the nodes list need:
-- token expiry and which key used a claim token, job names, and the
-- software each node reported.

ALTER TABLE tokens ADD COLUMN expires_at timestamptz;
-- The node key a claim token enrolled; a repeated enrolment by the same key
-- (a retried statement) finds its own token again.
ALTER TABLE tokens ADD COLUMN used_by bytea CHECK (length(used_by) = 32);

ALTER TABLE jobs ADD COLUMN name text CHECK (length(name) <= 128);
CREATE INDEX jobs_owner ON jobs (owner, id);

ALTER TABLE nodes ADD COLUMN version text;
