-- The pgbus schema: runs, one row per step attempt, the audit trail, signals,
-- fan-out batches and workers. `{schema}` is replaced by the validated, quoted
-- schema name when the migration is applied.

CREATE TABLE {schema}.runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow          text        NOT NULL,
    definition_digest text        NOT NULL,
    options_digest    text        NOT NULL,
    status            text        NOT NULL
        CHECK (status IN ('ready', 'performing', 'paused', 'finished', 'cancelled')),
    current_step      text,
    input             jsonb       NOT NULL,
    idempotency_key   text,
    parent_batch_id   bigint,
    error_class       text,
    error_message     text,
    error_backtrace   text,
    created_at        timestamptz NOT NULL,
    updated_at        timestamptz NOT NULL,
    paused_at         timestamptz,
    cancelled_at      timestamptz,
    finished_at       timestamptz
);

-- One run per (workflow, key); runs without a key are not constrained.
CREATE UNIQUE INDEX runs_idempotency_key ON {schema}.runs (workflow, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX runs_workflow_status ON {schema}.runs (workflow, status, id);
CREATE INDEX runs_status_updated ON {schema}.runs (status, updated_at);

CREATE TABLE {schema}.steps (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        bigint      NOT NULL REFERENCES {schema}.runs (id) ON DELETE CASCADE,
    workflow      text        NOT NULL,
    step_name     text        NOT NULL,
    attempt       integer     NOT NULL CHECK (attempt >= 1),
    -- Consecutive `reattempted` attempts of this step right before this one: what
    -- `max_reattempts` counts. An operator's resume starts again at 0.
    reattempts    integer     NOT NULL DEFAULT 0 CHECK (reattempts >= 0),
    status        text        NOT NULL
        CHECK (status IN ('scheduled', 'in_progress', 'waiting', 'completed', 'skipped', 'failed', 'cancelled')),
    outcome       text
        CHECK (outcome IN ('completed', 'finished_early', 'paused', 'skipped', 'cancelled', 'reattempted')),
    queue         text        NOT NULL,
    priority      smallint    NOT NULL,
    -- The step's own `timeout`; NULL uses the worker's stall threshold.
    timeout_ms    bigint,
    scheduled_at  timestamptz NOT NULL,
    started_at    timestamptz,
    finished_at   timestamptz,
    stall_at      timestamptz,
    waiting_since timestamptz,
    worker_id     text,
    output        jsonb,
    error_class   text,
    error_message text,
    error_causes  jsonb,
    created_at    timestamptz NOT NULL,
    UNIQUE (run_id, step_name, attempt)
);

-- The due queue: partial, so history never enters a claim.
CREATE INDEX steps_due ON {schema}.steps (queue, priority, scheduled_at, id)
    WHERE status = 'scheduled';
-- What the sweep looks at: attempts in flight.
CREATE INDEX steps_in_progress ON {schema}.steps (stall_at)
    WHERE status = 'in_progress';
CREATE INDEX steps_in_progress_worker ON {schema}.steps (worker_id)
    WHERE status = 'in_progress';

CREATE TABLE {schema}.events (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id     bigint      NOT NULL REFERENCES {schema}.runs (id) ON DELETE CASCADE,
    step_id    bigint,
    step_name  text,
    attempt    integer,
    event      text        NOT NULL,
    actor      text        NOT NULL,
    reason     text,
    details    jsonb,
    created_at timestamptz NOT NULL
);
CREATE INDEX events_run ON {schema}.events (run_id, id);

CREATE TABLE {schema}.signals (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id      bigint      NOT NULL REFERENCES {schema}.runs (id) ON DELETE CASCADE,
    name        text        NOT NULL,
    payload     jsonb       NOT NULL DEFAULT 'null',
    created_at  timestamptz NOT NULL,
    consumed_by bigint,
    consumed_at timestamptz
);
CREATE INDEX signals_pending ON {schema}.signals (run_id, name, id)
    WHERE consumed_by IS NULL;

CREATE TABLE {schema}.batches (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id         bigint      NOT NULL REFERENCES {schema}.runs (id) ON DELETE CASCADE,
    parent_step_id bigint      NOT NULL,
    total          integer     NOT NULL,
    succeeded      integer     NOT NULL DEFAULT 0,
    failed         integer     NOT NULL DEFAULT 0,
    status         text        NOT NULL CHECK (status IN ('open', 'succeeded', 'failed')),
    created_at     timestamptz NOT NULL,
    resolved_at    timestamptz
);
CREATE INDEX batches_run ON {schema}.batches (run_id);

CREATE TABLE {schema}.workers (
    id           text PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    queues       text[]      NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
