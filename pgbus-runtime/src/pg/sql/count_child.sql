-- A child run ended: counts it toward its batch, in the child's final
-- transaction (the parent's run row is locked first, by lock_run.sql). The last
-- child resolves the batch (`succeeded` when all finished, else `failed`) and
-- wakes the parent's parked step, whose claim then completes it or applies its
-- `on_batch_failure`. A batch already closed (its parent was cancelled) is left.
-- $1 child run id, $2 its final status, $3 now, $4 actor, $5 notification channel
WITH b AS (
    UPDATE {schema}.batches b
    SET succeeded = b.succeeded + ($2 = 'finished')::int,
        failed = b.failed + ($2 = 'cancelled')::int,
        status = CASE
            WHEN b.succeeded + b.failed + 1 < b.total THEN 'open'
            WHEN b.failed + ($2 = 'cancelled')::int > 0 THEN 'failed'
            ELSE 'succeeded'
        END,
        resolved_at = CASE WHEN b.succeeded + b.failed + 1 >= b.total THEN $3::timestamptz END
    FROM {schema}.runs c
    WHERE c.id = $1 AND b.id = c.parent_batch_id AND b.status = 'open'
    RETURNING b.id, b.status, b.total, b.succeeded, b.failed, b.parent_step_id
), woken AS (
    UPDATE {schema}.steps s
    SET status = 'scheduled', scheduled_at = $3
    FROM b
    WHERE b.status <> 'open' AND s.id = b.parent_step_id AND s.status = 'waiting'
    RETURNING s.id, s.run_id, s.step_name, s.attempt, s.queue
), resolved AS (
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, reason,
                                 details, created_at)
    SELECT w.run_id, w.id, w.step_name, w.attempt, 'batch_resolved', $4, b.status,
           jsonb_build_object('batch_id', b.id, 'total', b.total, 'finished', b.succeeded,
                              'cancelled', b.failed), $3
    FROM woken w CROSS JOIN b
    RETURNING id
), wake AS (
    SELECT pg_notify($5, w.queue) FROM woken w
)
SELECT (SELECT count(*) FROM b) AS counted,
       (SELECT count(*) FROM woken) AS woken,
       (SELECT count(*) FROM resolved) AS events,
       (SELECT count(*) FROM wake) AS notified
