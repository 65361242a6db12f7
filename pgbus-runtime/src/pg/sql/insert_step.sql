-- Schedules a step row. A reattempt ($5 > 0) keeps the time the attempt before
-- it first parked, so a `wait_timeout` is not restarted by reattempts. With a
-- worker id ($11) the row is written claimed by that worker instead, as
-- claim.sql would leave it: `in_progress`, started now, its stall horizon the
-- step's timeout or $12 ms away, and a `step_started` event by the worker.
-- $1 run id, $2 workflow, $3 step name, $4 attempt, $5 reattempts, $6 queue,
-- $7 priority, $8 timeout_ms, $9 delay (ms), $10 now, $11 worker id (NULL =
-- scheduled), $12 stall threshold (ms)
WITH step AS (
    INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, reattempts, status,
                                queue, priority, timeout_ms, scheduled_at, created_at,
                                waiting_since, started_at, worker_id, stall_at)
    VALUES ($1, $2, $3, $4, $5,
            CASE WHEN $11::text IS NULL THEN 'scheduled' ELSE 'in_progress' END,
            $6, $7, $8,
            $10::timestamptz + $9::bigint * interval '1 millisecond', $10,
            CASE WHEN $5 > 0 THEN
                (SELECT p.waiting_since FROM {schema}.steps p
                 WHERE p.run_id = $1 AND p.step_name = $3 AND p.attempt = $4 - 1)
            END,
            CASE WHEN $11::text IS NOT NULL THEN $10::timestamptz END,
            $11,
            CASE WHEN $11::text IS NOT NULL THEN
                $10::timestamptz + coalesce($8::bigint, $12::bigint) * interval '1 millisecond'
            END)
    RETURNING id, step_name, attempt, started_at
), started AS (
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, created_at)
    SELECT $1, s.id, s.step_name, s.attempt, 'step_started', $11, s.started_at
    FROM step s
    WHERE $11::text IS NOT NULL
    RETURNING id
)
SELECT s.id, (SELECT count(*) FROM started) AS started
FROM step s
