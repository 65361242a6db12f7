-- A run's latest fan_out batches, in order. $1 run id, $2 how many
SELECT * FROM (
    SELECT id, parent_step_id, total, succeeded, failed, status, created_at, resolved_at
    FROM {schema}.batches WHERE run_id = $1 ORDER BY id DESC LIMIT $2
) latest ORDER BY id
