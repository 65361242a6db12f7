-- A run's latest step attempts, in order; outputs measured only for the
-- attempts read. $1 run id, $2 how many, $3 the most bytes of output text to
-- read (NULL: any)
SELECT s.id, s.step_name, s.attempt, s.status, s.outcome, s.queue, s.priority,
       s.scheduled_at, s.started_at, s.finished_at, s.stall_at, s.worker_id,
       CASE WHEN $3::bigint IS NULL OR octet_length(s.output::text) <= $3 THEN s.output END
           AS output,
       CASE WHEN $3::bigint IS NOT NULL THEN octet_length(s.output::text)::bigint END
           AS output_bytes,
       s.error_class, s.error_message, s.error_causes, s.waiting_for, s.waiting_since,
       s.held_by, s.throttled_by, s.created_at
FROM (SELECT id FROM {schema}.steps WHERE run_id = $1 ORDER BY id DESC LIMIT $2) latest
JOIN {schema}.steps s ON s.id = latest.id
ORDER BY s.id
