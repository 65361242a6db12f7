-- Schedules (issue 20): a named cron expression in an IANA time zone that
-- starts a run of a workflow on every tick. Declared in code (`origin` =
-- 'code', written by each worker that registers the workflow) or created
-- through the client (`origin` = 'client'). Workers fire due ticks without a
-- leader: each locks a due row with SKIP LOCKED, checks `next_tick_at` is still
-- what it read, starts the tick's runs (idempotency key
-- `schedule:<name>:<tick>`) and moves `next_tick_at` on, in one transaction.
--
-- `catch_up`: `skip`, `one` or `all(N)`. `input`: the input of every run.
-- `next_tick_at`: the next tick to fire, NULL when none is ahead.
-- `last_tick_at`, `last_run_id` (no foreign key: retention deletes runs),
-- `last_fired_at`: the last fire. `paused_at`, `paused_by`, `paused_reason`:
-- set while paused (`paused_by` = 'pgbus' for a row this version cannot read).
-- `ticks_skipped`: missed ticks the catch-up policy started no run for.
-- `declared_at`: when a worker last declared it in code.
CREATE TABLE {schema}.schedules (
    name          text        PRIMARY KEY,
    workflow      text        NOT NULL,
    expression    text        NOT NULL,
    timezone      text        NOT NULL,
    catch_up      text        NOT NULL,
    input         jsonb       NOT NULL,
    origin        text        NOT NULL CHECK (origin IN ('code', 'client')),
    next_tick_at  timestamptz,
    last_tick_at  timestamptz,
    last_run_id   bigint,
    last_fired_at timestamptz,
    paused_at     timestamptz,
    paused_by     text,
    paused_reason text,
    ticks_skipped bigint      NOT NULL DEFAULT 0,
    declared_at   timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);

-- What a fire pass reads: due, unpaused schedules, oldest tick first.
CREATE INDEX schedules_due ON {schema}.schedules (next_tick_at)
    WHERE paused_at IS NULL AND next_tick_at IS NOT NULL;

-- The tick a scheduled run was started for (`StepCx::tick`); NULL for runs
-- started otherwise.
ALTER TABLE {schema}.runs ADD COLUMN schedule_name text;
ALTER TABLE {schema}.runs ADD COLUMN tick_at timestamptz;
