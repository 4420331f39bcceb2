-- 001_core.sql — the system of record: tokens, nodes, jobs, the completion
-- journal, events. Applied once, in a transaction, by the store actor.

CREATE TABLE tokens (
    id          bigserial PRIMARY KEY,
    kind        text NOT NULL CHECK (kind IN ('api', 'claim')),
    owner       text NOT NULL CHECK (length(owner) BETWEEN 1 AND 128),
    tier        text NOT NULL DEFAULT 'own' CHECK (tier IN ('own', 'team', 'community', 'public')),
    secret_hash bytea NOT NULL UNIQUE CHECK (length(secret_hash) = 32),  -- SHA-256 of the secret
    note        text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    used_at     timestamptz,            -- a claim token enrols one node, once
    revoked_at  timestamptz
);

CREATE TABLE nodes (
    id          bigserial PRIMARY KEY,
    public_key  bytea NOT NULL UNIQUE CHECK (length(public_key) = 32),   -- Ed25519
    owner       text,
    tier        text NOT NULL CHECK (tier IN ('own', 'team', 'community', 'public')),
    name        text,
    capabilities jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    last_seen   timestamptz,
    revoked_at  timestamptz
);

CREATE TABLE jobs (
    id          bigserial PRIMARY KEY,
    owner       text NOT NULL,
    kernel      text NOT NULL,
    strategy    text NOT NULL CHECK (strategy IN ('single', 'tournament', 'stat_weights')),
    items       bigint NOT NULL CHECK (items > 0),
    seed        bigint NOT NULL,
    priority    integer NOT NULL DEFAULT 0,
    tiers       smallint NOT NULL DEFAULT 15 CHECK (tiers BETWEEN 1 AND 15),
    spec        jsonb NOT NULL,         -- the submission as accepted (parameters, targets)
    params      bytea NOT NULL,         -- the kernel's parameters, msgpack: the work context
    ctx_hash    bytea NOT NULL CHECK (length(ctx_hash) = 32),
    state       text NOT NULL DEFAULT 'pending'
                CHECK (state IN ('pending', 'running', 'complete', 'failed', 'cancelled', 'expired')),
    result      jsonb,
    created_at  timestamptz NOT NULL DEFAULT now(),
    started_at  timestamptz,
    finished_at timestamptz
);
CREATE INDEX jobs_unfinished ON jobs (id) WHERE state IN ('pending', 'running');

-- The completion journal (sched/'s records): what a restarted coordinator
-- replays to resume every job where it was.
CREATE TABLE journal (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq         bigserial,
    type        smallint NOT NULL CHECK (type BETWEEN 1 AND 4),  -- accept, chunk failed, phase, job end
    variant     integer NOT NULL DEFAULT 0,
    chunk       bigint,
    first_item  bigint,
    item_count  bigint CHECK (item_count > 0),
    token       bytea CHECK (length(token) = 16),
    result      bytea,
    phase       integer,
    state       smallint,
    node_id     bigint REFERENCES nodes (id),
    at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, seq)
);
-- A second guard on exactly-once: an item range is accepted at most once.
CREATE UNIQUE INDEX journal_accepted_once ON journal (job_id, variant, first_item) WHERE type = 1;

CREATE TABLE events (
    seq         bigserial PRIMARY KEY,
    job_id      bigint REFERENCES jobs (id) ON DELETE CASCADE,
    kind        text NOT NULL,
    body        jsonb NOT NULL,
    at          timestamptz NOT NULL DEFAULT now()
);

-- New jobs wake the coordinator; a periodic sweep covers a missed notice.
CREATE FUNCTION notify_pending_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('pending_job', NEW.id::text);
    RETURN NEW;
END;
$$;

CREATE TRIGGER jobs_notify_pending AFTER INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION notify_pending_job();
