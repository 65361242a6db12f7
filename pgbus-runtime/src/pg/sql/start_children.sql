-- Creates a fan_out batch with its child runs, each with its first step and a
-- `started` event, in the transaction that parks the parent's step; wakes the
-- children's workers.
-- $1 parent run id, $2 parent step id, $3 children's workflows (text[]),
-- $4 children's inputs (jsonb[]), $5 one object per workflow among them:
-- {"workflow", "digest", "options_digest", "step_names", "step_plan",
--  "first": {"name", "queue", "priority", "timeout_ms", "delay_ms"}},
-- $6 now, $7 actor, $8 notification channel, $9 children's concurrency keys
-- (text[], NULL for none)
WITH batch AS (
    INSERT INTO {schema}.batches (run_id, parent_step_id, total, status, created_at)
    VALUES ($1, $2, cardinality($3::text[]), 'open', $6)
    RETURNING id
), spec AS (
    SELECT w->>'workflow' AS workflow,
           w->>'digest' AS digest,
           w->>'options_digest' AS options_digest,
           ARRAY(SELECT jsonb_array_elements_text(w->'step_names')) AS step_names,
           w->'step_plan' AS step_plan,
           w->'first'->>'name' AS first_step,
           w->'first'->>'queue' AS queue,
           (w->'first'->>'priority')::smallint AS priority,
           (w->'first'->>'timeout_ms')::bigint AS timeout_ms,
           (w->'first'->>'delay_ms')::bigint AS delay_ms
    FROM jsonb_array_elements($5::jsonb) w
), child AS (
    SELECT c.workflow, c.input, c.concurrency_key, c.n
    FROM unnest($3::text[], $4::jsonb[], $9::text[])
         WITH ORDINALITY AS c(workflow, input, concurrency_key, n)
), inserted AS (
    INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, current_step,
                               input, parent_batch_id, step_names, step_plan, created_at,
                               updated_at, concurrency_key)
    SELECT c.workflow, spec.digest, spec.options_digest, 'ready', spec.first_step, c.input,
           batch.id, spec.step_names, spec.step_plan, $6, $6, c.concurrency_key
    FROM child c JOIN spec ON spec.workflow = c.workflow CROSS JOIN batch
    ORDER BY c.n
    RETURNING id, workflow
), first_steps AS (
    INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue, priority,
                                timeout_ms, scheduled_at, created_at)
    SELECT i.id, i.workflow, spec.first_step, 1, 'scheduled', spec.queue, spec.priority,
           spec.timeout_ms, $6 + spec.delay_ms * interval '1 millisecond', $6
    FROM inserted i JOIN spec ON spec.workflow = i.workflow
    RETURNING queue
), started AS (
    INSERT INTO {schema}.events (run_id, event, actor, reason, details, created_at)
    SELECT i.id, 'started', $7, 'fan_out',
           jsonb_build_object('parent_run_id', $1::bigint, 'batch_id', batch.id), $6
    FROM inserted i CROSS JOIN batch
    RETURNING id
), wake AS (
    SELECT pg_notify($8, q.queue) FROM (SELECT DISTINCT queue FROM first_steps) q
)
SELECT (SELECT id FROM batch) AS batch_id,
       (SELECT count(*) FROM inserted) AS runs,
       (SELECT count(*) FROM first_steps) AS steps,
       (SELECT count(*) FROM started) AS events,
       (SELECT count(*) FROM wake) AS notified
