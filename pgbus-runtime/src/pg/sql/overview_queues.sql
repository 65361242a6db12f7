-- Per queue, now: steps due (`scheduled`, due by now, not held, their run
-- `ready`: what a claim would take; the partial index `steps_due_or_waiting`
-- and one probe of the run's key each), the oldest due time
-- among those read, steps held back by a concurrency limit (`steps_held`)
-- and attempts in flight (`steps_in_progress`). Each of the three reads
-- stops at $2 rows in all (not per queue), so a backlog of any size costs a
-- bounded read; a count that reached $2 is a floor. The queues: those with
-- rows read here.
-- $1 now (NULL = clock_timestamp()), $2 the most rows each read takes
WITH t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
), due AS (
    SELECT s.queue, s.scheduled_at
    FROM {schema}.steps s, t
    WHERE s.status IN ('scheduled', 'waiting') AND s.held_by IS NULL
      AND s.status = 'scheduled' AND s.scheduled_at <= t.now
      AND (SELECT r.status FROM {schema}.runs r WHERE r.id = s.run_id) = 'ready'
    LIMIT $2
), held AS (
    SELECT s.queue
    FROM {schema}.steps s
    WHERE s.held_by IS NOT NULL AND s.status IN ('scheduled', 'waiting')
    LIMIT $2
), flying AS (
    SELECT s.queue
    FROM {schema}.steps s
    WHERE s.status = 'in_progress'
    LIMIT $2
)
SELECT q.queue,
       (SELECT count(*) FROM due WHERE due.queue = q.queue) AS due,
       (SELECT min(due.scheduled_at) FROM due WHERE due.queue = q.queue) AS oldest_due,
       (SELECT count(*) FROM held WHERE held.queue = q.queue) AS held,
       (SELECT count(*) FROM flying WHERE flying.queue = q.queue) AS in_flight
FROM (SELECT queue FROM due UNION SELECT queue FROM held
      UNION SELECT queue FROM flying) q
ORDER BY q.queue COLLATE "C"
