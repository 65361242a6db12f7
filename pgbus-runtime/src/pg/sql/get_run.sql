-- One run, with how many attempts, events, pauses, signals and batches it has
-- in all.
-- $1 run id, $2 the most bytes of input text to read (NULL: any)
SELECT id, workflow, definition_digest, options_digest, step_plan, status, current_step,
       CASE WHEN $2::bigint IS NULL OR octet_length(input::text) <= $2 THEN input END AS input,
       CASE WHEN $2::bigint IS NOT NULL THEN octet_length(input::text)::bigint END AS input_bytes,
       idempotency_key, error_class, error_message, created_at, updated_at, paused_at,
       cancelled_at, finished_at, parent_batch_id,
       (SELECT count(*) FROM {schema}.steps WHERE run_id = $1) AS attempt_count,
       (SELECT count(*) FROM {schema}.events WHERE run_id = $1) AS event_count,
       (SELECT count(*) FROM {schema}.events WHERE run_id = $1 AND event = 'paused')
           AS pause_count,
       (SELECT count(*) FROM {schema}.signals WHERE run_id = $1) AS signal_count,
       (SELECT count(*) FROM {schema}.batches WHERE run_id = $1) AS batch_count
FROM {schema}.runs WHERE id = $1
