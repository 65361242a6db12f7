-- Step attempts that ended in the window, per time bucket of $3 ms (aligned
-- on the Unix epoch), outcome and whether they failed (status `failed`: an
-- error, or a reattempt), of workflows whose name starts with $4 (the
-- dashboard's insights). No index reads steps by time (each would cost
-- every step row; issue 22), so the read is the newest attempts by primary
-- key (ids grow with creation time), from the newest back to the first id
-- created at or after $1, which a binary search of the primary key finds
-- (`search`: one probe a step, at most 64), and at most $5 of them: a
-- bounded read whatever the window. An attempt created before $1 that ended
-- in the window is not counted. Rows with `part` = 'bucket' hold a bucket's
-- counts (absent when none); the row with `part` = 'read' says how many
-- attempts were read, the oldest creation time read, and whether the
-- window holds older ones unread (`partial`).
-- $1 from, $2 to, $3 bucket (ms), $4 workflow prefix (NULL = any), $5 the
-- most attempts read
WITH RECURSIVE search(lo, hi, n) AS (
    -- The first id created at or after $1 is in [lo, hi]; every id below
    -- lo was created before $1.
    SELECT min(s.id), max(s.id) + 1, 0 FROM {schema}.steps s
    UNION ALL
    SELECT CASE WHEN p.id < s.hi AND p.created_at < $1 THEN p.id + 1 ELSE s.lo END,
           CASE WHEN p.id < s.hi AND p.created_at < $1 THEN s.hi
                WHEN p.id < s.hi THEN p.id
                ELSE (s.lo + s.hi) / 2 END,
           s.n + 1
    FROM search s
    LEFT JOIN LATERAL (
        SELECT t.id, t.created_at FROM {schema}.steps t
        WHERE t.id >= (s.lo + s.hi) / 2
        ORDER BY t.id
        LIMIT 1
    ) p ON true
    WHERE s.lo < s.hi AND s.n < 64
), bound AS (
    SELECT coalesce((SELECT s.lo FROM search s ORDER BY s.n DESC LIMIT 1), 0) AS lo
), counted AS (
    SELECT a.bucket, a.outcome, a.failed,
           count(*) FILTER (WHERE a.finished_at >= $1 AND a.finished_at <= $2
                              AND a.outcome IS NOT NULL
                              AND ($4::text IS NULL OR starts_with(a.workflow, $4))) AS steps,
           count(*) AS read, min(a.created_at) AS oldest, min(a.id) AS oldest_id,
           grouping(a.bucket, a.outcome, a.failed) <> 0 AS total
    FROM (
        SELECT s.id, s.created_at, s.finished_at, s.workflow, s.outcome,
               s.status = 'failed' AS failed,
               date_bin($3::bigint * interval '1 millisecond', s.finished_at, TIMESTAMPTZ 'epoch') AS bucket
        FROM {schema}.steps s
        WHERE s.id >= (SELECT b.lo FROM bound b)
        ORDER BY s.id DESC
        LIMIT $5
    ) a
    GROUP BY GROUPING SETS ((a.bucket, a.outcome, a.failed), ())
)
SELECT CASE WHEN c.total THEN 'read' ELSE 'bucket' END AS part,
       c.bucket, c.outcome, c.failed, c.steps,
       c.read, c.oldest,
       CASE WHEN NOT c.total OR c.read < $5 THEN false
            ELSE EXISTS (SELECT 1 FROM {schema}.steps s
                         WHERE s.id >= (SELECT b.lo FROM bound b) AND s.id < c.oldest_id) END
           AS partial
FROM counted c
WHERE c.total OR c.steps > 0
ORDER BY c.total, c.bucket, c.outcome, c.failed
