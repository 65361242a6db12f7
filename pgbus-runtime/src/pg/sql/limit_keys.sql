-- Per concurrency key with a slot held or a row held back: the limit it
-- counts under (`key:<W>` for a per-key slot `key:<W>:<k>`, from the row's
-- own workflow, so a `:` in a name never misleads; the key itself
-- otherwise), its slots held (the runs holding it, each once, as
-- `flow_in_flight` counts) and its held rows. Each of the six reads goes
-- through its partial index (`steps_slot_workflow`, `steps_slot_key`,
-- `steps_slot_queue`, `runs_slot_workflow`, `runs_slot_key`, `steps_held`)
-- and stops at $1 rows, so the cost is bounded whatever the backlog; a
-- count of a key with more rows than that is a floor.
-- $1 the most rows each read takes, $2 the most keys returned
WITH slots AS (
    (SELECT s.slot_workflow AS key, s.workflow, s.run_id FROM {schema}.steps s
     WHERE s.status = 'in_progress' AND s.slot_workflow IS NOT NULL LIMIT $1)
    UNION ALL
    (SELECT s.slot_key, s.workflow, s.run_id FROM {schema}.steps s
     WHERE s.status = 'in_progress' AND s.slot_key IS NOT NULL LIMIT $1)
    UNION ALL
    (SELECT s.slot_queue, s.workflow, s.run_id FROM {schema}.steps s
     WHERE s.status = 'in_progress' AND s.slot_queue IS NOT NULL LIMIT $1)
    UNION ALL
    (SELECT r.slot_workflow, r.workflow, r.id FROM {schema}.runs r
     WHERE r.slot_held AND r.slot_workflow IS NOT NULL LIMIT $1)
    UNION ALL
    (SELECT r.slot_key, r.workflow, r.id FROM {schema}.runs r
     WHERE r.slot_held AND r.slot_key IS NOT NULL LIMIT $1)
), holding AS (
    SELECT x.key,
           CASE WHEN split_part(x.key, ':', 1) = 'key' THEN 'key:' || x.workflow
                ELSE x.key END AS limit_key,
           count(DISTINCT x.run_id) AS in_flight
    FROM slots x
    GROUP BY 1, 2
), held AS (
    SELECT h.held_by AS key,
           CASE WHEN split_part(h.held_by, ':', 1) = 'key' THEN 'key:' || h.workflow
                ELSE h.held_by END AS limit_key,
           count(*) AS held
    FROM (SELECT s.held_by, s.workflow FROM {schema}.steps s
          WHERE s.held_by IS NOT NULL AND s.status IN ('scheduled', 'waiting')
          LIMIT $1) h
    GROUP BY 1, 2
)
SELECT k.key, k.limit_key, k.in_flight, k.held
FROM (SELECT coalesce(a.key, b.key) AS key,
             coalesce(a.limit_key, b.limit_key) AS limit_key,
             coalesce(a.in_flight, 0) AS in_flight,
             coalesce(b.held, 0) AS held
      FROM holding a
      FULL JOIN held b ON b.key = a.key AND b.limit_key = a.limit_key) k
ORDER BY k.limit_key COLLATE "C", k.key COLLATE "C"
LIMIT $2
