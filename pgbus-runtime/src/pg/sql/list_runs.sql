-- Runs, newest first, filtered, each with what no live worker has of its due
-- step (`unrunnable`, as get_run.sql reads it: 'workflow', 'step' or NULL).
-- The page is cut first, then each of its runs is looked at once (one probe
-- of the steps' (run_id, step_name, attempt) key, for `ready` runs only), so
-- the mark costs a bounded lookup per listed run, never a scan.
-- $1 workflow (NULL = any), $2 status (NULL = any), $3 limit, $4 before id
-- (NULL = from the newest), $5 created at or after (NULL = any), $6 created
-- before (NULL = any), $7 now (NULL = clock_timestamp()), $8 lost-worker
-- threshold (ms)
WITH t AS (
    SELECT coalesce($7::timestamptz, clock_timestamp()) AS now
), live AS MATERIALIZED (
    SELECT l.workflow, l.step_plan
    FROM t, {schema}.live_definitions(t.now, $8::bigint) l
), page AS (
    SELECT id, workflow, status, current_step, created_at, updated_at, finished_at
    FROM {schema}.runs
    WHERE ($1::text IS NULL OR workflow = $1)
      AND ($2::text IS NULL OR status = $2)
      AND ($4::bigint IS NULL OR id < $4)
      AND ($5::timestamptz IS NULL OR created_at >= $5)
      AND ($6::timestamptz IS NULL OR created_at < $6)
    ORDER BY id DESC
    LIMIT $3
)
SELECT r.id, r.workflow, r.status, r.current_step, r.created_at, r.updated_at, r.finished_at,
       u.missing AS unrunnable
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
           END AS missing
    FROM (
        SELECT s.workflow, s.step_name, s.status, s.scheduled_at
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
