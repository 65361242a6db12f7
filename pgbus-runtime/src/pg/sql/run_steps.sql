-- A run's latest step attempts, in order. $1 run id, $2 how many, $3 the most
-- bytes of output text to read (NULL: any)
SELECT * FROM (
    SELECT id, step_name, attempt, status, outcome, queue, priority, scheduled_at, started_at,
           finished_at, stall_at, worker_id,
           CASE WHEN $3::bigint IS NULL OR octet_length(output::text) <= $3 THEN output END
               AS output,
           CASE WHEN $3::bigint IS NOT NULL THEN octet_length(output::text)::bigint END AS output_bytes,
           error_class, error_message, error_causes, waiting_for, waiting_since, created_at
    FROM {schema}.steps WHERE run_id = $1 ORDER BY id DESC LIMIT $2
) latest ORDER BY id
