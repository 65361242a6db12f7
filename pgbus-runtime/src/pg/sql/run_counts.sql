-- Runs started, finished, cancelled, and times runs were paused, per time
-- bucket of $3 ms aligned on the Unix epoch, from $1 to $2 (both included).
-- Started, finished and cancelled read the runs' own times (a full scan of
-- runs, which retention bounds); paused reads `paused` events through their
-- partial index. Buckets with nothing are absent.
-- $1 from, $2 to, $3 bucket (ms)
WITH times AS (
    SELECT created_at AS at, 'started' AS kind FROM {schema}.runs
    WHERE created_at >= $1 AND created_at <= $2
    UNION ALL
    SELECT finished_at, 'finished' FROM {schema}.runs
    WHERE finished_at >= $1 AND finished_at <= $2
    UNION ALL
    SELECT cancelled_at, 'cancelled' FROM {schema}.runs
    WHERE cancelled_at >= $1 AND cancelled_at <= $2
    UNION ALL
    SELECT created_at, 'paused' FROM {schema}.events
    WHERE event = 'paused' AND created_at >= $1 AND created_at <= $2
)
SELECT date_bin($3::bigint * interval '1 millisecond', at, TIMESTAMPTZ 'epoch') AS bucket,
       count(*) FILTER (WHERE kind = 'started') AS started,
       count(*) FILTER (WHERE kind = 'finished') AS finished,
       count(*) FILTER (WHERE kind = 'paused') AS paused,
       count(*) FILTER (WHERE kind = 'cancelled') AS cancelled
FROM times
GROUP BY 1
ORDER BY 1
