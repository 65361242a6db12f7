-- Records that an attempt's completion lost its fence. $1 run id, $2 step id,
-- $3 step name, $4 attempt, $5 worker id, $6 details, $7 now
INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, details, created_at)
VALUES ($1, $2, $3, $4, 'late_completion_ignored', $5, $6, coalesce($7::timestamptz, clock_timestamp()))
