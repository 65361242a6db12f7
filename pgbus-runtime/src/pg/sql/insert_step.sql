-- Schedules a step row. A reattempt ($5 > 0) keeps the time the attempt before
-- it first parked, so a `wait_timeout` is not restarted by reattempts.
-- $1 run id, $2 workflow, $3 step name, $4 attempt, $5 reattempts, $6 queue,
-- $7 priority, $8 timeout_ms, $9 delay (ms), $10 now
INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, reattempts, status, queue,
                            priority, timeout_ms, scheduled_at, created_at, waiting_since)
VALUES ($1, $2, $3, $4, $5, 'scheduled', $6, $7, $8,
        $10::timestamptz + $9::bigint * interval '1 millisecond', $10,
        CASE WHEN $5 > 0 THEN
            (SELECT p.waiting_since FROM {schema}.steps p
             WHERE p.run_id = $1 AND p.step_name = $3 AND p.attempt = $4 - 1)
        END)
RETURNING id
