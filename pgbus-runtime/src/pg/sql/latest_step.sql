-- A run's latest step row, for an operator action (the run is locked). $1 run id
SELECT id, step_name, attempt, status, outcome, queue, priority, timeout_ms
FROM {schema}.steps WHERE run_id = $1 ORDER BY id DESC LIMIT 1
