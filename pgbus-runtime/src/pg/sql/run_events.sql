-- A run's events in order. $1 run id
SELECT id, step_id, step_name, attempt, event, actor, reason, details, created_at
FROM {schema}.events WHERE run_id = $1 ORDER BY id
