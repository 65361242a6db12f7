-- Parks a claimed attempt as `waiting` (same attempt) instead of ending it: the
-- attempt fence of end_attempt.sql, then the row keeps waiting for signal $4
-- (NULL: for its batch). The row records $5, the highest signal id its gate
-- turned down: later claims bring only signals above it. An unconsumed signal
-- of that name above it (one that arrived after the claim, found the row in
-- progress and woke nothing, or one past the page the claim brought) wakes the
-- row at once, so no wake-up is lost. A signal's id is taken under the run's
-- lock, which the claim held, so every signal the claim did not see has a
-- higher id than every one it saw. Otherwise
-- the row is due at its wait's end: $6 ms after it first parked when $7, else
-- $6 ms from now (a wait without a timeout is due in 36500 days and parks again
-- then). $8 is an output to keep on the row (a fan_out body's). $10: the
-- batch the row goes on waiting for, opened by this attempt or (with $11) by
-- an earlier one, which this row takes over (its last child wakes this row);
-- a batch that resolved since the claim (its wake found the row in progress)
-- wakes the row at once.
-- $1 step id, $2 attempt, $3 worker id, $4 signal name, $5 highest signal id
-- turned down (NULL: none), $6 ms, $7 counted from the first park, $8 output,
-- $9 now (NULL = clock_timestamp()), $10 batch waited on (NULL: none), $11 adopt it
WITH t AS (
    SELECT coalesce($9::timestamptz, clock_timestamp()) AS now
), arrived AS (
    SELECT EXISTS (
        SELECT 1 FROM {schema}.signals g
        JOIN {schema}.steps s ON s.id = $1 AND g.run_id = s.run_id
        WHERE g.name = $4 AND g.consumed_by IS NULL
          AND g.id > greatest(coalesce(s.signals_seen_to, 0), coalesce($5::bigint, 0))
    ) OR EXISTS (
        SELECT 1 FROM {schema}.batches b WHERE b.id = $10::bigint AND b.status <> 'open'
    ) AS woken
), adopted AS (
    UPDATE {schema}.batches b SET parent_step_id = $1
    WHERE $11 AND b.id = $10::bigint AND b.status = 'open'
    RETURNING b.id
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
    signals_seen_to = greatest(s.signals_seen_to, $5::bigint),
    output = coalesce($8::jsonb, s.output)
FROM t, arrived
WHERE s.id = $1 AND s.attempt = $2 AND s.worker_id = $3 AND s.status = 'in_progress'
RETURNING t.now, arrived.woken, s.queue, (SELECT count(*) FROM adopted) AS adopted
