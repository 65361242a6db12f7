-- Retention: deletes up to $3 finished or cancelled runs that ended more than
-- $2 ms ago (index `runs_ended`; a run ended by hand without its end time
-- counts from its creation), with their steps, events, signals and batches (ON DELETE
-- CASCADE). SKIP LOCKED, so sweeps in many workers share the work. The
-- cutoff is a subquery, computed once: compared with `clock_timestamp()`
-- itself, which changes within a statement, the index could order the scan
-- but not bound it, and a sweep read every ended run.
-- $1 now (NULL = clock_timestamp()), $2 retention (ms), $3 batch size
WITH doomed AS (
    SELECT id
    FROM {schema}.runs
    WHERE status IN ('finished', 'cancelled')
      AND coalesce(finished_at, cancelled_at, created_at)
          < (SELECT coalesce($1::timestamptz, clock_timestamp()) - $2::bigint * interval '1 millisecond')
    ORDER BY coalesce(finished_at, cancelled_at, created_at)
    LIMIT $3
    FOR UPDATE SKIP LOCKED
)
DELETE FROM {schema}.runs r USING doomed WHERE r.id = doomed.id
