-- The claim when a flow limit applies to what the worker claims (migration
-- 0016, docs/decisions.md "Flow control"): claim.sql's statement, its
-- guarantees and its shape (read that file's comments first), with the
-- admission. The store uses it when claim.sql said `limited`, and until this
-- one says a limit applies no more.
--
-- Held rows (`held_by`) are out of the due index and of this scan. The scan
-- looks $3 + 100 rows ahead per queue, locks each candidate's run by primary
-- key (its status read after the lock), and hands the candidates, in claim
-- order, to `flow_admit`, which admits up to $3 of them under the limits'
-- advisory locks (tried, never waited for: a key another transaction holds
-- leaves its rows due, untouched) with fresh counts, and holds back or
-- throttles the others it looks at (writing those rows itself): a key at its
-- limit with many due rows at the head of the queue is passed over in this
-- same statement, and its rows leave the due index. Candidates it does not
-- reach stay locked, not claimed, until this transaction commits. A claimed
-- row records the keys whose slots it holds (`slot_*`); a run of a
-- `slot = "run"` workflow takes the run's slots too (the claim only adds run
-- slots: giving one back is a trigger's, and may wait). Should no limit apply
-- any more (`lim`), the first $3 candidates are claimed as claim.sql would
-- and `flow_admit` is not called (a one-time filter). The result has one row
-- per claimed step, or one row of NULLs when none was claimed; every row
-- carries `limited` and `flow`, the rows held or throttled, as JSON
-- [[workflow, "held" | "throttled", scope, rows], ...].
-- $1 queues, $2 what the worker runs, as JSON {"<workflow>": {"digest": "<hex>",
-- "steps": ["<step>", ...]}}, $3 limit, $4 worker id, $5 stall threshold (ms),
-- $6 now (NULL = clock_timestamp())
WITH t AS (
    SELECT coalesce($6::timestamptz, clock_timestamp()) AS now
), lim AS (
    SELECT {schema}.flow_applies($1::text[], $2::jsonb) AS limited
), candidates AS (
    SELECT d.step_id, d.run_id, d.priority, d.scheduled_at, d.workflow, d.step_name, d.queue
    FROM (SELECT DISTINCT u.name FROM unnest($1::text[]) AS u(name)) AS q
    CROSS JOIN LATERAL (
        SELECT s.id AS step_id, s.run_id, s.priority, s.scheduled_at, s.workflow, s.step_name,
               s.queue
        FROM {schema}.steps s
        WHERE s.queue = q.name
          AND s.status IN ('scheduled', 'waiting')
          AND s.held_by IS NULL
          AND s.scheduled_at <= (SELECT now FROM t)
          AND ($2::jsonb -> s.workflow -> 'steps') ? s.step_name
          AND (SELECT r.status FROM {schema}.runs r WHERE r.id = s.run_id) = 'ready'
          -- A run past its deadline starts no step (as in claim.sql).
          AND (SELECT r.deadline_at IS NULL OR r.deadline_at > (SELECT now FROM t)
               FROM {schema}.runs r WHERE r.id = s.run_id)
        ORDER BY s.priority, s.scheduled_at, s.id
        LIMIT CASE WHEN (SELECT limited FROM lim) THEN $3::bigint + 100 ELSE $3::bigint END
        FOR UPDATE OF s SKIP LOCKED
    ) d
), due AS (
    -- Each candidate's run, locked by primary key, its status read after
    -- the lock.
    SELECT c.step_id, c.run_id, c.workflow, c.step_name, c.queue, l.concurrency_key,
           CASE WHEN l.slot_held THEN l.slot_workflow END AS run_workflow_slot,
           CASE WHEN l.slot_held THEN l.slot_key END AS run_key_slot,
           l.definition_digest AS old_digest,
           coalesce($2::jsonb -> l.workflow ->> 'digest', l.definition_digest) AS new_digest,
           row_number() OVER (ORDER BY c.priority, c.scheduled_at, c.step_id) AS n
    FROM candidates c
    CROSS JOIN LATERAL (
        SELECT r.status, r.workflow, r.definition_digest, r.concurrency_key,
               r.slot_held, r.slot_workflow, r.slot_key
        FROM {schema}.runs r
        WHERE r.id = c.run_id
        FOR UPDATE SKIP LOCKED
    ) l
    WHERE l.status = 'ready'
), verdicts AS (
    -- Called only when a limit applies (a one-time filter on `lim`), with
    -- the candidates in claim order.
    SELECT v.*
    FROM (SELECT array_agg(d.step_id ORDER BY d.n) AS ids,
                 array_agg(d.run_id ORDER BY d.n) AS run_ids,
                 array_agg(d.workflow ORDER BY d.n) AS workflows,
                 array_agg(d.step_name ORDER BY d.n) AS step_names,
                 array_agg(d.queue ORDER BY d.n) AS queues,
                 array_agg(d.concurrency_key ORDER BY d.n) AS run_keys,
                 array_agg(d.run_workflow_slot ORDER BY d.n) AS run_workflow_slots,
                 array_agg(d.run_key_slot ORDER BY d.n) AS run_key_slots
          FROM due d) AS a
    CROSS JOIN LATERAL {schema}.flow_admit(
        a.ids, a.run_ids, a.workflows, a.step_names, a.queues, a.run_keys,
        a.run_workflow_slots, a.run_key_slots, $3::bigint, (SELECT now FROM t)) AS v
    WHERE (SELECT limited FROM lim)
), admitted AS (
    SELECT d.step_id, d.run_id, NULL::text AS slot_workflow, NULL::text AS slot_key,
           NULL::text AS slot_queue, NULL::text AS run_workflow, NULL::text AS run_key
    FROM due d
    WHERE NOT (SELECT limited FROM lim) AND d.n <= $3
    UNION ALL
    SELECT v.step_id, v.run_id, v.slot_workflow, v.slot_key, v.slot_queue, v.run_workflow,
           v.run_key
    FROM verdicts v
    WHERE v.verdict = 'admitted'
), claimed AS (
    UPDATE {schema}.steps s
    SET status = 'in_progress',
        started_at = t.now,
        worker_id = $4,
        stall_at = t.now + coalesce(s.timeout_ms, $5::bigint) * interval '1 millisecond',
        slot_workflow = a.slot_workflow,
        slot_key = a.slot_key,
        slot_queue = a.slot_queue,
        held_by = NULL,
        throttled_by = NULL
    FROM admitted a, t
    WHERE s.id = a.step_id
    RETURNING s.id, s.run_id, s.workflow, s.step_name, s.attempt, s.reattempts,
              s.scheduled_at, s.started_at, s.timeout_ms, s.waiting_since, s.waiting_for
), moved AS (
    UPDATE {schema}.runs r
    SET status = 'performing', updated_at = t.now, definition_digest = d.new_digest,
        slot_held = r.slot_held OR a.run_workflow IS NOT NULL OR a.run_key IS NOT NULL,
        slot_workflow = coalesce(a.run_workflow, r.slot_workflow),
        slot_key = coalesce(a.run_key, r.slot_key)
    FROM admitted a
    JOIN due d ON d.step_id = a.step_id
    CROSS JOIN t
    WHERE r.id = a.run_id
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
), flow AS (
    SELECT coalesce(jsonb_agg(jsonb_build_array(x.workflow, x.verdict, x.scope, x.rows)),
                    '[]'::jsonb) AS held
    FROM (SELECT v.of_workflow AS workflow, v.verdict,
                 split_part(v.limit_key, ':', 1) AS scope, count(*) AS rows
          FROM verdicts v
          WHERE v.verdict IN ('held', 'throttled')
          GROUP BY 1, 2, 3) x
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
       f.held AS flow,
       (SELECT limited FROM lim) AS limited
FROM flow f
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
