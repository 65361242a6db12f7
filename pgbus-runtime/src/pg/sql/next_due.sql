-- Milliseconds until the next claimable step of these queues is due, of the
-- steps the worker's definitions hold (as claim.sql filters them)
-- (zero or negative when one is due already), or NULL when none is scheduled.
-- Steps of runs that are not `ready` (a paused run holding its next step) do not
-- count: no claim can take them, so waking for them would spin; nor do those
-- of runs past their deadline, for the same reason. Nor do rows a
-- concurrency limit holds back (`held_by`, out of the due index): a release
-- wakes them, with a notification. A waiting row counts at the end of its
-- `wait_timeout`; a throttled row at its rate window's opening.
--
-- Read from the due index alone, whatever the statistics: the priorities
-- present in each queue found by skipping through the index (one probe each),
-- then per queue and priority the earliest row whose run is ready, in index
-- order, each run read by primary key. A join to runs would let the planner
-- scan every run (history included) on each call.
-- $1 queues, $2 what the worker runs (JSON, as claim.sql's $2), $3 now (NULL =
-- clock_timestamp())
WITH RECURSIVE levels AS (
    SELECT q.name,
           (SELECT min(s.priority) FROM {schema}.steps s
            WHERE s.queue = q.name AND s.status IN ('scheduled', 'waiting')
              AND s.held_by IS NULL) AS priority
    FROM (SELECT DISTINCT u.name FROM unnest($1::text[]) AS u(name)) AS q
    UNION ALL
    SELECT l.name,
           (SELECT min(s.priority) FROM {schema}.steps s
            WHERE s.queue = l.name AND s.status IN ('scheduled', 'waiting')
              AND s.held_by IS NULL AND s.priority > l.priority)
    FROM levels l
    WHERE l.priority IS NOT NULL
)
SELECT (extract(epoch FROM min(d.scheduled_at) - coalesce($3::timestamptz, clock_timestamp())) * 1000)::bigint
FROM levels l
CROSS JOIN LATERAL (
    SELECT s.scheduled_at
    FROM {schema}.steps s
    WHERE s.queue = l.name AND s.priority = l.priority
      AND s.status IN ('scheduled', 'waiting') AND s.held_by IS NULL
      AND ($2::jsonb -> s.workflow -> 'steps') ? s.step_name
      AND (SELECT r.status FROM {schema}.runs r WHERE r.id = s.run_id) = 'ready'
      AND (SELECT r.deadline_at IS NULL
                  OR r.deadline_at > coalesce($3::timestamptz, clock_timestamp())
           FROM {schema}.runs r WHERE r.id = s.run_id)
    ORDER BY s.scheduled_at, s.id
    LIMIT 1
) d
