-- Per workflow, its runs not ended now: ready, performing, paused. The names
-- are those of the runs in each of these statuses, read from the indexes
-- that hold that status (`runs_status_updated`, `runs_paused`), at most
-- $2 + 1 runs per status, so neither finished history nor names with only
-- ended runs are read; at most $1 names, bytewise first. Each count is an
-- index-only range of `runs_workflow_status` for the name and the status (a
-- literal, so the planner sees it), stopped at $2 runs. `cut` (the same on
-- every row) says names may be missing: a status had more than $2 runs, or
-- there were more than $1 names.
-- $1 the most workflows, $2 the most runs counted per workflow and status
WITH open AS MATERIALIZED (
    (SELECT 'ready' AS status, r.workflow FROM {schema}.runs r
     WHERE r.status = 'ready' LIMIT $2::bigint + 1)
    UNION ALL
    (SELECT 'performing', r.workflow FROM {schema}.runs r
     WHERE r.status = 'performing' LIMIT $2::bigint + 1)
    UNION ALL
    (SELECT 'paused', r.workflow FROM {schema}.runs r
     WHERE r.status = 'paused' LIMIT $2::bigint + 1)
), names AS MATERIALIZED (
    SELECT o.workflow AS name
    FROM open o
    GROUP BY o.workflow
    ORDER BY o.workflow COLLATE "C"
    LIMIT $1::bigint + 1
), cut AS (
    SELECT (SELECT count(*) FROM names) > $1::bigint
           OR EXISTS (SELECT 1 FROM open o GROUP BY o.status HAVING count(*) > $2::bigint)
           AS cut
), kept AS (
    SELECT n.name FROM names n ORDER BY n.name COLLATE "C" LIMIT $1::bigint
)
SELECT kept.name AS workflow,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r
                              WHERE r.workflow = kept.name AND r.status = 'ready'
                              LIMIT $2) c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r
                              WHERE r.workflow = kept.name AND r.status = 'performing'
                              LIMIT $2) c) AS performing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r
                              WHERE r.workflow = kept.name AND r.status = 'paused'
                              LIMIT $2) c) AS paused,
       cut.cut
FROM kept CROSS JOIN cut
ORDER BY kept.name COLLATE "C"
