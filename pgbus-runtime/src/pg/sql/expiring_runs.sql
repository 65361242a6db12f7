-- Runs past their deadline that have not ended, oldest deadline first: what
-- the sweep's deadline pass acts on, each then in a transaction of its own
-- under the run's lock (lock_run.sql), where the engine decides again. No
-- locks here: two sweepers may read the same run, and the second finds its
-- deadline spent. An index range scan of the partial index `runs_deadline`
-- (the time read once, so it bounds the scan).
-- $1 now (NULL = clock_timestamp()), $2 limit
WITH t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
)
SELECT r.id
FROM {schema}.runs r
WHERE r.deadline_at <= (SELECT now FROM t)
  AND r.status IN ('ready', 'performing', 'paused')
ORDER BY r.deadline_at, r.id
LIMIT $2
