-- An operator skips a pending row: fenced on it still being scheduled or waiting.
-- $1 step id, $2 now
UPDATE {schema}.steps
SET status = 'skipped', outcome = 'skipped', finished_at = $2
WHERE id = $1 AND status IN ('scheduled', 'waiting')
