-- One run, with how many attempts, events, pauses, signals and batches it has
-- in all, and, when it is `ready` and no live worker can run its due step,
-- that row and what no live worker has of it (`unrunnable`: 'workflow' when
-- no live worker registered the workflow, 'step' when none of the live
-- workers' definitions of it holds the step, a gravestone counting as held,
-- 'queue' when none of the live workers that hold it claims from the row's
-- queue). Live: a worker row whose heartbeat is within the lost-worker
-- threshold.
-- Due: the latest attempt of the current step (one probe of the steps'
-- (run_id, step_name, attempt) key), `scheduled` or `waiting`, due at or
-- before now.
-- The run that started it, for a fan_out child (`parent_run`: its batch's
-- parent step's run) and that step's name (`parent_step`), and how many
-- children its own batches hold.
-- $1 run id, $2 the most bytes of input text to read (NULL: any), $3 now
-- (NULL = clock_timestamp()), $4 lost-worker threshold (ms)
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
)
SELECT r.id, r.workflow, r.definition_digest, r.options_digest, r.step_plan, r.status, r.current_step,
       CASE WHEN $2::bigint IS NULL OR octet_length(r.input::text) <= $2 THEN r.input END AS input,
       CASE WHEN $2::bigint IS NOT NULL THEN octet_length(r.input::text)::bigint END AS input_bytes,
       r.idempotency_key, r.concurrency_key, r.error_class, r.error_message, r.created_at, r.updated_at,
       r.paused_at, r.cancelled_at, r.finished_at, r.parent_batch_id,
       r.deadline_at,
       (SELECT count(*) FROM {schema}.steps WHERE run_id = $1) AS attempt_count,
       (SELECT count(*) FROM {schema}.events WHERE run_id = $1) AS event_count,
       (SELECT count(*) FROM {schema}.events WHERE run_id = $1 AND event = 'paused')
           AS pause_count,
       (SELECT count(*) FROM {schema}.signals WHERE run_id = $1) AS signal_count,
       (SELECT count(*) FROM {schema}.batches WHERE run_id = $1) AS batch_count,
       (SELECT b.run_id FROM {schema}.batches b WHERE b.id = r.parent_batch_id) AS parent_run,
       (SELECT s.step_name FROM {schema}.batches b JOIN {schema}.steps s ON s.id = b.parent_step_id
        WHERE b.id = r.parent_batch_id) AS parent_step,
       (SELECT coalesce(sum(b.total), 0)::bigint FROM {schema}.batches b WHERE b.run_id = $1)
           AS children,
       u.id AS unrunnable_step_id, u.step_name AS unrunnable_step,
       u.queue AS unrunnable_queue, u.scheduled_at AS unrunnable_since,
       u.missing AS unrunnable
FROM {schema}.runs r
CROSS JOIN t
LEFT JOIN LATERAL (
    SELECT d.id, d.step_name, d.queue, d.scheduled_at,
           CASE
               WHEN NOT EXISTS (SELECT 1 FROM live WHERE live.workflow = d.workflow)
                   THEN 'workflow'
               WHEN NOT EXISTS (
                   SELECT 1 FROM live
                   WHERE live.workflow = d.workflow
                     AND live.step_plan @> jsonb_build_array(jsonb_build_object('name', d.step_name)))
                   THEN 'step'
               WHEN NOT EXISTS (
                   SELECT 1 FROM live
                   WHERE live.workflow = d.workflow
                     AND live.step_plan @> jsonb_build_array(jsonb_build_object('name', d.step_name))
                     AND d.queue = ANY (live.queues))
                   THEN 'queue'
           END AS missing
    FROM (
        SELECT s.id, s.workflow, s.step_name, s.queue, s.status, s.scheduled_at
        FROM {schema}.steps s
        WHERE s.run_id = r.id AND s.step_name = r.current_step
        ORDER BY s.attempt DESC
        LIMIT 1
    ) d
    WHERE r.status = 'ready'
      AND d.status IN ('scheduled', 'waiting')
      AND d.scheduled_at <= t.now
) u ON u.missing IS NOT NULL
WHERE r.id = $1
