-- The attempt fence: ends an attempt only if it is still the in-progress attempt
-- this worker claimed. Zero rows means a late completion. An attempt that
-- recorded no output keeps the one it stored when it parked (a fan_out body's),
-- and returns it (`kept_output`): a step handed on at once reads it.
-- $1 step id, $2 attempt, $3 worker id, $4 status, $5 outcome, $6 output,
-- $7 error class, $8 error message, $9 error causes (jsonb), $10 now
UPDATE {schema}.steps
SET status = $4, outcome = $5, output = coalesce($6::jsonb, output),
    error_class = $7, error_message = $8, error_causes = $9,
    finished_at = coalesce($10::timestamptz, clock_timestamp())
WHERE id = $1 AND attempt = $2 AND worker_id = $3 AND status = 'in_progress'
RETURNING finished_at, CASE WHEN $6::jsonb IS NULL THEN output END AS kept_output
