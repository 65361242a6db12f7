-- The fence of the sweep's grace rule (see undefined_steps.sql): ends a due row
-- no live worker can run, only if it is still unclaimed and due for longer
-- than the grace, not held back by a concurrency limit, its run `ready`
-- (locked by this transaction), and the rule still holds (a worker whose
-- definition has the step may have registered since the read). Zero rows:
-- left alone.
-- $1 step id, $2 attempt, $3 status, $4 outcome, $5 error class, $6 error
-- message, $7 error causes (jsonb), $8 now (NULL = clock_timestamp()), $9 grace
-- (ms), $10 lost-worker threshold (ms)
WITH t AS (
    SELECT coalesce($8::timestamptz, clock_timestamp()) AS now
), live AS (
    SELECT l.workflow, l.step_plan
    FROM t, {schema}.live_definitions(t.now, $10::bigint) l
)
UPDATE {schema}.steps s
SET status = $3, outcome = $4, error_class = $5, error_message = $6,
    error_causes = $7, finished_at = t.now
FROM t
WHERE s.id = $1 AND s.attempt = $2
  AND s.status IN ('scheduled', 'waiting') AND s.held_by IS NULL
  AND s.scheduled_at <= t.now - $9::bigint * interval '1 millisecond'
  AND (SELECT r.status FROM {schema}.runs r WHERE r.id = s.run_id) = 'ready'
  AND EXISTS (SELECT 1 FROM live l WHERE l.workflow = s.workflow)
  AND NOT EXISTS (SELECT 1
                  FROM live l
                  CROSS JOIN LATERAL jsonb_array_elements(l.step_plan) AS p
                  WHERE l.workflow = s.workflow AND p->>'name' = s.step_name)
RETURNING s.finished_at, NULL::jsonb AS kept_output
