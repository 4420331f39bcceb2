-- 003_strategies.sql — tournament and stat_weights jobs: their settings for
-- the scheduler (a msgpack map: the variants' names, stat_weights' steps, a
-- tournament's phase_items, growth, keep, minimize and z). NULL for single
-- jobs. The variants' parameters are in the work context (jobs.params).

ALTER TABLE jobs ADD COLUMN strategy_params bytea;
