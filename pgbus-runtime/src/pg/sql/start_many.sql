-- Starts many runs of one workflow in one statement (`Client::start_many`):
-- for each run given, the run row, its first step row and the `started`
-- event; one wake-up per queue the new rows are on. A run whose key a run of
-- the workflow already holds (or an open transaction is inserting) is not
-- inserted: its `run_id` comes back NULL, and `find_runs_by_keys.sql` reads
-- it afterwards. The caller sends each key at most once.
-- $1 workflow, $2 definition digest, $3 options digest, $4 first step name,
-- $5 its timeout_ms (NULL for the stall threshold), $6 now (NULL = clock_timestamp()),
-- $7 notification channel, $8 the definition's live step names in order,
-- $9 the distinct step plans of the call (jsonb[]); then one array per
-- column, one element per run, in call order: $10 inputs (jsonb[]),
-- $11 idempotency keys (text[], NULL for none), $12 the first row's queue,
-- $13 its priority (smallint[]), $14 the start time asked for (timestamptz[],
-- NULL = now), $15 delay before the first row (ms, bigint[]: the step's wait
-- plus the start's delay), $16 the run's queue override (text[], NULL = none),
-- $17 its priority override (smallint[]), $18 its step plan (1-based index
-- into $9), $19 its concurrency key (text[], NULL for none), $20 its deadline when fixed (timestamptz[]), $21 the time a
-- counted deadline counts from (timestamptz[], NULL = now), $22 the
-- milliseconds it counts (bigint[], NULL: fixed or none), $23 what the run
-- becomes past it (text[], NULL without a deadline). Each first row is due
-- at greatest(start time or now, plus the delay, now), and each deadline
-- computed, as in start_run.sql.
--
-- Rows come back one per run given, in call order: (n, run_id or NULL),
-- with the counts of rows written. Keyed runs are inserted in key order, so
-- two calls with common keys wait for each other in one order and never
-- deadlock. Ids are drawn first (one per run given, a gap where a key was
-- taken) so each inserted run is matched to its place in the call.
WITH t AS (
    SELECT coalesce($6::timestamptz, clock_timestamp()) AS now
), given AS MATERIALIZED (
    SELECT g.n, nextval(pg_get_serial_sequence('{schema}.runs', 'id')) AS id,
           g.input, g.key, g.queue, g.priority, g.not_before, g.delay_ms,
           g.queue_override, g.priority_override, g.plan, g.concurrency_key,
           g.deadline_fixed, g.deadline_from, g.deadline_ms, g.on_deadline
    FROM unnest($10::jsonb[], $11::text[], $12::text[], $13::smallint[],
                $14::timestamptz[], $15::bigint[], $16::text[], $17::smallint[],
                $18::integer[], $19::text[], $20::timestamptz[], $21::timestamptz[],
                $22::bigint[], $23::text[])
         WITH ORDINALITY AS g (input, key, queue, priority, not_before, delay_ms,
                               queue_override, priority_override, plan, concurrency_key,
                               deadline_fixed, deadline_from, deadline_ms, on_deadline, n)
), run AS (
    INSERT INTO {schema}.runs (id, workflow, definition_digest, options_digest, status,
                               current_step, input, idempotency_key, step_names, step_plan,
                               created_at, updated_at, queue_override, priority_override,
                               concurrency_key, deadline_at, on_deadline)
    OVERRIDING SYSTEM VALUE
    SELECT g.id, $1, $2, $3, 'ready', $4, g.input, g.key, $8::text[], ($9::jsonb[])[g.plan],
           t.now, t.now, g.queue_override, g.priority_override, g.concurrency_key,
           CASE WHEN g.deadline_ms IS NULL THEN g.deadline_fixed
                ELSE greatest(coalesce(g.deadline_from, t.now), t.now)
                         + g.deadline_ms * interval '1 millisecond'
           END,
           g.on_deadline
    FROM given g CROSS JOIN t
    ORDER BY g.key COLLATE "C", g.n
    ON CONFLICT (workflow, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING id, created_at
), step AS (
    INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue, priority,
                                timeout_ms, scheduled_at, created_at)
    SELECT run.id, $1, $4, 1, 'scheduled', g.queue, g.priority, $5::bigint,
           greatest(coalesce(g.not_before, run.created_at)
                        + g.delay_ms * interval '1 millisecond',
                    run.created_at),
           run.created_at
    FROM run JOIN given g ON g.id = run.id
    RETURNING id, queue
), started AS (
    INSERT INTO {schema}.events (run_id, event, actor, created_at)
    SELECT run.id, 'started', 'client', run.created_at FROM run
    RETURNING id
), wake AS (
    SELECT pg_notify($7, q.queue) FROM (SELECT DISTINCT step.queue FROM step) q
)
SELECT g.n, run.id AS run_id,
       (SELECT count(*) FROM step) AS steps,
       (SELECT count(*) FROM started) AS events,
       (SELECT count(*) FROM wake) AS woken
FROM given g LEFT JOIN run ON run.id = g.id
ORDER BY g.n
