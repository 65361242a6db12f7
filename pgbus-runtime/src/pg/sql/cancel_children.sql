-- A run was cancelled: cancels its open child runs, and theirs, all the way
-- down, in the same transaction, with their open batches closed as `failed`.
-- Runs after lock_children.sql has locked the whole open tree parents first
-- (see there why), so its snapshot holds every open step of the tree.
-- $1 run id, $2 now, $3 actor, $4 reason, $5 the open descendants
-- lock_children.sql locked. The batches closed are $1's, theirs, and any that
-- holds one of them (a batch of a run an operator skipped past).
WITH locked AS (
    SELECT unnest($5::bigint[]) AS id
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
    WHERE b.status = 'open'
      AND (b.run_id = $1 OR b.run_id = ANY($5::bigint[])
           OR b.id IN (SELECT c.parent_batch_id FROM {schema}.runs c
                       WHERE c.id = ANY($5::bigint[])))
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
