-- Per workflow, its runs not ended now: ready, performing, paused.
--
-- The names, two ways. First a skip scan of `runs_workflow_status` (one
-- probe per name, at most $1 + 1 names): when it finds at most $1 names,
-- those are every name, and only their counts are read (finished history
-- never is). With more names than that (many of them with only ended runs,
-- perhaps), the names are those of the runs in each not-ended status
-- instead, at most $2 + 1 runs per status (`open`, read only then: its
-- scans sit behind a one-time filter), at most $1 names, bytewise first.
-- Each count is an index-only range of `runs_workflow_status` for the name
-- and the status (a literal, so the planner sees it), stopped at $2 runs.
-- `cut` (the same on every row) says names may be missing: a status had
-- more than $2 runs, or there were more than $1 names, on the second way.
-- $1 the most workflows, $2 the most runs counted per workflow and status
WITH RECURSIVE seen(name, n) AS (
    (SELECT r.workflow, 1 FROM {schema}.runs r ORDER BY r.workflow LIMIT 1)
    UNION ALL
    SELECT (SELECT r.workflow FROM {schema}.runs r
            WHERE r.workflow > seen.name ORDER BY r.workflow LIMIT 1),
           seen.n + 1
    FROM seen
    WHERE seen.name IS NOT NULL AND seen.n <= $1::bigint
), every_name AS MATERIALIZED (
    SELECT seen.name FROM seen WHERE seen.name IS NOT NULL
), few AS MATERIALIZED (
    SELECT count(*) <= $1::bigint AS few FROM every_name
), open AS MATERIALIZED (
    (SELECT 'ready' AS status, r.workflow FROM {schema}.runs r
     WHERE r.status = 'ready' AND NOT (SELECT few FROM few) LIMIT $2::bigint + 1)
    UNION ALL
    (SELECT 'performing', r.workflow FROM {schema}.runs r
     WHERE r.status = 'performing' AND NOT (SELECT few FROM few) LIMIT $2::bigint + 1)
    UNION ALL
    (SELECT 'paused', r.workflow FROM {schema}.runs r
     WHERE r.status = 'paused' AND NOT (SELECT few FROM few) LIMIT $2::bigint + 1)
), names AS MATERIALIZED (
    SELECT e.name FROM every_name e WHERE (SELECT few FROM few)
    UNION ALL
    (SELECT o.workflow AS name
     FROM open o
     GROUP BY o.workflow
     ORDER BY o.workflow COLLATE "C"
     LIMIT $1::bigint + 1)
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
