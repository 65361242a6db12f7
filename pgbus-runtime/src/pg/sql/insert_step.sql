-- Schedules a step row. $1 run id, $2 workflow, $3 step name, $4 attempt,
-- $5 reattempts, $6 queue, $7 priority, $8 timeout_ms, $9 delay (ms), $10 now
INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, reattempts, status, queue,
                            priority, timeout_ms, scheduled_at, created_at)
VALUES ($1, $2, $3, $4, $5, 'scheduled', $6, $7, $8,
        $10::timestamptz + $9::bigint * interval '1 millisecond', $10)
RETURNING id
