-- Puts back in the queue a step an outcome handed to worker $3 (an eager step,
-- see docs/decisions.md) when the worker never learned of it: the outcome's
-- try committed, its reply was lost, and the retry found the outcome recorded.
-- Nothing runs such a step, so it becomes what the outcome would have left
-- without the handoff: `scheduled`, its run `ready`. Only a first attempt of run
-- $1, after the ended step row $2, in progress under $3: the retry is asked only
-- of a worker whose first try offered the handoff, and such a row cannot have
-- been claimed by any other means. Returns the queue to wake.
-- $1 run id, $2 ended step id, $3 worker id
WITH released AS (
    UPDATE {schema}.steps
    SET status = 'scheduled', started_at = NULL, worker_id = NULL, stall_at = NULL
    WHERE run_id = $1 AND id > $2 AND worker_id = $3 AND status = 'in_progress'
      AND attempt = 1
    RETURNING id, queue
), ready AS (
    UPDATE {schema}.runs r
    SET status = 'ready'
    FROM released
    WHERE r.id = $1 AND r.status = 'performing'
    RETURNING r.id
)
SELECT released.queue, (SELECT count(*) FROM ready) AS runs
FROM released
