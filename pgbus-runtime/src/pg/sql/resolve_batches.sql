-- For the sweep: open batches all of whose children have ended (a count the
-- children's own transactions should have made, and did not) are counted again
-- from the children and resolved, waking the parent's parked step. A missing
-- child (deleted by hand) counts as cancelled. Parent runs are locked first,
-- skipping any another transaction holds.
-- $1 now, $2 limit, $3 notification channel
WITH stuck AS (
    SELECT b.id
    FROM {schema}.batches b
    JOIN {schema}.runs p ON p.id = b.run_id
    WHERE b.status = 'open'
      AND NOT EXISTS (SELECT 1 FROM {schema}.runs c
                      WHERE c.parent_batch_id = b.id
                        AND c.status NOT IN ('finished', 'cancelled'))
    ORDER BY b.id
    LIMIT $2
    FOR UPDATE OF p SKIP LOCKED
), counted AS (
    SELECT s.id, count(c.id) FILTER (WHERE c.status = 'finished')::int AS finished
    FROM stuck s LEFT JOIN {schema}.runs c ON c.parent_batch_id = s.id
    GROUP BY s.id
), b AS (
    UPDATE {schema}.batches b
    SET succeeded = counted.finished,
        failed = b.total - counted.finished,
        status = CASE WHEN counted.finished >= b.total THEN 'succeeded' ELSE 'failed' END,
        resolved_at = $1
    FROM counted
    WHERE b.id = counted.id AND b.status = 'open'
    RETURNING b.id, b.status, b.total, b.succeeded, b.failed, b.parent_step_id
), woken AS (
    UPDATE {schema}.steps s
    SET status = 'scheduled', scheduled_at = $1
    FROM b
    WHERE s.id = b.parent_step_id AND s.status = 'waiting'
    RETURNING s.id, s.run_id, s.step_name, s.attempt, s.queue
), resolved AS (
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, reason,
                                 details, created_at)
    SELECT w.run_id, w.id, w.step_name, w.attempt, 'batch_resolved', 'sweep', b.status,
           jsonb_build_object('batch_id', b.id, 'total', b.total, 'finished', b.succeeded,
                              'cancelled', b.failed), $1
    FROM woken w JOIN b ON b.parent_step_id = w.id
    RETURNING id
), wake AS (
    SELECT pg_notify($3, q.queue) FROM (SELECT DISTINCT queue FROM woken) q
)
SELECT (SELECT count(*) FROM b) AS resolved,
       (SELECT count(*) FROM woken) AS woken,
       (SELECT count(*) FROM resolved) AS events,
       (SELECT count(*) FROM wake) AS notified
