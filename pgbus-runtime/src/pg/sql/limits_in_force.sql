-- The concurrency limits in force (a small table: one row per workflow
-- limit and queue limit registered), by key bytewise.
-- $1 the most rows read
SELECT f.key, f.workflow, f.max_in_flight::bigint AS max_in_flight, f.holder
FROM {schema}.flow_limits f
ORDER BY f.key COLLATE "C"
LIMIT $1
