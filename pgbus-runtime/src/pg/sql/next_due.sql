-- Milliseconds until the next scheduled step of these queues and workflows is due
-- (negative when one is due already), or NULL when none is scheduled.
-- $1 queues, $2 workflows, $3 now (NULL = clock_timestamp())
SELECT (extract(epoch FROM min(scheduled_at) - coalesce($3::timestamptz, clock_timestamp())) * 1000)::bigint
FROM {schema}.steps
WHERE status = 'scheduled' AND queue = ANY($1) AND workflow = ANY($2)
