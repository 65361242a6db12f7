-- Puts back in the queue a step an outcome handed to worker $3 (an eager step,
-- see docs/decisions.md) when the worker never learned of it: the outcome's
-- try committed, its reply was lost, and the retry found the outcome recorded.
-- Nothing runs such a step, so it becomes what the outcome would have left
-- without the handoff: `scheduled`, its run `ready`. Only that exact row: one
-- written by the transaction that ended step row $2 (the same `xmin`) and not
-- changed since (a row claimed, swept or skipped since has a later `xmin`), in
-- progress under $3. Returns the queue to wake.
-- $1 run id, $2 ended step id, $3 worker id
WITH released AS (
    UPDATE {schema}.steps s
    SET status = 'scheduled', started_at = NULL, worker_id = NULL, stall_at = NULL
    FROM {schema}.steps ended
    WHERE ended.id = $2 AND ended.run_id = $1
      AND s.run_id = $1 AND s.id > $2 AND s.xmin = ended.xmin
      AND s.worker_id = $3 AND s.status = 'in_progress'
    RETURNING s.id, s.queue
), ready AS (
    UPDATE {schema}.runs r
    SET status = 'ready'
    FROM released
    WHERE r.id = $1 AND r.status = 'performing'
    RETURNING r.id
)
SELECT released.queue, (SELECT count(*) FROM ready) AS runs
FROM released
