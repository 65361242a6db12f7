-- A run's deadline fired: cleared, so it fires once (a run it paused goes on
-- when resumed). Its `deadline_exceeded` event keeps the time.
-- $1 run id
UPDATE {schema}.runs
SET deadline_at = NULL
WHERE id = $1 AND deadline_at IS NOT NULL
