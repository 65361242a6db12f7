-- Records a worker in the registry: its row, the definitions it runs (each
-- stored once per digest, and what a start of its build writes once per
-- options digest, never changed after), and its links to them (those of
-- workflows it no longer runs removed). Idempotent: registering the same id
-- again replaces its row's name, queues and concurrency and its links.
--
-- Flow control (migration 0016): the limits of the workflows it runs replace
-- theirs (rows of those workflows it does not declare are deleted: the
-- deploy in force; two versions that disagree, the last to register wins),
-- and the queue limits it declares are upserted (a queue it does not declare
-- is left alone). A limit that changed (added, changed, removed) frees the
-- held rows of its workflow, or of its queue, for the next claim to decide
-- again (a raised limit must not wait for a release to wake them), and wakes
-- their queues; a rate's throttled rows keep their due time.
-- $1 id, $2 host, $3 pid, $4 queues, $5 now (NULL = clock_timestamp()), $6 name,
-- $7 concurrency, $8 definitions as a JSON array of {"workflow", "digest",
-- "step_plan", "options_digest", "start_plan", "overrides"} (`start_plan`: the
-- run step plan a start records, see migration 0012; `overrides`: the
-- per-deployment overrides in force, JSON null for none, see migration 0021), $9 concurrency limits as a JSON array
-- of {"key", "workflow" (null for a queue's), "max", "holder"}, $10 rate limits
-- as a JSON array of {"key", "workflow", "max", "period_ms"}, $11 the
-- notification channel
WITH t AS (
    SELECT coalesce($5::timestamptz, clock_timestamp()) AS now
), worker AS (
    INSERT INTO {schema}.workers (id, host, pid, queues, started_at, heartbeat_at, name, concurrency)
    SELECT $1, $2, $3, $4, t.now, t.now, $6, $7 FROM t
    ON CONFLICT (id) DO UPDATE
    SET heartbeat_at = excluded.heartbeat_at, queues = excluded.queues,
        name = excluded.name, concurrency = excluded.concurrency
    RETURNING id
), given AS (
    SELECT g->>'workflow' AS workflow, g->>'digest' AS digest, g->'step_plan' AS step_plan,
           g->>'options_digest' AS options_digest, g->'start_plan' AS start_plan,
           nullif(g->'overrides', 'null'::jsonb) AS overrides
    FROM jsonb_array_elements($8::jsonb) AS g
), stored AS (
    INSERT INTO {schema}.definitions (digest, workflow, step_plan, created_at)
    SELECT g.digest, g.workflow, g.step_plan, t.now FROM given g CROSS JOIN t
    ON CONFLICT (workflow, digest) DO NOTHING
    RETURNING digest
), starts AS (
    INSERT INTO {schema}.definition_starts (options_digest, digest, workflow, step_plan, created_at)
    SELECT g.options_digest, g.digest, g.workflow, g.start_plan, t.now FROM given g CROSS JOIN t
    ON CONFLICT (options_digest) DO NOTHING
    RETURNING options_digest
), unlinked AS (
    DELETE FROM {schema}.worker_definitions wd
    WHERE wd.worker_id = $1
      AND wd.workflow NOT IN (SELECT g.workflow FROM given g)
    RETURNING wd.workflow
), linked AS (
    INSERT INTO {schema}.worker_definitions (worker_id, workflow, digest, options_digest, overrides)
    SELECT $1, g.workflow, g.digest, g.options_digest, g.overrides FROM given g
    ON CONFLICT (worker_id, workflow)
    DO UPDATE SET digest = excluded.digest, options_digest = excluded.options_digest,
                  overrides = excluded.overrides
    RETURNING workflow
), limits_given AS (
    SELECT l->>'key' AS key, l->>'workflow' AS workflow, (l->>'max')::integer AS max_in_flight,
           l->>'holder' AS holder
    FROM jsonb_array_elements($9::jsonb) AS l
), limits_gone AS (
    DELETE FROM {schema}.flow_limits f
    WHERE f.workflow IN (SELECT g.workflow FROM given g)
      AND f.key NOT IN (SELECT lg.key FROM limits_given lg)
    RETURNING f.key, f.workflow
), limits_set AS (
    INSERT INTO {schema}.flow_limits AS f (key, workflow, max_in_flight, holder, updated_at)
    SELECT lg.key, lg.workflow, lg.max_in_flight, lg.holder, t.now
    FROM limits_given lg CROSS JOIN t
    ON CONFLICT (key) DO UPDATE
    SET workflow = excluded.workflow, max_in_flight = excluded.max_in_flight,
        holder = excluded.holder, updated_at = excluded.updated_at
    WHERE (f.workflow, f.max_in_flight, f.holder)
          IS DISTINCT FROM (excluded.workflow, excluded.max_in_flight, excluded.holder)
    RETURNING f.key, f.workflow
), rates_given AS (
    SELECT r->>'key' AS key, r->>'workflow' AS workflow, (r->>'max')::integer AS max_starts,
           (r->>'period_ms')::bigint AS period_ms
    FROM jsonb_array_elements($10::jsonb) AS r
), rates_gone AS (
    DELETE FROM {schema}.rate_limits r
    WHERE r.workflow IN (SELECT g.workflow FROM given g)
      AND r.key NOT IN (SELECT rg.key FROM rates_given rg)
    RETURNING r.key
), rates_set AS (
    INSERT INTO {schema}.rate_limits AS r (key, workflow, max_starts, period_ms, updated_at)
    SELECT rg.key, rg.workflow, rg.max_starts, rg.period_ms, t.now
    FROM rates_given rg CROSS JOIN t
    ON CONFLICT (key) DO UPDATE
    SET workflow = excluded.workflow, max_starts = excluded.max_starts,
        period_ms = excluded.period_ms, updated_at = excluded.updated_at
    WHERE (r.workflow, r.max_starts, r.period_ms)
          IS DISTINCT FROM (excluded.workflow, excluded.max_starts, excluded.period_ms)
    RETURNING r.key
), limits_changed AS (
    SELECT key, workflow FROM limits_gone
    UNION ALL
    SELECT key, workflow FROM limits_set
), freed AS (
    UPDATE {schema}.steps s
    SET held_by = NULL
    WHERE s.held_by IS NOT NULL AND s.status IN ('scheduled', 'waiting')
      AND (s.workflow IN (SELECT c.workflow FROM limits_changed c WHERE c.workflow IS NOT NULL)
           OR s.held_by IN (SELECT c.key FROM limits_changed c WHERE c.workflow IS NULL))
    RETURNING s.queue
), wake AS (
    SELECT pg_notify($11, q.queue) FROM (SELECT DISTINCT freed.queue FROM freed) AS q
)
SELECT (SELECT count(*) FROM worker) AS workers,
       (SELECT count(*) FROM linked) AS links,
       (SELECT count(*) FROM given) AS given,
       (SELECT count(*) FROM stored) AS stored,
       (SELECT count(*) FROM unlinked) AS unlinked,
       (SELECT count(*) FROM limits_changed) + (SELECT count(*) FROM rates_gone)
           + (SELECT count(*) FROM rates_set) AS limits_changed,
       (SELECT count(*) FROM freed) AS freed,
       (SELECT count(*) FROM wake) AS woken
