-- list_runs.sql for a list by workflow (an exact name, $1, or a prefix, $9):
-- the runs are read per name and status through `runs_workflow_status`
-- (workflow, status, id), each range in id order and cut at the page (or at
-- $15 with an input path), then merged, so a rare workflow costs what its
-- own runs cost, never a scan of the others. An exact name is that one
-- name, no scan. The names of a prefix come from a skip scan of the same
-- index that starts at the prefix and stops at the first name past the
-- names starting with it (one probe per name, at most $16 names), so the
-- names sorting before it cost nothing and never use up the bound; the
-- prefix is compared with `starts_with`, so its `%` and `_` are plain
-- characters. The range is the column's order: a collation that sorts names
-- with one prefix apart (not C or C.UTF-8) would end it early. Otherwise,
-- and for the columns, as list_runs.sql.
-- $1 workflow (NULL = by prefix), $2 status (NULL = any), $3 limit, $4 before
-- id (NULL = from the newest), $5 created at or after (NULL = any), $6
-- created before (NULL = any), $7 now (NULL = clock_timestamp()), $8
-- lost-worker threshold (ms), $9 workflow name prefix (NULL = any), $10
-- top-level runs only, $11 children of this run only (NULL = any), $12
-- idempotency key (NULL = any), $13 input SQL/JSON path (NULL = any), $14
-- after id (NULL = none), $15 the most runs read for the input path, $16 the
-- most workflow names looked at for a prefix
WITH RECURSIVE t AS (
    SELECT coalesce($7::timestamptz, clock_timestamp()) AS now
), live AS MATERIALIZED (
    -- live_definitions(), with each live worker's queues: a row runs only on
    -- a worker whose definition has its step and that claims from its queue.
    SELECT wd.workflow, d.step_plan, w.queues
    FROM t
    JOIN {schema}.workers w
      ON w.heartbeat_at >= t.now - $8::bigint * interval '1 millisecond'
    JOIN {schema}.worker_definitions wd ON wd.worker_id = w.id
    JOIN {schema}.definitions d ON d.workflow = wd.workflow AND d.digest = wd.digest
), seen(name, n) AS (
    (SELECT r.workflow, 1 FROM {schema}.runs r
     WHERE $1::text IS NULL AND r.workflow >= $9 ORDER BY r.workflow LIMIT 1)
    UNION ALL
    SELECT (SELECT r.workflow FROM {schema}.runs r
            WHERE r.workflow > seen.name ORDER BY r.workflow LIMIT 1),
           seen.n + 1
    FROM seen
    WHERE starts_with(seen.name, $9) AND seen.n < $16::bigint
), names AS (
    SELECT $1::text AS name
    WHERE $1::text IS NOT NULL AND ($9::text IS NULL OR starts_with($1, $9))
    UNION ALL
    SELECT seen.name FROM seen
    WHERE seen.name IS NOT NULL AND starts_with(seen.name, $9)
), statuses AS (
    SELECT s.status
    FROM unnest(ARRAY['ready', 'performing', 'paused', 'finished', 'cancelled']) AS s(status)
    WHERE $2::text IS NULL OR s.status = $2
), scanned AS (
    SELECT c.id, c.input
    FROM names, statuses
    CROSS JOIN LATERAL (
        (SELECT r.id, r.input
         FROM {schema}.runs r
         WHERE $14::bigint IS NULL
           AND r.workflow = names.name AND r.status = statuses.status
       AND ($4::bigint IS NULL OR r.id < $4)
       AND ($5::timestamptz IS NULL OR r.created_at >= $5)
       AND ($6::timestamptz IS NULL OR r.created_at < $6)
       AND (NOT $10::boolean OR r.parent_batch_id IS NULL)
       AND ($11::bigint IS NULL OR r.parent_batch_id = ANY (ARRAY(
               SELECT b.id FROM {schema}.batches b WHERE b.run_id = $11)))
       AND ($12::text IS NULL OR r.idempotency_key = $12)
         ORDER BY r.id DESC
         LIMIT CASE WHEN $13::text IS NULL THEN $3 ELSE $15::bigint END)
        UNION ALL
        (SELECT r.id, r.input
         FROM {schema}.runs r
         WHERE $14::bigint IS NOT NULL AND r.id > $14
           AND r.workflow = names.name AND r.status = statuses.status
       AND ($4::bigint IS NULL OR r.id < $4)
       AND ($5::timestamptz IS NULL OR r.created_at >= $5)
       AND ($6::timestamptz IS NULL OR r.created_at < $6)
       AND (NOT $10::boolean OR r.parent_batch_id IS NULL)
       AND ($11::bigint IS NULL OR r.parent_batch_id = ANY (ARRAY(
               SELECT b.id FROM {schema}.batches b WHERE b.run_id = $11)))
       AND ($12::text IS NULL OR r.idempotency_key = $12)
         ORDER BY r.id
         LIMIT CASE WHEN $13::text IS NULL THEN $3 ELSE $15::bigint END)
    ) c
), picked AS (
    SELECT s.id
    FROM scanned s
    WHERE $13::text IS NULL OR s.input @? $13::text::jsonpath
    ORDER BY CASE WHEN $14::bigint IS NULL THEN -s.id ELSE s.id END
    LIMIT $3
), page AS (
    SELECT r.id, r.workflow, r.status, r.current_step, r.created_at, r.updated_at,
           r.finished_at, r.parent_batch_id
    FROM picked p
    JOIN {schema}.runs r ON r.id = p.id
)
SELECT r.id, r.workflow, r.status, r.current_step, r.created_at, r.updated_at, r.finished_at,
       u.missing AS unrunnable,
       (SELECT b.run_id FROM {schema}.batches b WHERE b.id = r.parent_batch_id) AS parent_run,
       (SELECT coalesce(sum(b.total), 0)::bigint FROM {schema}.batches b WHERE b.run_id = r.id)
           AS children
FROM page r
CROSS JOIN t
LEFT JOIN LATERAL (
    SELECT CASE
               WHEN NOT EXISTS (SELECT 1 FROM live WHERE live.workflow = d.workflow)
                   THEN 'workflow'
               WHEN NOT EXISTS (
                   SELECT 1 FROM live
                   WHERE live.workflow = d.workflow
                     AND live.step_plan @> jsonb_build_array(jsonb_build_object('name', d.step_name)))
                   THEN 'step'
               WHEN NOT EXISTS (
                   SELECT 1 FROM live
                   WHERE live.workflow = d.workflow
                     AND live.step_plan @> jsonb_build_array(jsonb_build_object('name', d.step_name))
                     AND d.queue = ANY (live.queues))
                   THEN 'queue'
           END AS missing
    FROM (
        SELECT s.workflow, s.step_name, s.queue, s.status, s.scheduled_at
        FROM {schema}.steps s
        WHERE s.run_id = r.id AND s.step_name = r.current_step
        ORDER BY s.attempt DESC
        LIMIT 1
    ) d
    WHERE r.status = 'ready'
      AND d.status IN ('scheduled', 'waiting')
      AND d.scheduled_at <= t.now
) u ON true
ORDER BY r.id DESC
