-- Applies a planned run change. Error columns are set when the run pauses on an
-- error and cleared otherwise.
-- $1 run id, $2 status, $3 current step, $4 error class, $5 error message, $6 now
UPDATE {schema}.runs
SET status = $2,
    current_step = $3,
    error_class = $4,
    error_message = $5,
    updated_at = $6,
    paused_at = CASE WHEN $2 = 'paused' AND status <> 'paused' THEN $6 ELSE paused_at END,
    cancelled_at = CASE WHEN $2 = 'cancelled' THEN $6 ELSE cancelled_at END,
    finished_at = CASE WHEN $2 = 'finished' THEN $6 ELSE finished_at END
WHERE id = $1
