-- Due rows no live worker can run, for the sweep's grace rule: `scheduled`
-- rows (and `waiting` rows past their wait timeout) due for longer than the
-- grace, their run `ready`, of a workflow some live worker registered, whose
-- step no live worker's definition of that workflow holds (a gravestone
-- counts as held). Live: a worker row whose heartbeat is within the
-- lost-worker threshold. Rows of a workflow no live worker registered are not
-- among them: they wait for a worker of it. Nor are rows a concurrency limit
-- holds back (`held_by`): they wait for a slot, and are due again when woken.
--
-- Read from the due index alone, as next_due.sql does: the queues present
-- found by skipping through the index, then the priorities of each, then per
-- queue and priority the rows due before `now - grace` in index order. A
-- healthy system has next to none; the scan touches only rows that have been
-- due for longer than the grace, never history.
-- $1 now (NULL = clock_timestamp()), $2 grace (ms), $3 lost-worker threshold
-- (ms), $4 limit
WITH RECURSIVE t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
), live AS (
    SELECT l.workflow, l.step_plan
    FROM t, {schema}.live_definitions(t.now, $3::bigint) l
), held AS (
    SELECT DISTINCT l.workflow, p->>'name' AS step
    FROM live l
    CROSS JOIN LATERAL jsonb_array_elements(l.step_plan) AS p
), queues AS (
    SELECT (SELECT min(s.queue) FROM {schema}.steps s
            WHERE s.status IN ('scheduled', 'waiting') AND s.held_by IS NULL) AS name
    UNION ALL
    SELECT (SELECT min(s.queue) FROM {schema}.steps s
            WHERE s.status IN ('scheduled', 'waiting') AND s.held_by IS NULL
              AND s.queue > q.name)
    FROM queues q
    WHERE q.name IS NOT NULL
), levels AS (
    SELECT q.name,
           (SELECT min(s.priority) FROM {schema}.steps s
            WHERE s.queue = q.name AND s.status IN ('scheduled', 'waiting')
              AND s.held_by IS NULL) AS priority
    FROM queues q
    WHERE q.name IS NOT NULL
    UNION ALL
    SELECT l.name,
           (SELECT min(s.priority) FROM {schema}.steps s
            WHERE s.queue = l.name AND s.status IN ('scheduled', 'waiting')
              AND s.held_by IS NULL AND s.priority > l.priority)
    FROM levels l
    WHERE l.priority IS NOT NULL
)
SELECT d.*
FROM levels l
CROSS JOIN LATERAL (
    SELECT s.id, s.run_id, s.workflow, s.step_name, s.attempt, s.reattempts,
           s.scheduled_at, t.now AS started_at, s.timeout_ms, s.waiting_since
    FROM {schema}.steps s
    CROSS JOIN t
    WHERE s.queue = l.name AND s.priority = l.priority
      AND s.status IN ('scheduled', 'waiting') AND s.held_by IS NULL
      AND s.scheduled_at <= t.now - $2::bigint * interval '1 millisecond'
      AND s.workflow IN (SELECT live.workflow FROM live)
      AND (s.workflow, s.step_name) NOT IN (SELECT held.workflow, held.step FROM held)
      AND (SELECT r.status FROM {schema}.runs r WHERE r.id = s.run_id) = 'ready'
    ORDER BY s.scheduled_at, s.id
    LIMIT $4
) d
WHERE l.priority IS NOT NULL
ORDER BY d.scheduled_at, d.id
LIMIT $4
