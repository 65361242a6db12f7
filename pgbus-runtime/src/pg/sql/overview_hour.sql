-- The last hour, per minute (aligned on the minute, oldest first, minutes
-- with nothing absent): runs that finished and were cancelled (the partial
-- index `runs_ended`), and times runs paused (`events_paused`). Plus, over
-- the hour, runs cancelled and runs paused now whose pause came with a step
-- error and began within the hour (`runs_paused`, at most $2 paused runs
-- read): the failures, on a last row whose `minute` is NULL. Each read covers
-- one hour of the indexes, never history.
-- $1 now (NULL = clock_timestamp()), $2 the most paused runs read
WITH t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
), ended AS (
    SELECT coalesce(r.finished_at, r.cancelled_at, r.created_at) AS at, r.status
    FROM {schema}.runs r, t
    WHERE r.status IN ('finished', 'cancelled')
      AND coalesce(r.finished_at, r.cancelled_at, r.created_at) > t.now - interval '1 hour'
      AND coalesce(r.finished_at, r.cancelled_at, r.created_at) <= t.now
), pauses AS (
    SELECT e.created_at AS at
    FROM {schema}.events e, t
    WHERE e.event = 'paused'
      AND e.created_at > t.now - interval '1 hour' AND e.created_at <= t.now
), marks AS (
    SELECT date_trunc('minute', at) AS minute, status AS kind FROM ended
    UNION ALL
    SELECT date_trunc('minute', at), 'paused' FROM pauses
)
SELECT minute,
       count(*) FILTER (WHERE kind = 'finished') AS finished,
       count(*) FILTER (WHERE kind = 'cancelled') AS cancelled,
       count(*) FILTER (WHERE kind = 'paused') AS paused
FROM marks
GROUP BY minute
UNION ALL
SELECT NULL, 0, 0,
       (SELECT count(*) FROM (
            SELECT 1 FROM {schema}.runs r, t
            WHERE r.status = 'paused' AND r.error_class IS NOT NULL
              AND r.paused_at > t.now - interval '1 hour' AND r.paused_at <= t.now
            LIMIT $2) p)
ORDER BY 1 NULLS LAST
