-- The workflow names the schema knows: those runs were started for (a skip
-- scan of `runs_workflow_status`: one index probe per name, never a scan of
-- the runs) and those workers registered (`definitions`), sorted bytewise,
-- at most $1.
-- $1 the most names
WITH RECURSIVE seen(name, n) AS (
    (SELECT r.workflow, 1 FROM {schema}.runs r ORDER BY r.workflow LIMIT 1)
    UNION ALL
    SELECT (SELECT r.workflow FROM {schema}.runs r
            WHERE r.workflow > seen.name ORDER BY r.workflow LIMIT 1),
           seen.n + 1
    FROM seen
    WHERE seen.name IS NOT NULL AND seen.n < $1::bigint
)
SELECT name FROM (
    SELECT seen.name FROM seen WHERE seen.name IS NOT NULL
    UNION
    SELECT d.workflow FROM {schema}.definitions d
) w
ORDER BY name COLLATE "C"
LIMIT $1
