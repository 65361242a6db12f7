-- Ends the attempts of a group of outcomes (see `store/group/mod.rs`) in one
-- statement, their runs locked by `lock_runs.sql`: for each member, what
-- `end_attempt.sql`, `update_run.sql`, `insert_step.sql`, `insert_events.sql`
-- and `notify.sql` do for one outcome. Each member is fenced on its own claim
-- (`fenced`), and every write of a member joins its fence's row (`ok`): a
-- member whose fence did not hold writes nothing, and the others are written
-- as if it were not there. Row counts are checked by `expect_rows`, which
-- raises, so that the `COMMIT` sent behind this statement rolls back. Returns
-- one row per member whose fence held: its ordinal, the output it kept (as
-- `end_attempt.sql`) and the id of the step handed on to its worker.
-- Members (arrays of one element each, in order): $1 step id, $2 attempt,
-- $3 worker id, $4 step status, $5 step outcome, $6 output, $7 error class,
-- $8 error message, $9 error causes, $11 run id, $12 workflow, $13 run status,
-- $14 current step, $15 run error class, $16 run error message, $17 next step
-- name (NULL = none), $18 its attempt, $19 its reattempts, $20 its queue,
-- $21 its priority, $22 its timeout (ms), $23 its delay (ms), $24 the worker
-- it is handed to (NULL = scheduled), $25 that worker's stall threshold (ms),
-- $26 whether to wake its queue. Events (arrays of one element each): $27 the
-- member's ordinal, $28 step id, $29 step name, $30 attempt, $31 event,
-- $32 reason, $33 details. $10 now, $34 channel.
WITH m AS (
    SELECT *
    FROM unnest($1::bigint[], $2::integer[], $3::text[], $4::text[], $5::text[],
                $6::jsonb[], $7::text[], $8::text[], $9::jsonb[], $11::bigint[],
                $12::text[], $13::text[], $14::text[], $15::text[], $16::text[],
                $17::text[], $18::integer[], $19::integer[], $20::text[],
                $21::smallint[], $22::bigint[], $23::bigint[], $24::text[],
                $25::bigint[], $26::boolean[])
         WITH ORDINALITY
         AS m(step_id, attempt, worker_id, status, outcome, output, error_class,
              error_message, error_causes, run_id, workflow, run_status, current_step,
              run_error_class, run_error_message, next_step, next_attempt,
              next_reattempts, next_queue, next_priority, next_timeout_ms,
              next_delay_ms, claimer, stall_threshold_ms, wake, i)
), fenced AS (
    UPDATE {schema}.steps s
    SET status = m.status, outcome = m.outcome, output = coalesce(m.output, s.output),
        error_class = m.error_class, error_message = m.error_message,
        error_causes = m.error_causes, finished_at = $10::timestamptz
    FROM m
    WHERE s.id = m.step_id AND s.attempt = m.attempt AND s.worker_id = m.worker_id
      AND s.status = 'in_progress'
      -- A step holding a flow slot gives it back through a trigger that
      -- takes the slot's advisory locks; member after member, two groups
      -- could take them in a circle. Such a member is not written here, and
      -- ends alone (see `lock_runs.sql`).
      AND s.slot_workflow IS NULL AND s.slot_key IS NULL AND s.slot_queue IS NULL
    RETURNING m.i, CASE WHEN m.output IS NULL THEN s.output END AS kept_output
), ok AS (
    SELECT m.*, f.kept_output FROM m JOIN fenced f ON f.i = m.i
), run_rows AS (
    UPDATE {schema}.runs r
    SET status = ok.run_status,
        current_step = ok.current_step,
        error_class = ok.run_error_class,
        error_message = ok.run_error_message,
        updated_at = $10::timestamptz,
        paused_at = CASE WHEN ok.run_status = 'paused' AND r.status <> 'paused'
                         THEN $10::timestamptz ELSE r.paused_at END,
        cancelled_at = CASE WHEN ok.run_status = 'cancelled' THEN $10::timestamptz
                            ELSE r.cancelled_at END,
        finished_at = CASE WHEN ok.run_status = 'finished' THEN $10::timestamptz
                           ELSE r.finished_at END
    FROM ok
    WHERE r.id = ok.run_id
    RETURNING r.id
), step AS (
    INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, reattempts, status,
                                queue, priority, timeout_ms, scheduled_at, created_at,
                                waiting_since, started_at, worker_id, stall_at)
    SELECT ok.run_id, ok.workflow, ok.next_step, ok.next_attempt, ok.next_reattempts,
           CASE WHEN ok.claimer IS NULL THEN 'scheduled' ELSE 'in_progress' END,
           ok.next_queue, ok.next_priority, ok.next_timeout_ms,
           $10::timestamptz + ok.next_delay_ms * interval '1 millisecond', $10::timestamptz,
           CASE WHEN ok.next_reattempts > 0 THEN
               (SELECT p.waiting_since FROM {schema}.steps p
                WHERE p.run_id = ok.run_id AND p.step_name = ok.next_step
                  AND p.attempt = ok.next_attempt - 1)
           END,
           CASE WHEN ok.claimer IS NOT NULL THEN $10::timestamptz END,
           ok.claimer,
           CASE WHEN ok.claimer IS NOT NULL THEN
               $10::timestamptz
                   + coalesce(ok.next_timeout_ms, ok.stall_threshold_ms) * interval '1 millisecond'
           END
    FROM ok
    WHERE ok.next_step IS NOT NULL
    ORDER BY ok.i
    RETURNING id, run_id, step_name, attempt, worker_id
), events AS (
    -- A member's events, then the `step_started` of the step handed to its
    -- worker: ids in the order one outcome alone gives them.
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, reason,
                                 details, created_at)
    SELECT e.run_id, e.step_id, e.step_name, e.attempt, e.event, e.actor, e.reason,
           e.details, $10::timestamptz
    FROM (
        SELECT ok.i, e.n, ok.run_id, e.step_id, e.step_name, e.attempt, e.event,
               ok.worker_id AS actor, e.reason, e.details
        FROM unnest($27::bigint[], $28::bigint[], $29::text[], $30::integer[], $31::text[],
                    $32::text[], $33::jsonb[])
             WITH ORDINALITY
             AS e(member, step_id, step_name, attempt, event, reason, details, n)
        JOIN ok ON ok.i = e.member
        UNION ALL
        SELECT ok.i, NULL, s.run_id, s.id, s.step_name, s.attempt, 'step_started',
               s.worker_id, NULL, NULL
        FROM step s
        JOIN ok ON ok.run_id = s.run_id
        WHERE s.worker_id IS NOT NULL
    ) e
    ORDER BY e.i, e.n NULLS LAST
    RETURNING id
), counts AS (
    SELECT {schema}.expect_rows('end_group: runs',
                                (SELECT count(*) FROM ok),
                                (SELECT count(*) FROM run_rows))
         + {schema}.expect_rows('end_group: steps',
                                (SELECT count(*) FROM ok WHERE ok.next_step IS NOT NULL),
                                (SELECT count(*) FROM step))
         + {schema}.expect_rows('end_group: events',
                                (SELECT count(*) FROM unnest($27::bigint[]) AS e(member)
                                 JOIN ok ON ok.i = e.member)
                                + (SELECT count(*) FROM ok WHERE ok.claimer IS NOT NULL
                                                            AND ok.next_step IS NOT NULL),
                                (SELECT count(*) FROM events)) AS checked
), woke AS (
    SELECT count(pg_notify($34::text, q.queue)) AS queues
    FROM (SELECT DISTINCT ok.next_queue AS queue FROM ok
          WHERE ok.wake AND ok.next_step IS NOT NULL) q
)
SELECT ok.i, ok.kept_output, s.id AS next_id,
       (SELECT checked FROM counts) AS checked, (SELECT queues FROM woke) AS woke
FROM ok
LEFT JOIN step s ON s.run_id = ok.run_id AND s.worker_id IS NOT NULL
ORDER BY ok.i
