-- 008_job_policy.sql — who may run a job, and how its results are checked.
--
-- jobs.tiers (001) already held the node tiers that may run a job; a
-- submission now sets it (docs/api.md, "tiers"). The verification policy:
-- check_rate, the floor of the share of results from untrusted tiers that
-- the coordinator recomputes on a node of another owner to check them (0:
-- the coordinator's own policy decides), and trusted_tiers, the tiers
-- whose results are taken without a check (bits as in tiers: own 1, team 2,
-- community 4, public 8; 0 trusts none).

ALTER TABLE jobs
    ADD COLUMN check_rate    double precision NOT NULL DEFAULT 0 CHECK (check_rate >= 0 AND check_rate <= 1),
    ADD COLUMN trusted_tiers smallint NOT NULL DEFAULT 1 CHECK (trusted_tiers BETWEEN 0 AND 15);

-- The names of a set of tier bits, most trusted first: what the API shows.
CREATE FUNCTION tier_names(bits smallint) RETURNS text[] LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT coalesce(array_agg(t ORDER BY i), '{}')
      FROM unnest('{own,team,community,public}'::text[]) WITH ORDINALITY AS u(t, i)
     WHERE bits::int & (1 << (i::int - 1)) <> 0
$$;
