-- Delivers a signal to a run that has not ended: stores it, writes a
-- `signal_received` event, and wakes the run's steps waiting for that name (their
-- rows go back to `scheduled`, same attempt; the gate consumes the signal). For a
-- missing or ended run nothing is stored; `status` says which. Runs after
-- lock_signalled_run.sql, in the same transaction (see there why).
-- $1 run id, $2 name, $3 payload (jsonb), $4 now (NULL = clock_timestamp()),
-- $5 notification channel
WITH t AS (
    SELECT coalesce($4::timestamptz, clock_timestamp()) AS now
), run AS (
    SELECT id, status FROM {schema}.runs WHERE id = $1 FOR UPDATE
), sig AS (
    INSERT INTO {schema}.signals (run_id, name, payload, created_at)
    SELECT run.id, $2, $3, t.now FROM run, t
    WHERE run.status NOT IN ('finished', 'cancelled')
    RETURNING id
), received AS (
    INSERT INTO {schema}.events (run_id, event, actor, reason, details, created_at)
    SELECT $1, 'signal_received', 'client', $2, jsonb_build_object('signal_id', sig.id), t.now
    FROM sig, t
    RETURNING id
), woken AS (
    UPDATE {schema}.steps s
    SET status = 'scheduled', scheduled_at = t.now
    FROM t
    WHERE s.run_id = $1 AND s.status = 'waiting' AND s.waiting_for = $2
      AND EXISTS (SELECT 1 FROM sig)
    RETURNING s.queue
), wake AS (
    SELECT pg_notify($5, q.queue) FROM (SELECT DISTINCT queue FROM woken) q
)
SELECT (SELECT status FROM run) AS status,
       (SELECT id FROM sig) AS signal_id,
       (SELECT count(*) FROM received) AS events,
       (SELECT count(*) FROM woken) AS woken,
       (SELECT count(*) FROM wake) AS notified
