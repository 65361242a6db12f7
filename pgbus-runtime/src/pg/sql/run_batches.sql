-- A run's latest fan_out batches, in order; for each open one, the lowest id
-- of a child no live worker can run (`ready`, its due step's workflow or step
-- held by no live worker, or its queue claimed by none that holds it, as
-- get_run.sql decides it) among the first $5
-- children the index yields, so a batch of any size costs a bounded look.
-- $1 run id, $2 how many, $3 now (NULL = clock_timestamp()), $4 lost-worker
-- threshold (ms), $5 how many children of an open batch to look at
WITH t AS (
    SELECT coalesce($3::timestamptz, clock_timestamp()) AS now
), live AS MATERIALIZED (
    -- live_definitions(), with each live worker's queues: a row runs only on
    -- a worker whose definition has its step and that claims from its queue.
    SELECT wd.workflow, d.step_plan, w.queues
    FROM t
    JOIN {schema}.workers w
      ON w.heartbeat_at >= t.now - $4::bigint * interval '1 millisecond'
    JOIN {schema}.worker_definitions wd ON wd.worker_id = w.id
    JOIN {schema}.definitions d ON d.workflow = wd.workflow AND d.digest = wd.digest
), latest AS (
    SELECT id, parent_step_id, total, succeeded, failed, status, created_at, resolved_at
    FROM {schema}.batches WHERE run_id = $1 ORDER BY id DESC LIMIT $2
)
SELECT b.*,
       CASE WHEN b.status = 'open' THEN (
           SELECT min(c.id)
           FROM (
               SELECT c.id, c.status, c.current_step
               FROM {schema}.runs c
               WHERE c.parent_batch_id = b.id
               LIMIT $5
           ) c
           CROSS JOIN LATERAL (
               SELECT s.workflow, s.step_name, s.queue, s.status, s.scheduled_at
               FROM {schema}.steps s
               WHERE s.run_id = c.id AND s.step_name = c.current_step
               ORDER BY s.attempt DESC
               LIMIT 1
           ) d
           WHERE c.status = 'ready'
             AND d.status IN ('scheduled', 'waiting')
             AND d.scheduled_at <= t.now
             AND NOT EXISTS (
                 SELECT 1 FROM live
                 WHERE live.workflow = d.workflow
                   AND live.step_plan @> jsonb_build_array(jsonb_build_object('name', d.step_name))
                   AND d.queue = ANY (live.queues))
       ) END AS unrunnable_child
FROM latest b
CROSS JOIN t
ORDER BY b.id
