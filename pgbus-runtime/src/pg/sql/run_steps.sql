-- A run's step attempts in order. $1 run id
SELECT id, step_name, attempt, status, outcome, queue, priority, scheduled_at, started_at,
       finished_at, stall_at, worker_id, output, error_class, error_message, error_causes,
       waiting_for, waiting_since, created_at
FROM {schema}.steps WHERE run_id = $1 ORDER BY id
