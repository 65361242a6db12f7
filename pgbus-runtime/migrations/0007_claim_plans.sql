-- Retention is the only reader of runs by status and age, and it reads finished
-- and cancelled runs alone. An index over every status also offered the
-- planner `status = 'ready'` when it planned the claim on empty-table
-- statistics, and that plan (probe every ready run for each due step) made
-- claims quadratic in the backlog; the claim reads a run by primary key only.
DROP INDEX {schema}.runs_status_updated;
CREATE INDEX runs_ended_updated ON {schema}.runs (updated_at)
    WHERE status IN ('finished', 'cancelled');
