-- 005_submission_keys.sql — a submission's key, so a job is stored once.
--
-- A POST /api/jobs is inserted with a key: the client's Idempotency-Key
-- header, or one the coordinator draws for the request. The store sends a
-- query again when its connection breaks before the answer, and a client
-- sends a submission again when it got no answer (a 503, a timeout): with the
-- key, both find the job already stored instead of storing a second one.
-- submission_hash (SHA-256 of the request body) tells a retry from another
-- submission under a key already used. Jobs from before have neither.

ALTER TABLE jobs ADD COLUMN submission_key text;
ALTER TABLE jobs ADD COLUMN submission_hash bytea;

CREATE UNIQUE INDEX jobs_submission_key ON jobs (owner, submission_key);
