-- Attempts a live worker holds in the database but not in memory (their claim's
-- reply was lost): due for the sweep now, which applies the stall action, instead
-- of at their stall horizon. Fenced on this worker still holding them.
-- $1 worker id, $2 step ids, $3 now (NULL = clock_timestamp())
UPDATE {schema}.steps
SET stall_at = coalesce($3::timestamptz, clock_timestamp())
WHERE id = ANY ($2) AND worker_id = $1 AND status = 'in_progress'
