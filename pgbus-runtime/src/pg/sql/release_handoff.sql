-- Puts back in the queue a step an outcome handed to worker $3 (an eager step,
-- see docs/decisions.md) when the worker never learned of it: the outcome's
-- try committed, its reply was lost, and the retry found the outcome recorded.
-- Nothing runs such a step, so it becomes what the outcome would have left
-- without the handoff: `scheduled`, its run `ready`. Only that exact row: in
-- progress under $3, and whose latest `step_started` event was written by the
-- transaction that ended step row $2 (the same `xmin`; events are never
-- updated, so the heartbeat marking the row as an orphan does not hide it,
-- while a claim since would have written a later `step_started`). Returns the
-- queue to wake.
-- $1 run id, $2 ended step id, $3 worker id
WITH released AS (
    UPDATE {schema}.steps s
    SET status = 'scheduled', started_at = NULL, worker_id = NULL, stall_at = NULL
    FROM {schema}.steps ended
    WHERE ended.id = $2 AND ended.run_id = $1
      AND s.run_id = $1 AND s.id > $2
      AND s.worker_id = $3 AND s.status = 'in_progress'
      AND (SELECT e.xmin FROM {schema}.events e
           WHERE e.run_id = $1 AND e.step_id = s.id AND e.event = 'step_started'
           ORDER BY e.id DESC LIMIT 1) = ended.xmin
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
