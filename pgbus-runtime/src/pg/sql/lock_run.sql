-- Locks a run for an outcome or an operator action and returns what the engine
-- decides with, and the time the change uses. A fan_out child's parent run is
-- locked first: every transaction locks a parent before its child (the child's
-- final transaction counts toward the parent's batch; cancelling a parent
-- cancels its children), so none deadlocks with another. Rows come back in
-- locking order; the run itself is the last. `flow_keys`: the flow limits in
-- force that an eager handoff of the run's next step must not bypass (the
-- concurrency and rate limits of its workflow, every queue's limit; see
-- `engine::handoff_within_limits`), from the registry, whichever version
-- registered them. `now` is read once the locks are held (the outer query runs
-- after the materialized one that takes them), so a change made after a wait
-- for the lock is not dated before the change it waited for; an outcome's
-- fence, events and rows all take this time. $1 run id, $2 now (NULL =
-- clock_timestamp())
WITH locked AS MATERIALIZED (
    SELECT r.id, r.status, r.workflow, r.step_names, r.step_plan, r.current_step,
           r.error_class, r.error_message, r.parent_batch_id, r.queue_override,
           r.priority_override, r.deadline_at, r.on_deadline,
           ARRAY(SELECT f.key FROM {schema}.flow_limits f
                 WHERE f.workflow = r.workflow OR f.workflow IS NULL
                 UNION ALL
                 SELECT l.key FROM {schema}.rate_limits l WHERE l.workflow = r.workflow) AS flow_keys,
           r.id = $1 AS last
    FROM {schema}.runs r
    WHERE r.id = $1
       OR r.id = (SELECT b.run_id FROM {schema}.runs c
                  JOIN {schema}.batches b ON b.id = c.parent_batch_id
                  WHERE c.id = $1)
    ORDER BY r.id = $1
    FOR UPDATE OF r
)
SELECT l.*, coalesce($2::timestamptz, clock_timestamp()) AS now
FROM locked l
ORDER BY l.last
