-- The runs in flight of the given workflows, counted per position, for the
-- pre-deploy check (`Client::deploy_check`, `pgbus deploy-check`): one row per
-- workflow, definition digest, step list, status, current step and the latest
-- attempt of that step (its status, queue and the signal it is parked for),
-- with how many runs share it. Never a row per run: a healthy system has a few
-- dozen positions however many runs it has.
--
-- Reads the in-flight runs of those workflows through `runs_workflow_status`
-- and, per run, the latest attempt of its current step through the unique
-- (run_id, step_name, attempt) index: one short backward scan, however many
-- attempts the run has. The registry's plan of a digest comes along only for
-- runs without a step list (from before it was recorded), once per group.
-- Bounded by $2 groups; the command's statement timeout bounds its time.
-- $1 workflows (text[]), $2 limit (groups)
SELECT g.workflow, g.definition_digest, g.status, g.current_step, g.step_names,
       g.step_plan, g.step_name, g.step_status, g.queue, g.waiting_for, g.runs,
       CASE WHEN g.step_names IS NULL AND g.step_plan IS NULL THEN
           (SELECT d.step_plan FROM {schema}.definitions d
            WHERE d.workflow = g.workflow AND d.digest = g.definition_digest)
       END AS version_plan
FROM (
    SELECT r.workflow, r.definition_digest, r.status, r.current_step, r.step_names,
           r.step_plan, l.step_name, l.status AS step_status, l.queue, l.waiting_for,
           count(*) AS runs
    FROM {schema}.runs r
    LEFT JOIN LATERAL (
        SELECT s.step_name, s.status, s.queue, s.waiting_for
        FROM {schema}.steps s
        WHERE s.run_id = r.id AND s.step_name = r.current_step
        ORDER BY s.attempt DESC
        LIMIT 1
    ) l ON true
    WHERE r.workflow = ANY ($1::text[])
      AND r.status IN ('ready', 'performing', 'paused')
    GROUP BY r.workflow, r.definition_digest, r.status, r.current_step, r.step_names,
             r.step_plan, l.step_name, l.status, l.queue, l.waiting_for
    ORDER BY r.workflow, r.definition_digest, r.current_step, r.status
    LIMIT $2
) g
