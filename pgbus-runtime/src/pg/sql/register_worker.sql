-- Records a worker in the registry: its row, the definitions it runs (each
-- stored once per digest, and what a start of its build writes once per
-- options digest, never changed after), and its links to them (those of
-- workflows it no longer runs removed). Idempotent: registering the same id
-- again replaces its row's name, queues and concurrency and its links.
-- $1 id, $2 host, $3 pid, $4 queues, $5 now (NULL = clock_timestamp()), $6 name,
-- $7 concurrency, $8 definitions as a JSON array of {"workflow", "digest",
-- "step_plan", "options_digest", "start_plan"} (`start_plan`: the run step plan
-- a start records, see migration 0012)
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
           g->>'options_digest' AS options_digest, g->'start_plan' AS start_plan
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
    INSERT INTO {schema}.worker_definitions (worker_id, workflow, digest, options_digest)
    SELECT $1, g.workflow, g.digest, g.options_digest FROM given g
    ON CONFLICT (worker_id, workflow)
    DO UPDATE SET digest = excluded.digest, options_digest = excluded.options_digest
    RETURNING workflow
)
SELECT (SELECT count(*) FROM worker) AS workers,
       (SELECT count(*) FROM linked) AS links,
       (SELECT count(*) FROM given) AS given,
       (SELECT count(*) FROM stored) AS stored,
       (SELECT count(*) FROM unlinked) AS unlinked
