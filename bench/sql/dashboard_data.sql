-- The dashboard benchmark's data (issue 23): `{runs}` runs in a migrated pgbus
-- schema, about five step rows a run, with their events, signals, fan-out
-- batches, and the workers, definitions and schedules the other pages list.
--
-- `{schema}` is the quoted schema name and `{runs}` the number of runs (a
-- positive integer), both spliced in by bench/src/dashboard/data.rs, which
-- runs the parts below (each begins with a line `-- @ name`) in order on one
-- connection: the temporary tables of the first parts live in its session.
-- Every row is what the engine writes (the same columns, statuses, outcomes
-- and event kinds, within every CHECK of the migrations); nothing here is
-- random: each choice is a hash of the run's id, so the same `{runs}` gives
-- the same data.
--
-- The shape, for 1,000,000 runs:
-- * ids in creation order, created over 30 days up to 30 seconds before the
--   load, evenly (about 1,400 in the last hour);
-- * every 500 ids, a fan-out parent (`billing.invoice_month`) whose batch
--   (id = the parent's id) has the 20 to 180 child runs
--   (`billing.invoice`) right after it, created together 1.5 s after the
--   parent; batches of parents under an hour old are open, their children
--   part finished, part running, part due;
-- * every 50,000 ids (and in the first block at any size), a long run
--   (`sync.catalog`) whose polling step was reattempted up to 2,000 times;
-- * the rest, six plain workflows named by prefix (`onboarding.welcome`,
--   `onboarding.verify`, `onboarding.drip`, `billing.charge`,
--   `billing.refund`, `reports.daily`); older than two minutes they are
--   mostly finished, 1.5% paused on a failed step, 3% cancelled, 5% of
--   those that wait for a signal still waiting for it, and under an hour
--   some ready with a reattempt due later; younger, ready or performing;
-- * 8% of steps take one failed attempt before the one that completes and
--   3% two (`failed`, outcome `reattempted`, with an error);
-- * idempotency keys on every `billing.*` plain run and half the
--   `onboarding.verify` ones; `reports.daily` runs name their schedule.

-- @ workflows
-- The temporary tables' estimates are guesses until analyzed, and a guessed
-- cost over JIT's threshold spends seconds compiling a statement that takes
-- milliseconds; this session needs no JIT.
SET jit = off;
CREATE TEMP TABLE clock AS
SELECT {runs}::bigint AS n,
       date_trunc('second', now()) - interval '30 seconds' AS t_end,
       interval '30 days' AS span,
       -- The long runs' polling attempts: 2,000 at a million runs, fewer below.
       least(2000, greatest(50, {runs}::bigint / 500))::int AS long_attempts;

-- A draw in [0, 1) from `x` and a seed: a hash, so the same every time.
CREATE FUNCTION pg_temp.u(x bigint, seed bigint) RETURNS float8
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT ((hashint8extended(x, seed) & 2147483647) % 1000000) / 1000000.0::float8 $$;

-- The workflows. `kind`: plain, parent (fans out at `fan_out_at`), child (of
-- a parent's batch), long. Plain runs pick one by the draw's per-mille in
-- [lo, hi).
CREATE TEMP TABLE wf (
    name       text PRIMARY KEY,
    kind       text NOT NULL,
    steps      text[] NOT NULL,
    queue      text NOT NULL,
    wait_at    int,
    wait_for   text,
    fan_out_at int,
    lo         int,
    hi         int
);
INSERT INTO wf VALUES
    ('onboarding.welcome', 'plain', '{create_account,send_welcome,wait_for_click,tag_user}',
     'onboarding', 3, 'email.clicked', NULL, 0, 220),
    ('onboarding.verify', 'plain', '{send_code,await_code,mark_verified}',
     'onboarding', 2, 'code.entered', NULL, 220, 370),
    ('onboarding.drip', 'plain', '{day_1,day_3,day_7,day_14,day_30,unsubscribe_check}',
     'email', NULL, NULL, NULL, 370, 450),
    ('billing.charge', 'plain', '{reserve,charge_card,send_receipt,post_ledger,notify}',
     'billing', NULL, NULL, NULL, 450, 750),
    ('billing.refund', 'plain', '{check_refund,refund_card,notify}',
     'billing', NULL, NULL, NULL, 750, 820),
    ('reports.daily', 'plain', '{gather,aggregate,render,upload,announce,archive,cleanup}',
     'reports', NULL, NULL, NULL, 820, 1000),
    ('billing.invoice_month', 'parent', '{collect_accounts,invoice_all,summarize}',
     'billing', NULL, NULL, 2, NULL, NULL),
    ('billing.invoice', 'child', '{render_pdf,deliver,confirm}',
     'billing', NULL, NULL, NULL, NULL, NULL),
    ('sync.catalog', 'long', '{list_pages,poll_import,publish}',
     'sync', NULL, NULL, NULL, NULL, NULL);

-- What the registry and each run record of a workflow: its digests, the
-- definition's step plan (`definitions.step_plan`) and the plan a start
-- records (`runs.step_plan`).
CREATE TEMP TABLE wf_plan AS
SELECT w.name,
       encode(sha256(convert_to('definition:' || w.name, 'UTF8')), 'hex') AS digest,
       encode(sha256(convert_to('options:' || w.name, 'UTF8')), 'hex') AS options_digest,
       (SELECT jsonb_agg(jsonb_build_object(
                   'name', s.name,
                   'kind', CASE WHEN s.i = w.fan_out_at THEN 'fan_out' ELSE 'step' END,
                   'queue', w.queue,
                   'wait_for', CASE WHEN s.i = w.wait_at THEN w.wait_for END) ORDER BY s.i)
        FROM unnest(w.steps) WITH ORDINALITY AS s(name, i)) AS definition_plan,
       (SELECT jsonb_agg(jsonb_strip_nulls(jsonb_build_object(
                   'name', s.name, 'queue', w.queue, 'priority', 0,
                   'wait_ms', 0,
                   'wait_for', CASE WHEN s.i = w.wait_at THEN w.wait_for END))
                   || '{"timeout_ms": null}'::jsonb ORDER BY s.i)
        FROM unnest(w.steps) WITH ORDINALITY AS s(name, i)) AS start_plan
FROM wf w;
ANALYZE clock;
ANALYZE wf;
ANALYZE wf_plan;

-- @ plan
-- One row per run: its workflow, where it stands (`state`), its current step
-- (`p`, 1-based), when it was created and how long it has run (`d`).
-- States: finished, paused (its step `p` failed for good), cancelled (by an
-- operator while `p` was due), parked (waiting at `p` for its signal or its
-- batch), retrying (`p` failed and its next attempt is due later), due (`p`
-- due now), running (`p` in progress).
CREATE TEMP TABLE plan AS
WITH slot AS (
    SELECT g AS id, (g - 1) % 500 AS o, (g - 1) / 500 AS block,
           20 + (hashint8extended((g - 1) / 500, 7) & 2147483647) % 161 AS fan
    FROM clock c, generate_series(1, c.n) AS g
), typed AS (
    SELECT s.id,
           CASE WHEN s.o = 0 THEN 'parent'
                WHEN s.o <= s.fan THEN 'child'
                WHEN s.o = 250 AND s.block % 100 = 0 THEN 'long'
                ELSE 'plain' END AS kind,
           s.id - s.o AS block_start, s.fan
    FROM slot s
), timed AS (
    SELECT t.*,
           c.t_end - c.span * ((c.n - t.block_start)::float8 / c.n)
               + CASE WHEN t.kind = 'child' THEN interval '1.5 seconds' ELSE interval '0' END
               + CASE WHEN t.kind IN ('plain', 'long')
                      THEN c.span * ((t.id - t.block_start)::float8 / c.n)
                      ELSE interval '0' END AS created_at,
           c.t_end
    FROM typed t CROSS JOIN clock c
), named AS (
    SELECT t.*,
           CASE t.kind
               WHEN 'parent' THEN 'billing.invoice_month'
               WHEN 'child' THEN 'billing.invoice'
               WHEN 'long' THEN 'sync.catalog'
               ELSE (SELECT w.name FROM wf w
                     WHERE w.kind = 'plain'
                       AND floor(pg_temp.u(t.id, 1) * 1000) >= w.lo
                       AND floor(pg_temp.u(t.id, 1) * 1000) < w.hi)
           END AS workflow,
           extract(epoch FROM t.t_end - t.created_at) AS age_s,
           extract(epoch FROM t.t_end - (t.created_at - CASE WHEN t.kind = 'child'
                                                             THEN interval '1.5 seconds'
                                                             ELSE interval '0' END)) AS parent_age_s,
           pg_temp.u(t.id, 2) AS u2
    FROM timed t
), stated AS (
    SELECT n.*, w.steps, w.wait_at, w.fan_out_at, cardinality(w.steps) AS nsteps,
           CASE
               WHEN n.kind = 'long' THEN 'finished'
               WHEN n.kind = 'parent' THEN
                   CASE WHEN n.age_s < 3600 THEN 'parked' ELSE 'finished' END
               WHEN n.kind = 'child' THEN
                   CASE WHEN n.parent_age_s >= 3600 OR n.u2 < 0.5 THEN 'finished'
                        WHEN n.u2 < 0.65 THEN 'running'
                        ELSE 'due' END
               WHEN n.age_s < 120 THEN
                   CASE WHEN n.u2 < 0.55 THEN 'due' WHEN n.u2 < 0.9 THEN 'running'
                        ELSE 'finished' END
               WHEN n.u2 < 0.015 THEN 'paused'
               WHEN n.u2 < 0.045 THEN 'cancelled'
               WHEN n.u2 < 0.095 AND w.wait_at IS NOT NULL THEN 'parked'
               WHEN n.age_s < 3600 AND n.u2 < 0.13 THEN 'retrying'
               ELSE 'finished'
           END AS state
    FROM named n JOIN wf w ON w.name = n.workflow
), placed AS (
    SELECT s.*,
           CASE
               WHEN s.state = 'finished' THEN s.nsteps
               WHEN s.state = 'parked' THEN coalesce(s.wait_at, s.fan_out_at)
               ELSE 1 + floor(pg_temp.u(s.id, 3) * s.nsteps)::int
           END AS p
    FROM stated s
)
SELECT p.id, p.kind, p.workflow, p.state, p.p, p.nsteps, p.wait_at, p.fan_out_at,
       p.block_start AS parent_id, p.created_at,
       -- How long the run has gone on: a few seconds a step (a long run: a
       -- second an attempt), plus up to two hours waiting for its signal when
       -- it got past the wait, never past 90% of its age.
       make_interval(secs => least(
           0.9 * p.age_s,
           CASE WHEN p.kind = 'long' THEN (c.long_attempts + 2) * 1.0
                ELSE p.p * (0.3 + 4.7 * pg_temp.u(p.id, 4))
                     + CASE WHEN p.wait_at < p.p OR (p.wait_at = p.p AND p.state = 'finished')
                            THEN 7200 * pg_temp.u(p.id, 6) ELSE 0 END
           END)) AS d
FROM placed p CROSS JOIN clock c;
CREATE UNIQUE INDEX ON plan (id);
ANALYZE plan;

-- @ runs
INSERT INTO {schema}.runs (id, workflow, definition_digest, options_digest, status, current_step,
                           input, idempotency_key, parent_batch_id, error_class, error_message,
                           created_at, updated_at, paused_at, cancelled_at, finished_at,
                           step_names, step_plan, schedule_name, tick_at)
OVERRIDING SYSTEM VALUE
SELECT r.id, r.workflow, wp.digest, wp.options_digest,
       CASE r.state
           WHEN 'finished' THEN 'finished' WHEN 'paused' THEN 'paused'
           WHEN 'cancelled' THEN 'cancelled' WHEN 'running' THEN 'performing'
           ELSE 'ready' END,
       w.steps[r.p],
       CASE
           WHEN r.workflow LIKE 'onboarding.%' THEN jsonb_build_object(
               'user_id', 100000 + r.id, 'email', 'user' || r.id || '@example.com',
               'locale', (ARRAY['en', 'de', 'fr', 'es'])[1 + r.id % 4], 'plan', 'pro')
           WHEN r.workflow IN ('billing.charge', 'billing.refund') THEN jsonb_build_object(
               'customer_id', 'cus_' || (r.id * 7919) % 200000,
               'amount_cents', 100 + (r.id * 31) % 50000, 'currency', 'EUR',
               'lines', jsonb_build_array(
                   jsonb_build_object('sku', 'plan-pro', 'qty', 1),
                   jsonb_build_object('sku', 'seats', 'qty', 1 + r.id % 40)))
           WHEN r.kind = 'parent' THEN jsonb_build_object(
               'month', to_char(r.created_at, 'YYYY-MM'), 'region', 'eu')
           WHEN r.kind = 'child' THEN jsonb_build_object(
               'account_id', 'acc_' || r.id, 'month', to_char(r.created_at, 'YYYY-MM'))
           WHEN r.kind = 'long' THEN jsonb_build_object('catalog', 'spring', 'pages', 5000)
           ELSE jsonb_build_object('day', to_char(r.created_at, 'YYYY-MM-DD'), 'region', 'eu')
       END,
       CASE
           WHEN r.kind = 'plain' AND r.workflow LIKE 'billing.%' THEN 'order-' || r.id
           WHEN r.workflow = 'onboarding.verify' AND r.id % 2 = 0 THEN 'signup-' || r.id
       END,
       CASE WHEN r.kind = 'child' THEN r.parent_id END,
       CASE WHEN r.state = 'paused' THEN 'PaymentDeclined' END,
       CASE WHEN r.state = 'paused' THEN 'the card was declined: insufficient funds' END,
       r.created_at, r.created_at + r.d,
       CASE WHEN r.state = 'paused' THEN r.created_at + r.d END,
       CASE WHEN r.state = 'cancelled' THEN r.created_at + r.d END,
       CASE WHEN r.state = 'finished' THEN r.created_at + r.d END,
       w.steps, wp.start_plan,
       CASE WHEN r.workflow = 'reports.daily' THEN 'reports.daily' END,
       CASE WHEN r.workflow = 'reports.daily' THEN date_trunc('minute', r.created_at) END
FROM plan r
JOIN wf w ON w.name = r.workflow
JOIN wf_plan wp ON wp.name = r.workflow
ORDER BY r.id;
SELECT setval(pg_get_serial_sequence('{schema}.runs', 'id'), (SELECT n FROM clock));

-- @ steps
-- Each run's attempts, step by step: `n` attempts of step `j`, the last
-- completing (or standing where the run's state says), the ones before it
-- failed and reattempted. Within the run's time `d`, each step has an equal
-- slot, shared by its attempts; an attempt is picked up 5% into its share
-- and ends at 80%.
INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, reattempts, status, outcome,
                            queue, priority, timeout_ms, scheduled_at, started_at, finished_at,
                            stall_at, waiting_since, waiting_for, worker_id, output, error_class,
                            error_message, error_causes, created_at)
SELECT r.id, r.workflow, w.steps[j], a, a - 1,
       CASE
           WHEN NOT x.open THEN CASE WHEN a < n.n THEN 'failed' ELSE 'completed' END
           WHEN r.state = 'paused' THEN 'failed'
           WHEN r.state = 'cancelled' THEN 'cancelled'
           WHEN r.state = 'parked' THEN 'waiting'
           WHEN r.state = 'running' THEN 'in_progress'
           ELSE 'scheduled'
       END,
       CASE
           WHEN NOT x.open THEN CASE WHEN a < n.n THEN 'reattempted' ELSE 'completed' END
           WHEN r.state = 'paused' THEN 'paused'
       END,
       w.queue, 0, NULL,
       CASE
           -- A wait without a timeout is due 36,500 days after it parked
           -- (park_step.sql).
           WHEN x.open AND r.state = 'parked' THEN t.at + t.share * 0.06 + interval '36500 days'
           WHEN x.open AND r.state = 'retrying' THEN c.t_end + make_interval(secs => 30 + 270 * pg_temp.u(r.id, 8))
           ELSE t.at
       END,
       CASE WHEN x.open AND r.state IN ('cancelled', 'retrying', 'due') THEN NULL ELSE t.at + t.share * 0.05 END,
       CASE WHEN NOT x.open OR r.state = 'paused' THEN t.at + t.share * 0.8 END,
       CASE WHEN x.open AND r.state = 'running' THEN t.at + t.share * 0.05 + interval '5 minutes' END,
       CASE WHEN (j = r.wait_at OR j = r.fan_out_at) AND (NOT x.open OR r.state = 'parked')
            THEN t.at + t.share * 0.06 END,
       CASE WHEN j = r.wait_at AND (NOT x.open OR r.state = 'parked') THEN w.wait_for END,
       CASE
           WHEN x.open AND r.state IN ('cancelled', 'retrying', 'due', 'parked') THEN NULL
           WHEN x.open AND r.state = 'running' THEN 'app-' || (1 + r.id % 3) || ':' || (4000 + r.id % 2)
           ELSE 'app-' || (1 + (r.id / 40000) % 9) || ':' || (1000 + (r.id / 40000) % 97)
       END,
       CASE WHEN NOT x.open AND a = n.n
            THEN jsonb_build_object('ok', true, 'ref', w.steps[j] || '-' || r.id) END,
       CASE WHEN (NOT x.open AND a < n.n AND NOT (r.kind = 'long' AND j = 2)) OR (x.open AND r.state = 'paused')
            THEN CASE WHEN r.state = 'paused' AND x.open THEN 'PaymentDeclined' ELSE 'UpstreamTimeout' END END,
       CASE WHEN (NOT x.open AND a < n.n AND NOT (r.kind = 'long' AND j = 2)) OR (x.open AND r.state = 'paused')
            THEN CASE WHEN r.state = 'paused' AND x.open THEN 'the card was declined: insufficient funds'
                      ELSE 'upstream did not answer within 30s' END END,
       CASE WHEN (NOT x.open AND a < n.n AND NOT (r.kind = 'long' AND j = 2)) OR (x.open AND r.state = 'paused')
            THEN '["connection reset by peer", "operation timed out"]'::jsonb END,
       t.at
FROM plan r
JOIN wf w ON w.name = r.workflow
CROSS JOIN clock c
CROSS JOIN LATERAL generate_series(1, r.p) AS j
CROSS JOIN LATERAL (
    SELECT CASE
               WHEN r.kind = 'long' AND j = 2 THEN c.long_attempts
               WHEN j = r.p AND r.state = 'retrying' THEN 2 + (pg_temp.u(r.id * 16 + j, 5) < 0.3)::int
               WHEN j = r.wait_at OR j = r.fan_out_at THEN 1
               ELSE 1 + CASE WHEN pg_temp.u(r.id * 16 + j, 5) < 0.08 THEN 1
                             WHEN pg_temp.u(r.id * 16 + j, 5) < 0.11 THEN 2
                             ELSE 0 END
           END AS n
) n
CROSS JOIN LATERAL generate_series(1, n.n) AS a
CROSS JOIN LATERAL (
    SELECT r.created_at + r.d * (((j - 1) + (a - 1)::float8 / n.n) / r.p) AS at,
           r.d / (r.p * n.n) AS share
) t
CROSS JOIN LATERAL (
    -- The attempt the run's state is about: the last of its current step.
    SELECT r.state <> 'finished' AND j = r.p AND a = n.n AS open
) x
ORDER BY r.id, j, a;

-- @ batches
-- A parent's batch has the parent's id; its children are the child runs of
-- its block.
INSERT INTO {schema}.batches (id, run_id, parent_step_id, total, succeeded, failed, status,
                              created_at, resolved_at)
OVERRIDING SYSTEM VALUE
SELECT r.id, r.id, s.id, coalesce(k.total, 0), coalesce(k.finished, 0), 0,
       CASE WHEN r.state = 'parked' THEN 'open' ELSE 'succeeded' END,
       r.created_at + interval '1.5 seconds',
       CASE WHEN r.state <> 'parked' THEN coalesce(k.last_end, s.finished_at) END
FROM plan r
JOIN {schema}.steps s ON s.run_id = r.id AND s.step_name = 'invoice_all' AND s.attempt = 1
LEFT JOIN (
    SELECT ch.parent_id, count(*)::int AS total,
           count(*) FILTER (WHERE ch.state = 'finished')::int AS finished,
           max(ch.created_at + ch.d) AS last_end
    FROM plan ch
    WHERE ch.kind = 'child'
    GROUP BY ch.parent_id
) k ON k.parent_id = r.id
WHERE r.kind = 'parent'
ORDER BY r.id;
SELECT setval(pg_get_serial_sequence('{schema}.batches', 'id'), (SELECT n FROM clock));

-- @ signals
-- The signal each wait took (its id is the run's: one a run), sent a moment
-- before its step completed.
INSERT INTO {schema}.signals (id, run_id, name, payload, created_at, consumed_by, consumed_at)
OVERRIDING SYSTEM VALUE
SELECT r.id, r.id, w.wait_for,
       jsonb_build_object('at', s.finished_at, 'via', 'email-link'),
       s.finished_at - (s.finished_at - s.started_at) * 0.5, s.id, s.finished_at
FROM plan r
JOIN wf w ON w.name = r.workflow
JOIN {schema}.steps s ON s.run_id = r.id AND s.step_name = w.steps[w.wait_at] AND s.attempt = 1
WHERE w.wait_at IS NOT NULL AND s.status = 'completed'
ORDER BY r.id;
SELECT setval(pg_get_serial_sequence('{schema}.signals', 'id'), (SELECT n FROM clock));

-- @ events
-- The trail, in three inserts so each run's ids follow its time: `started`
-- for every run, then each attempt's events in step order, then how each
-- run ended.
INSERT INTO {schema}.events (run_id, event, actor, reason, details, created_at)
SELECT r.id, 'started',
       CASE WHEN r.kind = 'child' THEN 'app-1:4000' ELSE 'client' END,
       CASE WHEN r.kind = 'child' THEN 'fan_out' END,
       CASE WHEN r.kind = 'child'
            THEN jsonb_build_object('parent_run_id', r.parent_id, 'batch_id', r.parent_id) END,
       r.created_at
FROM plan r
ORDER BY r.id;

INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, reason, details,
                             created_at)
SELECT s.run_id, s.id, s.step_name, s.attempt, e.event,
       coalesce(e.actor, s.worker_id, 'app-1:4000'), e.reason, e.details, e.at
FROM {schema}.steps s
CROSS JOIN (
    SELECT array_agg(steps[wait_at]) FILTER (WHERE wait_at IS NOT NULL) AS waits,
           array_agg(steps[fan_out_at]) FILTER (WHERE fan_out_at IS NOT NULL) AS fans_out
    FROM wf
) named
CROSS JOIN LATERAL (
    SELECT s.step_name = ANY (named.waits) AS waits,
           s.step_name = ANY (named.fans_out) AS fans_out,
           s.error_class IS NOT NULL AS erred
) k
CROSS JOIN LATERAL (VALUES
    (1, CASE WHEN s.started_at IS NOT NULL THEN 'step_started' END, s.started_at,
     NULL::text, NULL::text, NULL::jsonb),
    (2, CASE WHEN (k.waits OR k.fans_out) AND s.started_at IS NOT NULL THEN 'step_waiting' END,
     s.started_at + (coalesce(s.finished_at, s.started_at) - s.started_at) * 0.01,
     NULL, NULL, NULL),
    (3, CASE WHEN k.waits AND s.status = 'completed' THEN 'signal_received' END,
     s.finished_at - (s.finished_at - s.started_at) * 0.5, 'client', NULL, NULL),
    (4, CASE WHEN k.waits AND s.status = 'completed' THEN 'signal_consumed' END,
     s.finished_at, NULL, NULL, jsonb_build_object('signal_id', s.run_id)),
    (5, CASE WHEN k.fans_out AND s.status = 'completed' THEN 'batch_resolved' END,
     s.finished_at, 'app-1:4000', NULL, jsonb_build_object('batch_id', s.run_id)),
    (6, CASE WHEN k.erred THEN 'step_failed' END, s.finished_at, NULL, NULL, NULL),
    (7, CASE s.outcome WHEN 'completed' THEN 'step_completed'
                       WHEN 'reattempted' THEN 'step_reattempted'
                       WHEN 'paused' THEN 'paused' END,
     s.finished_at, NULL,
     CASE WHEN s.outcome = 'paused' THEN 'step failed with no reattempts left' END, NULL)
) AS e(ord, event, at, actor, reason, details)
WHERE e.event IS NOT NULL
ORDER BY s.id, e.ord;

INSERT INTO {schema}.events (run_id, event, actor, reason, created_at)
SELECT r.id, CASE r.state WHEN 'finished' THEN 'finished' ELSE 'cancelled' END,
       CASE r.state WHEN 'finished' THEN 'app-1:4000' ELSE 'cli:oncall' END,
       CASE WHEN r.state = 'cancelled' THEN 'customer closed the account' END,
       r.created_at + r.d
FROM plan r
WHERE r.state IN ('finished', 'cancelled')
ORDER BY r.id;

-- @ registry
-- Three live workers (their heartbeats are refreshed before each
-- measurement), each registered for every workflow; the definitions and
-- start plans they registered; a dozen schedules.
INSERT INTO {schema}.definitions (workflow, digest, step_plan, created_at)
SELECT wp.name, wp.digest, wp.definition_plan, c.t_end - c.span FROM wf_plan wp CROSS JOIN clock c;
INSERT INTO {schema}.definition_starts (options_digest, digest, workflow, step_plan, created_at)
SELECT wp.options_digest, wp.digest, wp.name, wp.start_plan, c.t_end - c.span
FROM wf_plan wp CROSS JOIN clock c;
INSERT INTO {schema}.workers (id, host, pid, queues, started_at, heartbeat_at, name, concurrency)
SELECT 'app-' || i || ':' || (4000 + i % 2), 'app-' || i, 4000 + i % 2,
       '{onboarding,email,billing,reports,sync}', c.t_end - interval '2 hours', now(),
       'app-' || i, 16
FROM generate_series(1, 3) AS i CROSS JOIN clock c;
INSERT INTO {schema}.worker_definitions (worker_id, workflow, digest, options_digest)
SELECT wk.id, wp.name, wp.digest, wp.options_digest
FROM {schema}.workers wk CROSS JOIN wf_plan wp;
INSERT INTO {schema}.schedules (name, workflow, expression, timezone, catch_up, input, origin,
                                next_tick_at, last_tick_at, last_run_id, last_fired_at,
                                paused_at, paused_by, paused_reason, declared_at, created_at,
                                updated_at)
SELECT 'reports.daily.' || region, 'reports.daily', '0 0 ' || (i % 24) || ' * * *',
       (ARRAY['UTC', 'Europe/Berlin', 'America/New_York', 'Asia/Tokyo'])[1 + i % 4],
       (ARRAY['skip', 'one', 'all(3)'])[1 + i % 3],
       jsonb_build_object('region', region), CASE WHEN i % 3 = 0 THEN 'client' ELSE 'code' END,
       date_trunc('hour', c.t_end) + interval '1 hour' * (1 + i % 24),
       date_trunc('hour', c.t_end) - interval '1 hour' * (23 - i % 24),
       (SELECT max(id) FROM plan WHERE workflow = 'reports.daily'),
       date_trunc('hour', c.t_end) - interval '1 hour' * (23 - i % 24),
       CASE WHEN i = 7 THEN c.t_end - interval '3 days' END,
       CASE WHEN i = 7 THEN 'cli:oncall' END,
       CASE WHEN i = 7 THEN 'region retired' END,
       CASE WHEN i % 3 <> 0 THEN c.t_end - interval '2 hours' END,
       c.t_end - c.span, c.t_end - interval '2 hours'
FROM generate_series(1, 12) AS i
CROSS JOIN LATERAL (SELECT (ARRAY['eu', 'us', 'apac', 'uk', 'de', 'fr', 'br', 'in', 'jp',
                                  'au', 'ca', 'mx'])[i] AS region) g
CROSS JOIN clock c;
