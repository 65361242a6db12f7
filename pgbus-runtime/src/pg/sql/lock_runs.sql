-- Locks the runs of a group of outcomes (see `store/group/mod.rs`) and returns
-- what the engine decides each with, as `lock_run.sql` does for one. A group
-- never waits for a lock (`SKIP LOCKED`): a run another transaction holds (an
-- operator's action, another outcome of it) comes back with no row, and its
-- outcome ends alone, waiting only for its own run, so one held run holds up
-- no other outcome. Only runs a group can write without touching flow
-- control: `performing` (as a claim leaves a run) and holding no slot as a
-- run, so no flow trigger fires for its change (their advisory locks, taken
-- member after member, could wait in a circle with another group's); and
-- not fan-out children (a child's outcome locks its parent first, which
-- another member may lock too). Each row reads `now` as it is locked, in id
-- order; the group takes the latest. $1 run ids (bigint[]), $2 now (NULL =
-- clock_timestamp())
WITH locked AS MATERIALIZED (
    SELECT r.id, r.status, r.step_names, r.step_plan, r.queue_override,
           r.priority_override, r.deadline_at,
           ARRAY(SELECT f.key FROM {schema}.flow_limits f
                 WHERE f.workflow = r.workflow OR f.workflow IS NULL
                 UNION ALL
                 SELECT l.key FROM {schema}.rate_limits l WHERE l.workflow = r.workflow) AS flow_keys
    FROM {schema}.runs r
    WHERE r.id = ANY($1::bigint[]) AND r.parent_batch_id IS NULL
      AND r.status = 'performing' AND NOT r.slot_held
    ORDER BY r.id
    FOR UPDATE OF r SKIP LOCKED
)
SELECT l.*, coalesce($2::timestamptz, clock_timestamp()) AS now
FROM locked l
