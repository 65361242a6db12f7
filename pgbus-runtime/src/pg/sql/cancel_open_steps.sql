-- Cancels every open step row of a run. $1 run id, $2 now
UPDATE {schema}.steps
SET status = 'cancelled', outcome = 'cancelled', finished_at = $2
WHERE run_id = $1 AND status IN ('scheduled', 'in_progress', 'waiting')
