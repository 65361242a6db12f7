-- Starting runs from SQL (issue 19): `{schema}.start_run(workflow, input,
-- idempotency_key, start_at)`, so psql, another language's driver or a
-- trigger can start a run of a registered workflow in its own transaction.
--
-- A start writes more than `definitions.step_plan` holds (each step's
-- priority, timeout and wait; the options digest), and those are options, not
-- part of the definition digest: two builds with one digest may place steps
-- differently. So the registry also keeps, once per options digest, the step
-- plan a run of that build records at start (`runs.step_plan`: a JSON array,
-- in order, of the live steps as {"name", "queue", "priority", "timeout_ms",
-- "wait_ms", "wait_for"}, `wait_for` left out when the step waits for no
-- signal), and each worker's link names the build it runs. Written by
-- register_worker.sql with the rest of the registry; never changed once
-- stored. Workers of a version before this migration write no row here and
-- leave their links' `options_digest` NULL.
CREATE TABLE {schema}.definition_starts (
    options_digest text PRIMARY KEY,
    digest         text        NOT NULL,
    workflow       text        NOT NULL,
    step_plan      jsonb       NOT NULL,
    created_at     timestamptz NOT NULL,
    FOREIGN KEY (workflow, digest) REFERENCES {schema}.definitions (workflow, digest)
);
CREATE INDEX definition_starts_workflow ON {schema}.definition_starts (workflow, created_at);
-- A checked signal reads every registered definition of the run's workflow
-- through the definitions' primary key (workflow, digest).

ALTER TABLE {schema}.worker_definitions
    ADD COLUMN options_digest text REFERENCES {schema}.definition_starts (options_digest);

-- Starts a run of `workflow` with `input` as `Client::start` does (the same
-- run row, first step row and `started` event, actor `client`, and the same
-- NOTIFY to the workers, delivered at commit), in the caller's transaction:
-- the run exists exactly when that transaction commits. Returns the run's id.
--
-- The definition is the registry's: the build run by the live worker (its
-- heartbeat within 30 seconds, the default lost-worker threshold) that started
-- last, else, with no such worker, the build of the workflow registered last.
-- The first step is due at `start_at` (default now, `clock_timestamp()`) plus
-- that step's `wait`; a `start_at` in the past makes it due at once.
-- `idempotency_key` as `Client::start_idempotent`: keys are per workflow, and
-- a key a committed run holds returns that run's id and starts nothing.
--
-- Errors (SQLSTATE, message starting `pgbus start_run:`):
--   22004 null_value_not_allowed           workflow or input is NULL (a JSON
--                                          `null` input is 'null'::jsonb)
--   22023 invalid_parameter_value          a blank key, a key over 255
--                                          characters or with control
--                                          characters, a start_at of
--                                          +-infinity or more than 36500
--                                          days ahead
--   54000 program_limit_exceeded           input over 1 MiB of JSON (compact)
--                                          or nested over 100 levels
--   42704 undefined_object                 no worker registered the workflow
--                                          (DETAIL lists those registered)
--   55000 object_not_in_prerequisite_state only workers of a version before
--                                          this function registered it, or
--                                          its definition has no step to run
--   40001 serialization_failure            the key's run was committed after
--                                          a REPEATABLE READ transaction's
--                                          snapshot (the message may be
--                                          Postgres's own, from the insert):
--                                          retry the transaction
CREATE FUNCTION {schema}.start_run(
    workflow text,
    input jsonb,
    idempotency_key text DEFAULT NULL,
    start_at timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $start_run$
#variable_conflict use_column
DECLARE
    max_bytes constant bigint := 1048576;
    started   timestamptz := clock_timestamp();
    chosen    {schema}.definition_starts%ROWTYPE;
    first     jsonb;
    names     text[];
    json_text text;
    stripped  text;
    compact   bigint;
    known     text[];
    new_run   bigint;
BEGIN
    IF start_run.workflow IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'pgbus start_run: workflow is NULL',
            HINT = 'Name a workflow a worker registered (`pgbus workers` lists them).';
    END IF;
    IF start_run.input IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'null_value_not_allowed',
            MESSAGE = 'pgbus start_run: input is NULL',
            HINT = 'Pass the input as jsonb; a workflow whose input is () takes ''null''::jsonb.';
    END IF;
    -- The checks of Client::start_idempotent (check_key): Rust's whitespace
    -- (Unicode White_Space) and control characters (category Cc).
    IF start_run.idempotency_key IS NOT NULL THEN
        IF start_run.idempotency_key
           ~ '^[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'pgbus start_run: an idempotency key cannot be empty or blank',
                HINT = 'Pass NULL for a start without a key.';
        END IF;
        IF char_length(start_run.idempotency_key) > 255
           OR start_run.idempotency_key ~ '[\u0001-\u001f\u007f-\u009f]' THEN
            RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
                MESSAGE = 'pgbus start_run: an idempotency key must be at most 255 characters of visible text';
        END IF;
    END IF;
    IF start_run.start_at IS NOT NULL AND NOT isfinite(start_run.start_at) THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('pgbus start_run: start_at must be a finite time, not %s', start_run.start_at);
    END IF;
    -- As far ahead as a wait may reach (MAX_DURATION_MS, 36,500 days): a
    -- later time is one the clients' reads could not represent.
    IF start_run.start_at > started + interval '36500 days' THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = 'pgbus start_run: start_at must be at most 36500 days ahead';
    END IF;
    -- The rule of Limits::check_input with the default limits: at most 100
    -- levels of arrays and objects (a container at level 100 is the 101st),
    -- at most 1 MiB as compact JSON. `jsonb::text` puts a space after each
    -- `,` and `:` between values; with string literals taken out, the spaces
    -- left are those. (Each such space follows a separator and precedes a
    -- value, so the text is at most 1.5 times the compact size: longer text
    -- is over the limit without counting.)
    IF jsonb_path_exists(start_run.input,
                         'strict $.**{100} ? (@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded',
            MESSAGE = 'pgbus start_run: invalid input: an input is at most 100 levels of arrays and objects deep';
    END IF;
    json_text := start_run.input::text;
    IF octet_length(json_text) > max_bytes THEN
        compact := octet_length(json_text);
        IF compact <= max_bytes * 3 / 2 THEN
            stripped := regexp_replace(json_text, '"(?:[^"\\]|\\.)*"', '""', 'g');
            compact := compact - (length(stripped) - length(replace(stripped, ' ', '')));
        END IF;
        IF compact > max_bytes THEN
            RAISE EXCEPTION USING ERRCODE = 'program_limit_exceeded',
                MESSAGE = 'pgbus start_run: invalid input: an input is at most 1 MiB of JSON';
        END IF;
    END IF;

    SELECT ds.* INTO chosen
    FROM {schema}.worker_definitions wd
    JOIN {schema}.workers w ON w.id = wd.worker_id
    JOIN {schema}.definition_starts ds
      ON ds.options_digest = wd.options_digest AND ds.workflow = wd.workflow
    WHERE wd.workflow = start_run.workflow
      AND w.heartbeat_at >= started - interval '30 seconds'
    ORDER BY w.started_at DESC, w.id DESC
    LIMIT 1;
    IF NOT FOUND THEN
        SELECT ds.* INTO chosen
        FROM {schema}.definition_starts ds
        WHERE ds.workflow = start_run.workflow
        ORDER BY ds.created_at DESC, ds.options_digest DESC
        LIMIT 1;
    END IF;
    IF NOT FOUND THEN
        IF EXISTS (SELECT 1 FROM {schema}.definitions d WHERE d.workflow = start_run.workflow) THEN
            RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('pgbus start_run: workflow %L was registered only by workers of a pgbus '
                                 'version that does not record what a start writes', start_run.workflow),
                HINT = 'Start one worker of this version that registers it; its registration records it.';
        END IF;
        SELECT array_agg(k.workflow ORDER BY k.workflow) INTO known
        FROM (SELECT DISTINCT ds.workflow FROM {schema}.definition_starts ds
              ORDER BY ds.workflow LIMIT 21) k;
        RAISE EXCEPTION USING ERRCODE = 'undefined_object',
            MESSAGE = format('pgbus start_run: no worker registered workflow %L', start_run.workflow),
            DETAIL = CASE
                WHEN known IS NULL THEN 'No workflow is registered yet.'
                ELSE 'Registered workflows: '
                     || (SELECT string_agg(format('%L', k), ', ') FROM unnest(known[1:20]) k)
                     || CASE WHEN cardinality(known) > 20 THEN ', ...' ELSE '' END
                     || '.'
            END,
            HINT = 'A worker registers the workflows it runs when it starts '
                   '(WorkerBuilder::register); check the name, or start such a worker once.';
    END IF;

    first := chosen.step_plan -> 0;
    IF first IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('pgbus start_run: workflow %L has no step to run', start_run.workflow);
    END IF;
    names := ARRAY(SELECT e.step->>'name'
                   FROM jsonb_array_elements(chosen.step_plan) WITH ORDINALITY AS e (step, n)
                   ORDER BY e.n);

    INSERT INTO {schema}.runs AS r (workflow, definition_digest, options_digest, status,
                                    current_step, input, idempotency_key, step_names,
                                    step_plan, created_at, updated_at)
    VALUES (chosen.workflow, chosen.digest, chosen.options_digest, 'ready', first->>'name',
            start_run.input, start_run.idempotency_key, names, chosen.step_plan, started, started)
    ON CONFLICT (workflow, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING r.id INTO new_run;
    IF new_run IS NULL THEN
        -- The key was taken: the insert waited for the transaction that took
        -- it, so its run is committed, and visible unless this transaction's
        -- snapshot is older (or retention deleted it since).
        SELECT r.id INTO new_run
        FROM {schema}.runs r
        WHERE r.workflow = start_run.workflow AND r.idempotency_key = start_run.idempotency_key;
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'serialization_failure',
                MESSAGE = format('pgbus start_run: a run of %L with this idempotency key was committed '
                                 'after this transaction''s snapshot was taken, so this transaction '
                                 'cannot see it', start_run.workflow),
                HINT = 'Roll back and retry the transaction.';
        END IF;
        RETURN new_run;
    END IF;

    INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue, priority,
                                timeout_ms, scheduled_at, created_at)
    VALUES (new_run, chosen.workflow, first->>'name', 1, 'scheduled', first->>'queue',
            (first->>'priority')::smallint, (first->>'timeout_ms')::bigint,
            coalesce(start_run.start_at, started)
                + (first->>'wait_ms')::bigint * interval '1 millisecond',
            started);
    INSERT INTO {schema}.events (run_id, event, actor, created_at)
    VALUES (new_run, 'started', 'client', started);
    -- The workers' channel, `pgbus_<schema>` (Schema::channel): the quoted
    -- name this migration was rendered with, unquoted.
    PERFORM pg_notify('pgbus_' || btrim('{schema}', '"'), first->>'queue');
    RETURN new_run;
END
$start_run$;

COMMENT ON FUNCTION {schema}.start_run(text, jsonb, text, timestamptz) IS
    'Starts a run of a registered workflow in the caller''s transaction, as Client::start does; '
    'returns its id. start_run(workflow, input jsonb, idempotency_key DEFAULT NULL, '
    'start_at DEFAULT NULL). See the migration 0012_sql_start.sql and pgbus-runtime''s README.';
