-- Starts a run: the run row, its first step row and the `started` event, in one
-- statement; wakes workers, which learn the first step's due time.
-- $1 workflow, $2 definition digest, $3 options digest, $4 input (jsonb),
-- $5 idempotency key (NULL for none), $6 first step name, $7 queue, $8 priority,
-- $9 timeout_ms (NULL for the stall threshold), $10 delay before the first step (ms),
-- $11 now (NULL = clock_timestamp()), $12 notification channel,
-- $13 the definition's live step names in order, $14 their step plan (jsonb),
-- $15 the start time asked for (NULL = now; the delay counts from it),
-- $16 the run's queue override (NULL = none), $17 its priority override (NULL = none),
-- $18 its concurrency key (NULL = none; see migration 0016).
-- $19 its deadline when fixed, $20 the time a counted deadline counts from
-- (NULL = now), $21 the milliseconds it counts (NULL: $19 or none), $22 what
-- the run becomes past it ('cancel' | 'pause'; NULL without a deadline).
-- The first row is due at greatest($15 or now, plus $10, now): never before now.
-- The deadline is $19, or greatest($20 or now, now) plus $21 (engine::RunDeadline).
WITH t AS (
    SELECT coalesce($11::timestamptz, clock_timestamp()) AS now
), run AS (
    INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, current_step,
                               input, idempotency_key, step_names, step_plan, created_at,
                               updated_at, queue_override, priority_override,
                               concurrency_key, deadline_at, on_deadline)
    SELECT $1, $2, $3, 'ready', $6, $4, $5, $13::text[], $14::jsonb, t.now, t.now,
           $16::text, $17::smallint, $18::text,
           CASE WHEN $21::bigint IS NULL THEN $19::timestamptz
                ELSE greatest(coalesce($20::timestamptz, t.now), t.now)
                         + $21::bigint * interval '1 millisecond'
           END,
           $22::text
    FROM t
    ON CONFLICT (workflow, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, created_at
), step AS (
    INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue, priority,
                                timeout_ms, scheduled_at, created_at)
    SELECT run.id, $1, $6, 1, 'scheduled', $7, $8, $9,
           greatest(coalesce($15::timestamptz, run.created_at)
                        + $10::bigint * interval '1 millisecond',
                    run.created_at),
           run.created_at
    FROM run
    RETURNING id
), started AS (
    INSERT INTO {schema}.events (run_id, event, actor, created_at)
    SELECT run.id, 'started', 'client', run.created_at FROM run
    RETURNING id
), wake AS (
    SELECT pg_notify($12, $7) FROM run WHERE $10::bigint >= 0
)
SELECT run.id,
       (SELECT count(*) FROM step) AS steps,
       (SELECT count(*) FROM started) AS events,
       (SELECT count(*) FROM wake) AS woken
FROM run
