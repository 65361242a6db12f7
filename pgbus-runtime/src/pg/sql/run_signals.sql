-- A run's signals in the order they were sent. $1 run id
SELECT id, name, payload, created_at, consumed_by, consumed_at
FROM {schema}.signals WHERE run_id = $1 ORDER BY id
