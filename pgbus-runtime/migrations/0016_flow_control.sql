-- Flow control (issue 21): concurrency limits (per workflow, per key, per
-- queue) and rate limits (per workflow, per step, per key), enforced by the
-- claim, strictly and fleet-wide, without a row at its limit blocking the
-- rows behind it. The design, and why, is in docs/decisions.md, "Flow
-- control (issue 21)".
--
-- Limit keys: one name per limit, written on rows and shown to operators.
-- Concurrency: `workflow:<workflow>`, `key:<workflow>:<key>`, `queue:<queue>`;
-- rates: `workflow:<workflow>`, `step:<workflow>/<step>`, `key:<workflow>:<key>`.
-- One advisory lock per key name (`flow_lock_id`) serves a concurrency limit
-- and a rate of the same name.

-- The concurrency limits in force, written at worker registration: a
-- workflow's rows (`workflow:<W>`, and `key:<W>`, the per-key limit of every
-- `key:<W>:<k>`) are replaced by what the registering worker declares; a
-- queue's row (`queue:<Q>`, `workflow` NULL) is upserted by a worker that
-- declares it and left alone by one that does not. `holder`: what holds a
-- slot, an in-progress step or the whole run.
CREATE TABLE {schema}.flow_limits (
    key           text        PRIMARY KEY,
    workflow      text,
    max_in_flight integer     NOT NULL CHECK (max_in_flight BETWEEN 1 AND 100000),
    holder        text        NOT NULL DEFAULT 'step' CHECK (holder IN ('step', 'run')),
    updated_at    timestamptz NOT NULL
);
CREATE INDEX flow_limits_workflow ON {schema}.flow_limits (workflow)
    WHERE workflow IS NOT NULL;

-- The rate limits in force (`workflow:<W>`, `step:<W>/<s>`, `key:<W>`), with
-- the same registration rule as a workflow's concurrency limits: at most
-- `max_starts` step starts in any window of `period_ms`.
CREATE TABLE {schema}.rate_limits (
    key        text        PRIMARY KEY,
    workflow   text        NOT NULL,
    max_starts integer     NOT NULL CHECK (max_starts BETWEEN 1 AND 1000),
    period_ms  bigint      NOT NULL CHECK (period_ms BETWEEN 1 AND 86400000),
    updated_at timestamptz NOT NULL
);
CREATE INDEX rate_limits_workflow ON {schema}.rate_limits (workflow);

-- A sliding log per rate key: the start times of its last `max_starts` step
-- starts, oldest first. Exact in every window (a fixed window lets twice the
-- rate through across a boundary). Created by the first start; written only
-- under the key's advisory lock.
CREATE TABLE {schema}.rate_windows (
    key    text          PRIMARY KEY,
    starts timestamptz[] NOT NULL
);

-- A run's concurrency key (given at start, else derived from its input by
-- the workflow's key method), and the slots it holds as a run
-- (`slot = "run"`): taken by its first claimed step, given back when it
-- leaves `ready`/`performing` (finished, cancelled, paused).
ALTER TABLE {schema}.runs
    ADD COLUMN concurrency_key text,
    ADD COLUMN slot_held       boolean NOT NULL DEFAULT false,
    ADD COLUMN slot_workflow   text,
    ADD COLUMN slot_key        text;

-- The keys a step holds while `in_progress` (written by the claim; NULL for
-- a limit that does not apply), the concurrency key that holds a due row
-- back (`held_by`: the row is out of the due index until a slot of that key
-- is given back), and the rate key whose window a due row waits for
-- (`throttled_by`: its `scheduled_at` is the window's opening).
ALTER TABLE {schema}.steps
    ADD COLUMN slot_workflow text,
    ADD COLUMN slot_key      text,
    ADD COLUMN slot_queue    text,
    ADD COLUMN held_by       text,
    ADD COLUMN throttled_by  text;

-- The due index leaves held rows out: a key at its limit with any number of
-- due rows never stands in the claim's way. Every query over due rows says
-- `held_by IS NULL` to use it.
DROP INDEX {schema}.steps_due_or_waiting;
CREATE INDEX steps_due_or_waiting ON {schema}.steps (queue, priority, scheduled_at, id)
    WHERE status IN ('scheduled', 'waiting') AND held_by IS NULL;

-- Held rows per key, in claim order: what a release wakes.
CREATE INDEX steps_held ON {schema}.steps (held_by, priority, scheduled_at, id)
    WHERE held_by IS NOT NULL AND status IN ('scheduled', 'waiting');

-- The holders of each key, counted by every admission and release.
CREATE INDEX steps_slot_workflow ON {schema}.steps (slot_workflow)
    WHERE status = 'in_progress' AND slot_workflow IS NOT NULL;
CREATE INDEX steps_slot_key ON {schema}.steps (slot_key)
    WHERE status = 'in_progress' AND slot_key IS NOT NULL;
CREATE INDEX steps_slot_queue ON {schema}.steps (slot_queue)
    WHERE status = 'in_progress' AND slot_queue IS NOT NULL;
CREATE INDEX runs_slot_workflow ON {schema}.runs (slot_workflow) WHERE slot_held;
CREATE INDEX runs_slot_key ON {schema}.runs (slot_key) WHERE slot_held;

-- The advisory lock of a limit key: a hash of the schema and the key, so
-- schemas sharing a database never share a lock.
CREATE FUNCTION {schema}.flow_lock_id(key text) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $flow_lock_id$
    SELECT pg_catalog.hashtextextended('{schema}:' || key, 0)
$flow_lock_id$;

-- Whether any limit applies to what a worker claims: a concurrency limit of
-- one of its workflows (the keys of `registered`, the claim's JSON of what it
-- runs) or of one of its `queues`, or a rate of one of its workflows. What
-- every claim asks first (three index probes): without one, the claim is the
-- claim as before flow control. PL/pgSQL, so its plans are kept for the
-- session and the claim's own plan stays as small as it was; no `SET` clause
-- (a call of every claim: its names are schema-qualified, built-ins come
-- from `pg_catalog`, searched first).
CREATE FUNCTION {schema}.flow_applies(queues text[], registered jsonb) RETURNS boolean
LANGUAGE plpgsql STABLE
AS $flow_applies$
BEGIN
    RETURN EXISTS (SELECT 1 FROM {schema}.flow_limits f
                   WHERE f.workflow IN (SELECT jsonb_object_keys(registered)))
        OR EXISTS (SELECT 1 FROM {schema}.flow_limits f
                   WHERE f.key IN (SELECT 'queue:' || q.name FROM unnest(queues) AS q(name)))
        OR EXISTS (SELECT 1 FROM {schema}.rate_limits r
                   WHERE r.workflow IN (SELECT jsonb_object_keys(registered)));
END
$flow_applies$;

-- The slots of concurrency key `key` held now: the runs holding it, by a
-- step in progress or as a run (`slot = "run"`: from its first claimed step
-- until it finishes, is cancelled or pauses), each run once (a run's step in
-- progress and the run itself are one slot; a paused run's step still in
-- progress is one). Volatile, so its statement reads a snapshot of its own,
-- taken after the caller took the key's advisory lock; PL/pgSQL, not SQL, so
-- that statement's plan is kept for the session (a SQL function's would be
-- made again at every call).
CREATE FUNCTION {schema}.flow_in_flight(key text) RETURNS bigint
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $flow_in_flight$
DECLARE
    held bigint;
BEGIN
    CASE split_part(key, ':', 1)
        WHEN 'workflow' THEN
            SELECT count(*) INTO held FROM (
                SELECT s.run_id FROM {schema}.steps s
                WHERE s.status = 'in_progress' AND s.slot_workflow = key
                UNION
                SELECT r.id FROM {schema}.runs r
                WHERE r.slot_held AND r.slot_workflow = key) AS h;
        WHEN 'key' THEN
            SELECT count(*) INTO held FROM (
                SELECT s.run_id FROM {schema}.steps s
                WHERE s.status = 'in_progress' AND s.slot_key = key
                UNION
                SELECT r.id FROM {schema}.runs r
                WHERE r.slot_held AND r.slot_key = key) AS h;
        WHEN 'queue' THEN
            SELECT count(*) INTO held FROM {schema}.steps s
            WHERE s.status = 'in_progress' AND s.slot_queue = key;
        ELSE
            held := 0;
    END CASE;
    RETURN held;
END
$flow_in_flight$;

-- The admission of a claim's candidates, in claim order (the arrays, one
-- element per candidate: its step and run, workflow, step, queue, the run's
-- concurrency key and the slots the run holds as a run), until `wanted` are
-- admitted; the rest are not looked at. Per candidate, the limits that apply
-- (from `flow_limits` and `rate_limits`, read once); for each of their keys
-- `pg_try_advisory_xact_lock` (a key another transaction holds leaves the
-- candidate due and untouched: `locked`); under the locks, in a statement of
-- its own (a fresh snapshot), the key's slots held now (`flow_in_flight`)
-- plus those this call admitted. A candidate under every limit is
-- `admitted`, with the keys it holds; one at a concurrency limit is `held`
-- (`held_by`, out of the due index); one outside a rate window is
-- `throttled` (`scheduled_at` = the moment the window lets it start,
-- `throttled_by`; its attempt unchanged). Nothing is counted from an older
-- snapshot, so two claims never both take a key's last slot: the second
-- fails the try-lock or counts the first's committed row. It never waits:
-- try-locks only, and the rows it writes are the caller's locked candidates
-- and the rate logs of keys it holds. Under `READ COMMITTED` only (each
-- statement's snapshot is what makes the counts fresh): refused otherwise.
CREATE FUNCTION {schema}.flow_admit(
    ids bigint[], run_ids bigint[], workflows text[], step_names text[], queues text[],
    run_keys text[], run_workflow_slots text[], run_key_slots text[],
    wanted bigint, claim_at timestamptz)
RETURNS TABLE (step_id bigint, run_id bigint, of_workflow text, verdict text,
               limit_key text, slot_workflow text, slot_key text, slot_queue text,
               run_workflow text, run_key text)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $flow_admit$
DECLARE
    n integer := coalesce(cardinality(ids), 0);
    admitted bigint := 0;
    -- The limits in force for these candidates.
    f_keys text[]; f_max integer[]; f_run boolean[];
    r_keys text[]; r_max integer[]; r_period bigint[];
    -- The keys met so far: advisory locks tried, slots counted, rate windows.
    l_keys text[] := '{}'; l_ok boolean[] := '{}';
    c_keys text[] := '{}'; c_count bigint[] := '{}';
    w_keys text[] := '{}'; w_count bigint[] := '{}'; w_oldest timestamptz[] := '{}';
    w_added integer[] := '{}'; w_max integer[] := '{}';
    -- What is written at the end.
    h_ids bigint[] := '{}'; h_by text[] := '{}';
    t_ids bigint[] := '{}'; t_by text[] := '{}'; t_at timestamptz[] := '{}';
    -- One candidate's limits: concurrency keys, their limits, and whether a
    -- run holds each; rate keys, their counts and periods.
    ck text[]; cmax integer[]; crun boolean[];
    rk text[]; rmax integer[]; rper bigint[];
    wf text; k text; p integer; i integer; j integer; ok boolean;
    blocked text; opening timestamptz; opened_by text; held bigint;
    cnt bigint; oldest timestamptz;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'pgbus flow control admits steps under READ COMMITTED only (the transaction is %)',
            current_setting('transaction_isolation');
    END IF;
    SELECT coalesce(array_agg(f.key), '{}'), coalesce(array_agg(f.max_in_flight), '{}'),
           coalesce(array_agg(f.holder = 'run'), '{}')
    INTO f_keys, f_max, f_run
    FROM {schema}.flow_limits f
    WHERE f.workflow = ANY (workflows)
       OR f.key = ANY (ARRAY(SELECT 'queue:' || q FROM unnest(queues) AS q));
    SELECT coalesce(array_agg(r.key), '{}'), coalesce(array_agg(r.max_starts), '{}'),
           coalesce(array_agg(r.period_ms), '{}')
    INTO r_keys, r_max, r_period
    FROM {schema}.rate_limits r
    WHERE r.workflow = ANY (workflows);

    FOR i IN 1 .. n LOOP
        EXIT WHEN admitted >= wanted;
        wf := workflows[i];
        step_id := ids[i]; run_id := run_ids[i]; of_workflow := wf; limit_key := NULL;
        slot_workflow := NULL; slot_key := NULL; slot_queue := NULL;
        run_workflow := NULL; run_key := NULL;

        -- The limits that apply, concurrency keys in lock order: workflow,
        -- key, queue.
        ck := '{}'; cmax := '{}'; crun := '{}'; rk := '{}'; rmax := '{}'; rper := '{}';
        p := array_position(f_keys, 'workflow:' || wf);
        IF p IS NOT NULL THEN
            ck := ck || ('workflow:' || wf); cmax := cmax || f_max[p]; crun := crun || f_run[p];
        END IF;
        IF run_keys[i] IS NOT NULL THEN
            p := array_position(f_keys, 'key:' || wf);
            IF p IS NOT NULL THEN
                ck := ck || ('key:' || wf || ':' || run_keys[i]);
                cmax := cmax || f_max[p]; crun := crun || f_run[p];
            END IF;
        END IF;
        p := array_position(f_keys, 'queue:' || queues[i]);
        IF p IS NOT NULL THEN
            ck := ck || ('queue:' || queues[i]); cmax := cmax || f_max[p]; crun := crun || false;
        END IF;
        p := array_position(r_keys, 'workflow:' || wf);
        IF p IS NOT NULL THEN
            rk := rk || ('workflow:' || wf); rmax := rmax || r_max[p]; rper := rper || r_period[p];
        END IF;
        p := array_position(r_keys, 'step:' || wf || '/' || step_names[i]);
        IF p IS NOT NULL THEN
            rk := rk || ('step:' || wf || '/' || step_names[i]);
            rmax := rmax || r_max[p]; rper := rper || r_period[p];
        END IF;
        IF run_keys[i] IS NOT NULL THEN
            p := array_position(r_keys, 'key:' || wf);
            IF p IS NOT NULL THEN
                rk := rk || ('key:' || wf || ':' || run_keys[i]);
                rmax := rmax || r_max[p]; rper := rper || r_period[p];
            END IF;
        END IF;

        IF cardinality(ck) = 0 AND cardinality(rk) = 0 THEN
            admitted := admitted + 1;
            verdict := 'admitted';
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Every key under this transaction's lock, or the candidate waits.
        ok := true;
        FOREACH k IN ARRAY ck || rk LOOP
            p := array_position(l_keys, k);
            IF p IS NULL THEN
                l_keys := l_keys || k;
                l_ok := l_ok || pg_try_advisory_xact_lock({schema}.flow_lock_id(k));
                p := cardinality(l_keys);
            END IF;
            IF NOT l_ok[p] THEN
                ok := false;
                EXIT;
            END IF;
        END LOOP;
        IF NOT ok THEN
            verdict := 'locked';
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Concurrency: a key the run holds as a run is its own, whatever
        -- the holder now (a deploy may have turned `run` into `step` while
        -- the run held it: counted, it would hold the run back behind
        -- itself for good).
        blocked := NULL;
        FOR j IN 1 .. cardinality(ck) LOOP
            k := ck[j];
            CONTINUE WHEN k IN (run_workflow_slots[i], run_key_slots[i]);
            p := array_position(c_keys, k);
            IF p IS NULL THEN
                -- A statement of its own: a snapshot taken under the lock.
                SELECT {schema}.flow_in_flight(k) INTO held;
                c_keys := c_keys || k; c_count := c_count || held;
                p := cardinality(c_keys);
            END IF;
            IF c_count[p] >= cmax[j] THEN
                blocked := k;
                EXIT;
            END IF;
        END LOOP;
        IF blocked IS NOT NULL THEN
            h_ids := h_ids || ids[i]; h_by := h_by || blocked;
            verdict := 'held'; limit_key := blocked;
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Rates: the starts of each window since `at - period`.
        opening := NULL; opened_by := NULL;
        FOR j IN 1 .. cardinality(rk) LOOP
            k := rk[j];
            p := array_position(w_keys, k);
            IF p IS NULL THEN
                -- `oldest`: the start whose leaving opens the window, the
                -- `count - max + 1`-th oldest inside it (the oldest, but
                -- for a log longer than a count lowered at registration).
                SELECT count(*), (array_agg(s.t ORDER BY s.t))[greatest(count(*) - rmax[j] + 1, 1)]
                INTO cnt, oldest
                FROM {schema}.rate_windows w
                CROSS JOIN LATERAL unnest(w.starts) AS s(t)
                WHERE w.key = k AND s.t > claim_at - rper[j] * interval '1 millisecond';
                w_keys := w_keys || k; w_count := w_count || cnt; w_oldest := w_oldest || oldest;
                w_added := w_added || 0; w_max := w_max || rmax[j];
                p := cardinality(w_keys);
            END IF;
            IF w_count[p] >= rmax[j]
               AND (opening IS NULL
                    OR w_oldest[p] + rper[j] * interval '1 millisecond' > opening) THEN
                opening := w_oldest[p] + rper[j] * interval '1 millisecond';
                opened_by := k;
            END IF;
        END LOOP;
        IF opening IS NOT NULL THEN
            t_ids := t_ids || ids[i]; t_by := t_by || opened_by; t_at := t_at || opening;
            verdict := 'throttled'; limit_key := opened_by;
            RETURN NEXT;
            CONTINUE;
        END IF;

        -- Admitted: it takes a slot of each key (a run's own slot it has),
        -- and a start in each window.
        FOR j IN 1 .. cardinality(ck) LOOP
            k := ck[j];
            CASE split_part(k, ':', 1)
                WHEN 'workflow' THEN slot_workflow := k;
                WHEN 'key' THEN slot_key := k;
                ELSE slot_queue := k;
            END CASE;
            IF crun[j] THEN
                IF split_part(k, ':', 1) = 'workflow' THEN run_workflow := k; ELSE run_key := k; END IF;
            END IF;
            CONTINUE WHEN k IN (run_workflow_slots[i], run_key_slots[i]);
            p := array_position(c_keys, k);
            c_count[p] := c_count[p] + 1;
        END LOOP;
        FOR j IN 1 .. cardinality(rk) LOOP
            p := array_position(w_keys, rk[j]);
            w_count[p] := w_count[p] + 1;
            w_added[p] := w_added[p] + 1;
            w_oldest[p] := least(coalesce(w_oldest[p], claim_at), claim_at);
        END LOOP;
        admitted := admitted + 1;
        verdict := 'admitted';
        RETURN NEXT;
    END LOOP;

    UPDATE {schema}.steps s
    SET held_by = h.lk
    FROM unnest(h_ids, h_by) AS h(id, lk)
    WHERE s.id = h.id;
    UPDATE {schema}.steps s
    SET scheduled_at = x.t, throttled_by = x.lk
    FROM unnest(t_ids, t_by, t_at) AS x(id, lk, t)
    WHERE s.id = x.id;
    -- Each window keeps its last `max_starts` starts.
    FOR j IN 1 .. cardinality(w_keys) LOOP
        CONTINUE WHEN w_added[j] = 0;
        INSERT INTO {schema}.rate_windows AS w (key, starts)
        VALUES (w_keys[j], array_fill(claim_at, ARRAY[least(w_added[j], w_max[j])]))
        ON CONFLICT (key) DO UPDATE
        SET starts = ARRAY(SELECT x.t FROM (
                               SELECT s.t FROM unnest(w.starts || excluded.starts) AS s(t)
                               ORDER BY s.t DESC
                               LIMIT w_max[j]) AS x
                           ORDER BY x.t);
    END LOOP;
    RETURN;
END
$flow_admit$;

-- A slot of each of `keys` (a step's or a run's: workflow, key, queue, in
-- that order; NULLs skipped) was given back by a run of `of_workflow`: under
-- each key's advisory lock (blocking, but it waits only for a claim holding
-- the key, which never waits, or another release), as many held rows of
-- ready runs as the key has free slots are woken, oldest first (priority,
-- due time, id), and the workers of their queues notified on `channel`. A
-- claim that held a row back committed before this looks (it held the lock),
-- so no wakeup is lost. A key without a limit any more wakes its held rows
-- (at most 10,000 per release).
CREATE FUNCTION {schema}.flow_release(of_workflow text, keys text[], channel text)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $flow_release$
DECLARE
    k text; lim integer; free bigint; notified bigint;
BEGIN
    FOREACH k IN ARRAY keys LOOP
        CONTINUE WHEN k IS NULL;
        PERFORM pg_advisory_xact_lock({schema}.flow_lock_id(k));
        SELECT f.max_in_flight INTO lim
        FROM {schema}.flow_limits f
        WHERE f.key = CASE WHEN split_part(k, ':', 1) = 'key' THEN 'key:' || of_workflow ELSE k END;
        IF lim IS NULL THEN
            free := 10000;
        ELSE
            SELECT lim - {schema}.flow_in_flight(k) INTO free;
        END IF;
        CONTINUE WHEN free <= 0;
        WITH woken AS (
            UPDATE {schema}.steps s
            SET held_by = NULL
            FROM (SELECT h.id FROM {schema}.steps h
                  WHERE h.held_by = k AND h.status IN ('scheduled', 'waiting')
                    AND (SELECT r.status FROM {schema}.runs r WHERE r.id = h.run_id) = 'ready'
                  ORDER BY h.priority, h.scheduled_at, h.id
                  LIMIT free
                  FOR UPDATE OF h) AS w
            WHERE s.id = w.id
            RETURNING s.queue
        )
        SELECT count(pg_notify(channel, q.queue)) INTO notified
        FROM (SELECT DISTINCT woken.queue FROM woken) AS q;
    END LOOP;
END
$flow_release$;

-- A step leaving `in_progress` gives back the slots it held: every path,
-- an outcome, a park for a signal or a batch, the sweep, a cancel.
CREATE FUNCTION {schema}.flow_step_released() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $flow_step_released$
BEGIN
    PERFORM {schema}.flow_release(OLD.workflow,
                                  ARRAY[OLD.slot_workflow, OLD.slot_key, OLD.slot_queue],
                                  'pgbus_' || TG_TABLE_SCHEMA);
    RETURN NULL;
END
$flow_step_released$;

CREATE TRIGGER steps_slot_released
    AFTER UPDATE OF status ON {schema}.steps
    FOR EACH ROW
    WHEN (OLD.status = 'in_progress' AND NEW.status <> 'in_progress'
          AND (OLD.slot_workflow IS NOT NULL OR OLD.slot_key IS NOT NULL
               OR OLD.slot_queue IS NOT NULL))
    EXECUTE FUNCTION {schema}.flow_step_released();

-- A held or throttled row that changes status (woken by a signal or its
-- batch, cancelled, skipped, paused by the grace rule) is no longer held or
-- throttled: a row back in the queue is decided again by the next claim,
-- which is always safe (the claim alone admits).
CREATE FUNCTION {schema}.flow_step_moved() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $flow_step_moved$
BEGIN
    NEW.held_by := NULL;
    NEW.throttled_by := NULL;
    RETURN NEW;
END
$flow_step_moved$;

CREATE TRIGGER steps_flow_moved
    BEFORE UPDATE OF status ON {schema}.steps
    FOR EACH ROW
    WHEN (NEW.status IS DISTINCT FROM OLD.status
          AND (NEW.held_by IS NOT NULL OR NEW.throttled_by IS NOT NULL))
    EXECUTE FUNCTION {schema}.flow_step_moved();

-- A run leaving `ready`/`performing` (finished, cancelled, paused) gives
-- back the slots it held as a run; a paused run takes one again when resumed
-- and claimed.
CREATE FUNCTION {schema}.flow_run_slot_dropped() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $flow_run_slot_dropped$
BEGIN
    NEW.slot_held := false;
    NEW.slot_workflow := NULL;
    NEW.slot_key := NULL;
    RETURN NEW;
END
$flow_run_slot_dropped$;

CREATE TRIGGER runs_slot_dropped
    BEFORE UPDATE OF status ON {schema}.runs
    FOR EACH ROW
    WHEN (NEW.slot_held AND NEW.status NOT IN ('ready', 'performing'))
    EXECUTE FUNCTION {schema}.flow_run_slot_dropped();

-- After a run's change: the slots it gave back as a run are released, and a
-- run resumed from a pause has its held rows cleared (its next claim decides
-- again, and a release while it was paused passed them over). A run that
-- leaves `ready` between steps (cancelled, paused, finished by a skip) may
-- have a row a release let go for a free slot and no claim took: that slot
-- is still free, so its keys (the workflow's, the run's key's, its steps'
-- queues') are released again, those with held rows only; otherwise the
-- next held row would wait with the slot free and nothing in progress left
-- to release it.
CREATE FUNCTION {schema}.flow_run_changed() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $flow_run_changed$
DECLARE
    notified bigint;
    keys text[];
BEGIN
    IF OLD.slot_held AND NOT NEW.slot_held THEN
        PERFORM {schema}.flow_release(OLD.workflow, ARRAY[OLD.slot_workflow, OLD.slot_key],
                                      'pgbus_' || TG_TABLE_SCHEMA);
    END IF;
    IF OLD.status = 'ready' AND NEW.status NOT IN ('ready', 'performing') THEN
        -- In lock order: workflow, key, queues.
        SELECT coalesce(array_agg(c.k ORDER BY c.o, c.k), '{}') INTO keys
        FROM (SELECT 1 AS o, 'workflow:' || OLD.workflow AS k
              UNION ALL
              SELECT 2, 'key:' || OLD.workflow || ':' || OLD.concurrency_key
              WHERE OLD.concurrency_key IS NOT NULL
              UNION
              SELECT 3, 'queue:' || s.queue FROM {schema}.steps s WHERE s.run_id = OLD.id) AS c
        WHERE EXISTS (SELECT 1 FROM {schema}.steps h
                      WHERE h.held_by = c.k AND h.status IN ('scheduled', 'waiting'));
        IF cardinality(keys) > 0 THEN
            PERFORM {schema}.flow_release(OLD.workflow, keys, 'pgbus_' || TG_TABLE_SCHEMA);
        END IF;
    END IF;
    IF OLD.status = 'paused' AND NEW.status IN ('ready', 'performing') THEN
        WITH cleared AS (
            UPDATE {schema}.steps s
            SET held_by = NULL
            WHERE s.run_id = NEW.id AND s.held_by IS NOT NULL
              AND s.status IN ('scheduled', 'waiting')
            RETURNING s.queue
        )
        SELECT count(pg_notify('pgbus_' || TG_TABLE_SCHEMA, q.queue)) INTO notified
        FROM (SELECT DISTINCT cleared.queue FROM cleared) AS q;
    END IF;
    RETURN NULL;
END
$flow_run_changed$;

CREATE TRIGGER runs_flow_changed
    AFTER UPDATE ON {schema}.runs
    FOR EACH ROW
    WHEN ((OLD.slot_held AND NOT NEW.slot_held)
          OR (OLD.status = 'paused' AND NEW.status IN ('ready', 'performing'))
          OR (OLD.status = 'ready' AND NEW.status NOT IN ('ready', 'performing')))
    EXECUTE FUNCTION {schema}.flow_run_changed();
