-- Milliseconds until the next claimable step of these queues and workflows is due
-- (zero or negative when one is due already), or NULL when none is scheduled.
-- Steps of runs that are not `ready` (a paused run holding its next step) do not
-- count: no claim can take them, so waking for them would spin. A waiting row
-- counts at the end of its `wait_timeout`.
-- $1 queues, $2 workflows, $3 now (NULL = clock_timestamp())
SELECT (extract(epoch FROM min(s.scheduled_at) - coalesce($3::timestamptz, clock_timestamp())) * 1000)::bigint
FROM {schema}.steps s
JOIN {schema}.runs r ON r.id = s.run_id AND r.status = 'ready'
WHERE s.status IN ('scheduled', 'waiting') AND s.queue = ANY($1) AND s.workflow = ANY($2)
