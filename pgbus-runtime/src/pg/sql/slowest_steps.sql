-- The steps whose attempts ran longest on average among those that ended in
-- the window (started to finished of the last claim), with their count and
-- longest run, and their pickup latency (started minus due) percentiles, of
-- workflows whose name starts with $4. The attempts read are those
-- step_insights.sql reads (its comment says why and how): the newest by
-- primary key created at or after $1, at most $5, so `percentile_cont`
-- sorts at most $5 rows whatever the window (one sort a step for both
-- percentiles). The attempts are read once; each step's group also counts
-- the rows it read, so the totals need no second pass. Rows with `part` =
-- 'step' are the steps, slowest first; the row with `part` = 'read' says
-- how many attempts were read, the oldest creation time read, and whether
-- the window holds older ones unread (`partial`).
-- $1 from, $2 to, $3 how many, $4 workflow prefix (NULL = any), $5 the most
-- attempts read
WITH RECURSIVE search(lo, hi, n) AS (
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
), timed AS (
    SELECT a.workflow, a.step_name,
           count(*) FILTER (WHERE a.counted) AS attempts,
           (avg(a.ran_s) FILTER (WHERE a.counted) * 1000)::float8 AS mean_ms,
           (max(a.ran_s) FILTER (WHERE a.counted) * 1000)::float8 AS max_ms,
           percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY a.pickup_s)
               FILTER (WHERE a.counted) AS pickup_s,
           count(*) AS read, min(a.created_at) AS oldest, min(a.id) AS oldest_id
    FROM (
        SELECT s.id, s.created_at, s.workflow COLLATE "C" AS workflow,
               s.step_name COLLATE "C" AS step_name,
               extract(epoch FROM s.finished_at - s.started_at)::float8 AS ran_s,
               extract(epoch FROM s.started_at - s.scheduled_at)::float8 AS pickup_s,
               s.finished_at >= $1 AND s.finished_at <= $2 AND s.started_at IS NOT NULL
                   AND ($4::text IS NULL OR starts_with(s.workflow, $4)) AS counted
        FROM {schema}.steps s
        WHERE s.id >= (SELECT b.lo FROM bound b)
        ORDER BY s.id DESC
        LIMIT $5
    ) a
    GROUP BY a.workflow, a.step_name
), read AS (
    SELECT coalesce(sum(t.read), 0)::bigint AS read, min(t.oldest) AS oldest,
           min(t.oldest_id) AS oldest_id
    FROM timed t
)
(SELECT 'step' AS part, t.workflow, t.step_name, t.attempts, t.mean_ms, t.max_ms,
        t.pickup_s[1] * 1000 AS pickup_p50_ms, t.pickup_s[2] * 1000 AS pickup_p99_ms,
        NULL::bigint AS read, NULL::timestamptz AS oldest, NULL::boolean AS partial
 FROM timed t
 WHERE t.attempts > 0
 ORDER BY t.mean_ms DESC, t.workflow, t.step_name
 LIMIT $3)
UNION ALL
SELECT 'read', NULL, NULL, 0, 0, 0, 0, 0, r.read, r.oldest,
       CASE WHEN r.read < $5 THEN false
            ELSE EXISTS (SELECT 1 FROM {schema}.steps s
                         WHERE s.id >= (SELECT b.lo FROM bound b) AND s.id < r.oldest_id) END
FROM read r
