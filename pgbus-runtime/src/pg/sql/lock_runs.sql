-- Locks the runs of a group of outcomes (see `store/group.rs`) and returns what
-- the engine decides each with, as `lock_run.sql` does for one: in the order
-- of their ids, so two groups, or a group and a transaction that locks one
-- run, never wait on each other in a circle. Only runs that are not fan-out
-- children: a child's outcome locks its parent first, which another member
-- may lock too, so a child ends alone. `now` is read once every lock is held.
-- $1 run ids (bigint[]), $2 now (NULL = clock_timestamp())
WITH locked AS MATERIALIZED (
    SELECT r.id, r.status, r.step_names, r.step_plan, r.queue_override,
           r.priority_override, r.deadline_at,
           ARRAY(SELECT f.key FROM {schema}.flow_limits f
                 WHERE f.workflow = r.workflow OR f.workflow IS NULL
                 UNION ALL
                 SELECT l.key FROM {schema}.rate_limits l WHERE l.workflow = r.workflow) AS flow_keys
    FROM {schema}.runs r
    WHERE r.id = ANY($1::bigint[]) AND r.parent_batch_id IS NULL
    ORDER BY r.id
    FOR UPDATE OF r
)
SELECT l.*, coalesce($2::timestamptz, clock_timestamp()) AS now
FROM locked l
