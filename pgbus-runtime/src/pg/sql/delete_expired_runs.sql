-- Retention: deletes up to $3 finished or cancelled runs whose last change is
-- older than $2 ms, with their steps, events, signals and batches (ON DELETE
-- CASCADE). SKIP LOCKED, so sweeps in many workers share the work.
-- $1 now (NULL = clock_timestamp()), $2 retention (ms), $3 batch size
WITH doomed AS (
    SELECT id
    FROM {schema}.runs
    WHERE status IN ('finished', 'cancelled')
      AND updated_at < coalesce($1::timestamptz, clock_timestamp()) - $2::bigint * interval '1 millisecond'
    ORDER BY updated_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {schema}.runs r USING doomed WHERE r.id = doomed.id
