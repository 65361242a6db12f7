-- The definition registry (issue 19): what each worker runs, beside its
-- heartbeat, so claims, the sweep and operators can tell which version of a
-- workflow each live worker has.
--
-- `definitions`: one row per workflow and definition digest (a definition is
-- the same wherever it runs; the digest hashes the step list alone, so two
-- workflows with the same list have a row each), written by the first worker
-- that registers it and kept
-- when its workers are gone: a run's `definition_digest` still names it.
-- `step_plan` lists every entry in declaration order, gravestones included,
-- as a JSON array of objects {"name", "kind", "queue", "wait_for"}: `kind` is
-- `step`, `fan_out` or `removed` (the digest's words); `queue` the entry's own
-- queue or the workflow's; `wait_for` the signal it waits for, or null.
CREATE TABLE {schema}.definitions (
    workflow   text        NOT NULL,
    digest     text        NOT NULL,
    step_plan  jsonb       NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (workflow, digest)
);

-- Which definition of each workflow a worker runs. Removed with the worker's
-- row (when it stops, or when the sweep removes a long-silent one).
CREATE TABLE {schema}.worker_definitions (
    worker_id text NOT NULL REFERENCES {schema}.workers (id) ON DELETE CASCADE,
    workflow  text NOT NULL,
    digest    text NOT NULL,
    PRIMARY KEY (worker_id, workflow),
    FOREIGN KEY (workflow, digest) REFERENCES {schema}.definitions (workflow, digest)
);

-- The worker's stable name (`WorkerBuilder::name`) and how many bodies it runs
-- at once. NULL for workers of a version before this migration, which keep
-- writing their rows as before during a rolling deploy.
ALTER TABLE {schema}.workers ADD COLUMN name text;
ALTER TABLE {schema}.workers ADD COLUMN concurrency integer;

-- The definitions live workers run: one row per live worker and workflow it
-- registered, with that definition's step plan. Live: a heartbeat at or
-- after `live_at` minus `threshold_ms` milliseconds. The one rule every
-- "can a live worker run this?" read goes through (the sweep's grace rule,
-- the `unrunnable` mark of run reads); a plain SQL function the planner
-- inlines into each query.
CREATE FUNCTION {schema}.live_definitions(live_at timestamptz, threshold_ms bigint)
RETURNS TABLE (workflow text, step_plan jsonb)
LANGUAGE sql STABLE
AS $$
    SELECT wd.workflow, d.step_plan
    FROM {schema}.worker_definitions wd
    JOIN {schema}.workers w ON w.id = wd.worker_id
    JOIN {schema}.definitions d ON d.workflow = wd.workflow AND d.digest = wd.digest
    WHERE w.heartbeat_at >= live_at - threshold_ms * interval '1 millisecond'
$$;
