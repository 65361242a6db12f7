-- Claims up to $3 due steps of ready runs, on the given queues and of the given
-- workflows, lowest priority number first; locks step and run rows with SKIP
-- LOCKED so concurrent claimers never wait on each other or deadlock with an
-- outcome holding a run lock. Due: `scheduled` rows whose time has come, and
-- `waiting` rows whose `wait_timeout` ended (the gate then decides). Moves each
-- run to `performing`, writes a `step_started` event, and returns the input and
-- earlier outputs of each run, the signal name a step waits for, and whether
-- the run has fan_out batches. What the gate reads (signals, batches) comes from
-- gate_inputs.sql, a later statement of the same transaction: this statement's
-- snapshot predates the locks it takes, so a signal committed in between would
-- be missing from it although its wake made the row due.
-- $1 queues, $2 workflows, $3 limit, $4 worker id, $5 stall threshold (ms),
-- $6 now (NULL = clock_timestamp())
WITH t AS (
    SELECT coalesce($6::timestamptz, clock_timestamp()) AS now
), due AS (
    SELECT s.id AS step_id, s.run_id
    FROM {schema}.steps s
    JOIN {schema}.runs r ON r.id = s.run_id
    WHERE s.status IN ('scheduled', 'waiting')
      AND s.queue = ANY($1)
      AND s.workflow = ANY($2)
      AND s.scheduled_at <= (SELECT now FROM t)
      AND r.status = 'ready'
    ORDER BY s.priority, s.scheduled_at, s.id
    LIMIT $3
    FOR UPDATE OF s, r SKIP LOCKED
), claimed AS (
    UPDATE {schema}.steps s
    SET status = 'in_progress',
        started_at = t.now,
        worker_id = $4,
        stall_at = t.now + coalesce(s.timeout_ms, $5::bigint) * interval '1 millisecond'
    FROM due, t
    WHERE s.id = due.step_id
    RETURNING s.id, s.run_id, s.workflow, s.step_name, s.attempt, s.reattempts,
              s.scheduled_at, s.started_at, s.timeout_ms, s.waiting_since, s.waiting_for
), moved AS (
    UPDATE {schema}.runs r
    SET status = 'performing', updated_at = t.now
    FROM due, t
    WHERE r.id = due.run_id
    RETURNING r.id, r.input, r.step_plan
), started AS (
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, created_at)
    SELECT c.run_id, c.id, c.step_name, c.attempt, 'step_started', $4, c.started_at
    FROM claimed c
    RETURNING id
)
SELECT c.id, c.run_id, c.workflow, c.step_name, c.attempt, c.reattempts,
       c.scheduled_at, c.started_at, c.timeout_ms, c.waiting_since, m.input,
       (SELECT coalesce(jsonb_object_agg(o.step_name, o.output), '{}'::jsonb)
        FROM (SELECT DISTINCT ON (p.step_name) p.step_name, p.output
              FROM {schema}.steps p
              WHERE p.run_id = c.run_id
                AND p.status IN ('completed', 'skipped')
                AND p.output IS NOT NULL
              ORDER BY p.step_name, p.attempt DESC) o) AS outputs,
       w.name AS wait_name,
       EXISTS (SELECT 1 FROM {schema}.batches b WHERE b.run_id = c.run_id) AS has_batches,
       (SELECT count(*) FROM claimed) AS claimed_rows,
       (SELECT count(*) FROM moved) AS moved_rows,
       (SELECT count(*) FROM started) AS event_rows
FROM claimed c
JOIN moved m ON m.id = c.run_id
CROSS JOIN LATERAL (
    SELECT coalesce(c.waiting_for,
                    (SELECT p->>'wait_for' FROM jsonb_array_elements(m.step_plan) p
                     WHERE p->>'name' = c.step_name LIMIT 1)) AS name
) w
