-- Records that an attempt consumed a signal, in the attempt's outcome
-- transaction. $1 signal id, $2 step id, $3 now
UPDATE {schema}.signals
SET consumed_by = $2, consumed_at = $3
WHERE id = $1 AND consumed_by IS NULL
