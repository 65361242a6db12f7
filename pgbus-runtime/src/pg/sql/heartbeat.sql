-- A worker is alive: refreshes its row and returns which of the attempts it runs
-- have lost their claim (cancelled, stalled by the sweep, or claimed again), so it
-- can tell their bodies, and which attempts the database says it holds that it
-- does not know of (`orphans`: a claim whose reply was lost with the connection).
-- `beats` is 0 when the row is gone (the sweep removed it after a long silence):
-- the worker writes it again.
-- $1 worker id, $2 now (NULL = clock_timestamp()), $3 step ids it runs
WITH beat AS (
    UPDATE {schema}.workers
    SET heartbeat_at = coalesce($2::timestamptz, clock_timestamp())
    WHERE id = $1
    RETURNING id
)
SELECT (SELECT count(*) FROM beat) AS beats,
       (SELECT coalesce(array_agg(c.id), '{}')
        FROM unnest($3::bigint[]) AS c(id)
        WHERE NOT EXISTS (SELECT 1 FROM {schema}.steps s
                          WHERE s.id = c.id AND s.status = 'in_progress'
                            AND s.worker_id = $1)) AS lost,
       (SELECT coalesce(array_agg(s.id), '{}')
        FROM {schema}.steps s
        WHERE s.worker_id = $1 AND s.status = 'in_progress'
          AND s.id <> ALL ($3::bigint[])) AS orphans
