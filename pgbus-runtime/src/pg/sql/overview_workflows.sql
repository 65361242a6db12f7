-- Per workflow, its runs not ended now: ready, performing, paused. The names
-- come from a skip scan of `runs_workflow_status` (one probe per name, at
-- most $1 names); each count is an index-only range of that index for the
-- name and the status, stopped at $2 runs, so finished history is never
-- read. Workflows with no such run are left out. The paused status is a
-- subquery so the planner cannot read the paused runs through `runs_paused`
-- (every paused run, for each name) instead of the name's range.
-- $1 the most workflows, $2 the most runs counted per workflow and status
WITH RECURSIVE seen(name, n) AS (
    (SELECT r.workflow, 1 FROM {schema}.runs r ORDER BY r.workflow LIMIT 1)
    UNION ALL
    SELECT (SELECT r.workflow FROM {schema}.runs r
            WHERE r.workflow > seen.name ORDER BY r.workflow LIMIT 1),
           seen.n + 1
    FROM seen
    WHERE seen.name IS NOT NULL AND seen.n < $1::bigint
)
SELECT seen.name AS workflow,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r
                              WHERE r.workflow = seen.name AND r.status = 'ready'
                              LIMIT $2) c) AS ready,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r
                              WHERE r.workflow = seen.name AND r.status = 'performing'
                              LIMIT $2) c) AS performing,
       (SELECT count(*) FROM (SELECT 1 FROM {schema}.runs r
                              WHERE r.workflow = seen.name AND r.status = (SELECT 'paused'::text)
                              LIMIT $2) c) AS paused
FROM seen
WHERE seen.name IS NOT NULL
ORDER BY seen.name COLLATE "C"
