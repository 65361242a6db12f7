-- Parks a claimed attempt as `waiting` (same attempt) instead of ending it: the
-- attempt fence of end_attempt.sql, then the row keeps waiting for signal $4
-- (NULL: for its batch). A signal of that name that arrived after the claim
-- (unconsumed and not among $5, the ones the gate turned down) wakes the row at
-- once: the send found it still in progress, so no wake-up is lost. Otherwise
-- the row is due at its wait's end: $6 ms after it first parked when $7, else
-- $6 ms from now (a wait without a timeout is due in 36500 days and parks again
-- then). $8 is an output to keep on the row (a fan_out body's).
-- $1 step id, $2 attempt, $3 worker id, $4 signal name, $5 seen signal ids,
-- $6 ms, $7 counted from the first park, $8 output, $9 now (NULL = clock_timestamp())
WITH t AS (
    SELECT coalesce($9::timestamptz, clock_timestamp()) AS now
), arrived AS (
    SELECT EXISTS (
        SELECT 1 FROM {schema}.signals g
        JOIN {schema}.steps s ON s.id = $1 AND g.run_id = s.run_id
        WHERE g.name = $4 AND g.consumed_by IS NULL AND g.id <> ALL($5::bigint[])
    ) AS woken
)
UPDATE {schema}.steps s
SET status = CASE WHEN arrived.woken THEN 'scheduled' ELSE 'waiting' END,
    waiting_for = $4,
    waiting_since = coalesce(s.waiting_since, t.now),
    scheduled_at = CASE
        WHEN arrived.woken THEN t.now
        WHEN $7 THEN coalesce(s.waiting_since, t.now) + $6::bigint * interval '1 millisecond'
        ELSE t.now + $6::bigint * interval '1 millisecond'
    END,
    stall_at = NULL,
    output = coalesce($8::jsonb, s.output)
FROM t, arrived
WHERE s.id = $1 AND s.attempt = $2 AND s.worker_id = $3 AND s.status = 'in_progress'
RETURNING t.now, arrived.woken, s.queue
