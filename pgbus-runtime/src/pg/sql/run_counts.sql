-- Runs started, finished and cancelled, and times runs were paused, per time
-- bucket of $3 ms aligned on the Unix epoch, from $1 to $2 (both included),
-- runs split into top-level runs and fan-out children (`parent_batch_id`
-- set), of workflows whose name starts with $4. Each part reads at most $5
-- rows, the newest first, whatever the window's length, and stops there:
-- * started: runs by primary key, from the newest back to the first id
--   created at or after $1 (ids grow with creation time), which a binary
--   search of the primary key finds (`search`: one probe a step, at most
--   64), so no index on `created_at` is needed;
-- * finished and cancelled: `runs_ended` (migration 0018) from $2 back to $1;
-- * paused: `events_paused` from $2 back to $1, its index alone; with a
--   workflow prefix, each event and its run too, at most $6 of them.
-- The workflow filter applies to the rows read: a part that stops at $5 has
-- read $5 rows of every workflow. Each part reads its rows once, through an
-- aggregate with a grand total (no materialized set): per part ('started',
-- 'ended', 'paused'), one row per bucket with something counted (`a`, and
-- `a_children` of them children; for 'ended', `a` finished and `b`
-- cancelled; pauses are not split), and one total row (`total`) saying
-- how many rows it read, the oldest time it read, and whether the window
-- holds more than it read (`partial`: one index probe for a row of the
-- window older than the oldest read; a row at that very microsecond is not
-- looked for).
-- $1 from, $2 to, $3 bucket (ms), $4 workflow prefix (NULL = any), $5 the
-- most rows a part reads, $6 the most pauses read with a workflow prefix
WITH RECURSIVE search(lo, hi, n) AS (
    -- The first id created at or after $1 is in [lo, hi]; every id below
    -- lo was created before $1.
    SELECT min(r.id), max(r.id) + 1, 0 FROM {schema}.runs r
    UNION ALL
    SELECT CASE WHEN p.id < s.hi AND p.created_at < $1 THEN p.id + 1 ELSE s.lo END,
           CASE WHEN p.id < s.hi AND p.created_at < $1 THEN s.hi
                WHEN p.id < s.hi THEN p.id
                ELSE (s.lo + s.hi) / 2 END,
           s.n + 1
    FROM search s
    LEFT JOIN LATERAL (
        SELECT r.id, r.created_at FROM {schema}.runs r
        WHERE r.id >= (s.lo + s.hi) / 2
        ORDER BY r.id
        LIMIT 1
    ) p ON true
    WHERE s.lo < s.hi AND s.n < 64
), bound AS (
    SELECT coalesce((SELECT s.lo FROM search s ORDER BY s.n DESC LIMIT 1), 0) AS lo
), started AS (
    SELECT a.bucket,
           count(*) FILTER (WHERE a.counted) AS a,
           count(*) FILTER (WHERE a.counted AND a.child) AS a_children,
           0::bigint AS b, 0::bigint AS b_children,
           count(*) AS read, min(a.at) AS oldest, min(a.id) AS oldest_id,
           grouping(a.bucket) <> 0 AS total
    FROM (
        SELECT r.id, r.created_at AS at, r.parent_batch_id IS NOT NULL AS child,
               r.created_at >= $1 AND r.created_at <= $2
                   AND ($4::text IS NULL OR starts_with(r.workflow, $4)) AS counted,
               date_bin($3::bigint * interval '1 millisecond', r.created_at, TIMESTAMPTZ 'epoch') AS bucket
        FROM {schema}.runs r
        WHERE r.id >= (SELECT b.lo FROM bound b)
        ORDER BY r.id DESC
        LIMIT $5
    ) a
    GROUP BY GROUPING SETS ((a.bucket), ())
), ended AS (
    SELECT a.bucket,
           count(*) FILTER (WHERE a.counted AND a.status = 'finished') AS a,
           count(*) FILTER (WHERE a.counted AND a.status = 'finished' AND a.child) AS a_children,
           count(*) FILTER (WHERE a.counted AND a.status = 'cancelled') AS b,
           count(*) FILTER (WHERE a.counted AND a.status = 'cancelled' AND a.child) AS b_children,
           count(*) AS read, min(a.at) AS oldest, NULL::bigint AS oldest_id,
           grouping(a.bucket) <> 0 AS total
    FROM (
        SELECT coalesce(r.finished_at, r.cancelled_at, r.created_at) AS at, r.status,
               r.parent_batch_id IS NOT NULL AS child,
               $4::text IS NULL OR starts_with(r.workflow, $4) AS counted,
               date_bin($3::bigint * interval '1 millisecond',
                        coalesce(r.finished_at, r.cancelled_at, r.created_at),
                        TIMESTAMPTZ 'epoch') AS bucket
        FROM {schema}.runs r
        WHERE r.status IN ('finished', 'cancelled')
          AND coalesce(r.finished_at, r.cancelled_at, r.created_at) >= $1
          AND coalesce(r.finished_at, r.cancelled_at, r.created_at) <= $2
        ORDER BY coalesce(r.finished_at, r.cancelled_at, r.created_at) DESC
        LIMIT $5
    ) a
    GROUP BY GROUPING SETS ((a.bucket), ())
), paused AS (
    SELECT a.bucket,
           count(*) FILTER (WHERE a.counted) AS a,
           0::bigint AS a_children, 0::bigint AS b, 0::bigint AS b_children,
           count(*) AS read, min(a.at) AS oldest, NULL::bigint AS oldest_id,
           grouping(a.bucket) <> 0 AS total
    FROM (
        -- Every workflow: `events_paused` alone (an index-only scan; a
        -- pause event is rare among a run's events, so each one read from
        -- the table would be a page of its own).
        SELECT p.at, true AS counted,
               date_bin($3::bigint * interval '1 millisecond', p.at, TIMESTAMPTZ 'epoch') AS bucket
        FROM (
            SELECT e.created_at AS at
            FROM {schema}.events e
            WHERE $4::text IS NULL
              AND e.event = 'paused' AND e.created_at >= $1 AND e.created_at <= $2
            ORDER BY e.created_at DESC
            LIMIT $5
        ) p
        UNION ALL
        -- A workflow prefix: each pause's event and run read, at most $6.
        SELECT p.at, starts_with(r.workflow, $4),
               date_bin($3::bigint * interval '1 millisecond', p.at, TIMESTAMPTZ 'epoch')
        FROM (
            SELECT e.created_at AS at, e.run_id
            FROM {schema}.events e
            WHERE $4::text IS NOT NULL
              AND e.event = 'paused' AND e.created_at >= $1 AND e.created_at <= $2
            ORDER BY e.created_at DESC
            LIMIT $6
        ) p
        JOIN {schema}.runs r ON r.id = p.run_id
    ) a
    GROUP BY GROUPING SETS ((a.bucket), ())
)
SELECT 'started' AS part, s.bucket, s.a, s.a_children, s.b, s.b_children, s.read, s.oldest,
       s.total,
       CASE WHEN NOT s.total OR s.read < $5 THEN false
            ELSE EXISTS (SELECT 1 FROM {schema}.runs r
                         WHERE r.id >= (SELECT b.lo FROM bound b) AND r.id < s.oldest_id) END
           AS partial
FROM started s
WHERE s.total OR s.a > 0
UNION ALL
SELECT 'ended', e.bucket, e.a, e.a_children, e.b, e.b_children, e.read, e.oldest, e.total,
       CASE WHEN NOT e.total OR e.read < $5 THEN false
            ELSE EXISTS (SELECT 1 FROM {schema}.runs r
                         WHERE r.status IN ('finished', 'cancelled')
                           AND coalesce(r.finished_at, r.cancelled_at, r.created_at) >= $1
                           AND coalesce(r.finished_at, r.cancelled_at, r.created_at) < e.oldest) END
FROM ended e
WHERE e.total OR e.a > 0 OR e.b > 0
UNION ALL
SELECT 'paused', p.bucket, p.a, p.a_children, p.b, p.b_children, p.read, p.oldest, p.total,
       CASE WHEN NOT p.total OR p.read < CASE WHEN $4::text IS NULL THEN $5 ELSE $6 END THEN false
            ELSE EXISTS (SELECT 1 FROM {schema}.events e
                         WHERE e.event = 'paused' AND e.created_at >= $1
                           AND e.created_at < p.oldest) END
FROM paused p
WHERE p.total OR p.a > 0
