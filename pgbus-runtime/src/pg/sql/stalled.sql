-- Attempts in progress that the sweep must repair: past their stall horizon
-- (`timeout`: the step's own timeout, else the stall threshold, set at claim), or
-- claimed by a worker whose row is gone or whose heartbeat is older than the
-- lost-worker threshold (`worker_lost`). Waiting steps are never in progress, so a
-- step parked on a signal is never taken for stalled.
-- $1 now (NULL = clock_timestamp()), $2 lost-worker threshold (ms), $3 limit
WITH t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
)
SELECT s.id, s.run_id, s.workflow, s.step_name, s.attempt, s.reattempts, s.scheduled_at,
       s.started_at, s.timeout_ms, s.worker_id,
       CASE WHEN s.stall_at <= t.now THEN 'timeout' ELSE 'worker_lost' END AS detection
FROM {schema}.steps s
CROSS JOIN t
LEFT JOIN {schema}.workers w ON w.id = s.worker_id
WHERE s.status = 'in_progress'
  AND (s.stall_at <= t.now
       OR w.id IS NULL
       OR w.heartbeat_at < t.now - $2::bigint * interval '1 millisecond')
ORDER BY s.id
LIMIT $3
