-- A run was cancelled: cancels its open child runs, and theirs, all the way
-- down, in the same transaction. Rows are locked parents first (by depth), the
-- order every transaction takes, so a child ending at the same moment never
-- deadlocks with it. Their open batches are closed as `failed`. Runs after
-- lock_children.sql has locked the whole tree (see there why), so its own
-- locks no longer wait and its snapshot holds every open step of the tree.
-- $1 run id, $2 now, $3 actor, $4 reason
WITH RECURSIVE tree AS (
    SELECT c.id, 1 AS depth
    FROM {schema}.batches b JOIN {schema}.runs c ON c.parent_batch_id = b.id
    WHERE b.run_id = $1 AND b.status = 'open'
  UNION ALL
    SELECT c.id, t.depth + 1
    FROM tree t
    JOIN {schema}.batches b ON b.run_id = t.id AND b.status = 'open'
    JOIN {schema}.runs c ON c.parent_batch_id = b.id
), locked AS (
    SELECT r.id FROM {schema}.runs r JOIN tree t ON t.id = r.id
    WHERE r.status NOT IN ('finished', 'cancelled')
    ORDER BY t.depth, r.id
    FOR UPDATE OF r
), runs_cancelled AS (
    UPDATE {schema}.runs r
    SET status = 'cancelled', cancelled_at = $2, updated_at = $2
    FROM locked
    WHERE r.id = locked.id AND r.status NOT IN ('finished', 'cancelled')
    RETURNING r.id
), steps_cancelled AS (
    UPDATE {schema}.steps s
    SET status = 'cancelled', outcome = 'cancelled', finished_at = $2
    FROM runs_cancelled rc
    WHERE s.run_id = rc.id AND s.status IN ('scheduled', 'in_progress', 'waiting')
    RETURNING s.id
), batches_closed AS (
    UPDATE {schema}.batches b
    SET status = 'failed', resolved_at = $2
    WHERE b.status = 'open' AND (b.run_id = $1 OR b.run_id IN (SELECT id FROM tree))
    RETURNING b.id
), events AS (
    INSERT INTO {schema}.events (run_id, event, actor, reason, details, created_at)
    SELECT rc.id, 'cancelled', $3, $4, jsonb_build_object('cancelled_with', $1::bigint), $2
    FROM runs_cancelled rc
    RETURNING id
)
SELECT (SELECT count(*) FROM runs_cancelled) AS runs,
       (SELECT count(*) FROM steps_cancelled) AS steps,
       (SELECT count(*) FROM batches_closed) AS batches,
       (SELECT count(*) FROM events) AS events
