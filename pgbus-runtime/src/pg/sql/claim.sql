-- Claims up to $3 due steps of ready runs, on the given queues and of the steps
-- the worker's definitions hold, lowest priority number first; locks step and run rows with SKIP
-- LOCKED so concurrent claimers never wait on each other or deadlock with an
-- outcome holding a run lock. Due: `scheduled` rows whose time has come, and
-- `waiting` rows whose `wait_timeout` ended (the gate then decides). Moves each
-- run to `performing`, writes a `step_started` event, and returns the input and
-- earlier outputs of each run, the signal name a step waits for, and whether
-- the run has fan_out batches. What the gate reads (signals, batches) comes from
-- gate_inputs.sql, a later statement of the same transaction: this statement's
-- snapshot predates the locks it takes, so a signal committed in between would
-- be missing from it although its wake made the row due.
--
-- The shape is chosen for one plan whatever the table statistics say (a
-- worker's pooled connection keeps the plan it made when the tables were
-- empty): per queue, an ordered scan of the due index (`queue` equal, then
-- `priority, scheduled_at, id` in index order) that stops after $3 rows,
-- checking each row's run by primary key; then the runs of those rows locked
-- by primary key, their status read after the lock. No sort of the whole due
-- queue, and no join the planner could turn into a scan of every ready run.
-- Candidates beyond the limit (a worker of several queues) stay locked, not
-- claimed, until this transaction commits.
--
-- What the worker can run ($2) is a filter on each row of that scan, not a
-- join: the row's workflow must be registered and its definition must hold the
-- row's step (`$2 -> workflow -> 'steps' ? step_name`, a lookup in the bound
-- JSON). A row the worker lacks is passed over like a row of a paused run, so
-- it never stops the scan from reaching the rows behind it (no head-of-line
-- blocking); it waits for a worker that has its step. So is a row of a run past its
-- deadline (issue 21): it starts no step, and the sweep acts on the run.
--
-- A run whose `definition_digest` differs from the claiming worker's digest of
-- its workflow takes the worker's, and gets a `definition_changed` event
-- (details: old and new digest) just before the claim's `step_started`.
--
-- Flow control (migration 0016): this is the claim when no limit applies to
-- what the worker claims (`lim`: no `flow_limits` row of its workflows or
-- queues, no `rate_limits` row of its workflows; `flow_applies`, one call of
-- three index probes). When one does, it claims nothing and says so
-- (`limited`), and the store claims with claim_limited.sql instead, which
-- admits under the limits; held rows (`held_by`) are out of the due index and
-- of this scan either way. A row claimed here holds no slot (its `slot_*`
-- cleared). The result has one row per claimed step, or one row of NULLs when
-- none was claimed; every row carries `limited`, and `flow` (always `[]`
-- here; see claim_limited.sql).
-- $1 queues, $2 what the worker runs, as JSON {"<workflow>": {"digest": "<hex>",
-- "steps": ["<step>", ...]}}, $3 limit, $4 worker id, $5 stall threshold (ms),
-- $6 now (NULL = clock_timestamp())
WITH t AS (
    SELECT coalesce($6::timestamptz, clock_timestamp()) AS now
), lim AS (
    SELECT {schema}.flow_applies($1::text[], $2::jsonb) AS limited
), candidates AS (
    SELECT d.step_id, d.run_id, d.priority, d.scheduled_at
    FROM (SELECT DISTINCT u.name FROM unnest($1::text[]) AS u(name)) AS q
    CROSS JOIN LATERAL (
        SELECT s.id AS step_id, s.run_id, s.priority, s.scheduled_at
        FROM {schema}.steps s
        WHERE s.queue = q.name
          AND s.status IN ('scheduled', 'waiting')
          AND s.held_by IS NULL
          AND s.scheduled_at <= (SELECT now FROM t)
          AND ($2::jsonb -> s.workflow -> 'steps') ? s.step_name
          AND (SELECT r.status FROM {schema}.runs r WHERE r.id = s.run_id) = 'ready'
          AND (SELECT r.deadline_at IS NULL OR r.deadline_at > (SELECT now FROM t)
               FROM {schema}.runs r WHERE r.id = s.run_id)
        ORDER BY s.priority, s.scheduled_at, s.id
        LIMIT CASE WHEN (SELECT limited FROM lim) THEN 0 ELSE $3::bigint END
        FOR UPDATE OF s SKIP LOCKED
    ) d
), runs_locked AS (
    SELECT r.id, r.status, r.workflow, r.definition_digest
    FROM {schema}.runs r
    WHERE r.id = ANY (ARRAY(SELECT run_id FROM candidates))
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT c.step_id, c.run_id, l.definition_digest AS old_digest,
           coalesce($2::jsonb -> l.workflow ->> 'digest', l.definition_digest) AS new_digest
    FROM candidates c
    JOIN runs_locked l ON l.id = c.run_id AND l.status = 'ready'
    ORDER BY c.priority, c.scheduled_at, c.step_id
    LIMIT $3
), claimed AS (
    UPDATE {schema}.steps s
    SET status = 'in_progress',
        started_at = t.now,
        worker_id = $4,
        stall_at = t.now + coalesce(s.timeout_ms, $5::bigint) * interval '1 millisecond',
        slot_workflow = NULL,
        slot_key = NULL,
        slot_queue = NULL,
        throttled_by = NULL
    FROM due, t
    WHERE s.id = due.step_id
    RETURNING s.id, s.run_id, s.workflow, s.step_name, s.attempt, s.reattempts,
              s.scheduled_at, s.started_at, s.timeout_ms, s.waiting_since, s.waiting_for
), moved AS (
    UPDATE {schema}.runs r
    SET status = 'performing', updated_at = t.now, definition_digest = due.new_digest
    FROM due, t
    WHERE r.id = due.run_id
    RETURNING r.id, r.input, r.step_plan, r.schedule_name, r.tick_at
), started AS (
    -- Per claimed row its `step_started`, preceded by a `definition_changed`
    -- when the digest changed, in that order.
    INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, details, created_at)
    SELECT c.run_id, c.id, c.step_name, c.attempt,
           CASE WHEN e.changed THEN 'definition_changed' ELSE 'step_started' END,
           $4,
           CASE WHEN e.changed
                THEN jsonb_build_object('old_digest', d.old_digest, 'new_digest', d.new_digest)
           END,
           c.started_at
    FROM claimed c
    JOIN due d ON d.step_id = c.id
    CROSS JOIN LATERAL (VALUES (true), (false)) AS e(changed)
    WHERE NOT e.changed OR d.old_digest <> d.new_digest
    ORDER BY c.id, e.changed DESC
    RETURNING id, event
)
SELECT c.id, c.run_id, c.workflow, c.step_name, c.attempt, c.reattempts,
       c.scheduled_at, c.started_at, c.timeout_ms, c.waiting_since, c.input,
       c.schedule_name, c.tick_at, c.outputs, c.wait_name, c.has_batches,
       (SELECT count(*) FROM claimed) AS claimed_rows,
       (SELECT count(*) FROM moved) AS moved_rows,
       (SELECT count(*) FROM started s WHERE s.event = 'step_started') AS event_rows,
       (SELECT count(*) FROM started s WHERE s.event = 'definition_changed') AS changed_rows,
       (SELECT count(*) FROM claimed k JOIN due d ON d.step_id = k.id
        WHERE d.old_digest <> d.new_digest) AS changes,
       '[]'::jsonb AS flow,
       lim.limited
FROM lim
LEFT JOIN (
    SELECT c.id, c.run_id, c.workflow, c.step_name, c.attempt, c.reattempts,
           c.scheduled_at, c.started_at, c.timeout_ms, c.waiting_since, m.input,
           m.schedule_name, m.tick_at,
           (SELECT coalesce(jsonb_object_agg(o.step_name, o.output), '{}'::jsonb)
            FROM (SELECT DISTINCT ON (p.step_name) p.step_name, p.output
                  FROM {schema}.steps p
                  WHERE p.run_id = c.run_id
                    AND p.status IN ('completed', 'skipped')
                    AND p.output IS NOT NULL
                  ORDER BY p.step_name, p.attempt DESC) o) AS outputs,
           w.name AS wait_name,
           EXISTS (SELECT 1 FROM {schema}.batches b WHERE b.run_id = c.run_id) AS has_batches
    FROM claimed c
    JOIN moved m ON m.id = c.run_id
    CROSS JOIN LATERAL (
        SELECT coalesce(c.waiting_for,
                        (SELECT p->>'wait_for' FROM jsonb_array_elements(m.step_plan) p
                         WHERE p->>'name' = c.step_name LIMIT 1)) AS name
    ) w
) c ON true
