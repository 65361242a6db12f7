-- Locks the run a signal is sent to, in a statement of its own before
-- send_signal.sql. Under READ COMMITTED a statement reads with the snapshot
-- taken when it starts: had the send waited for the lock inside its own
-- statement (behind an attempt that was parking its step), it would have read
-- the step as still in progress and woken nothing, while the park had looked
-- for arrived signals before this one existed: a lost wake-up. Taken here
-- first, the lock makes the send's snapshot include whatever the holder
-- committed. Only the run itself: a signal never touches a fan_out parent.
--
-- For a checked signal ($2), also the names the run's workflow waits for, as
-- engine::check_signal_target takes them: the `wait_for` of the run's own step
-- plan, of every registered definition of its workflow (`definitions`, and
-- `definition_starts`, which holds each options variant of a digest), and of
-- the run's parked steps; NULL when the run has no step plan and no definition
-- of its workflow is registered (nothing to judge by).
-- $1 run id, $2 checked (boolean)
SELECT r.status, r.workflow,
       CASE WHEN $2::boolean THEN (
           SELECT CASE
                      WHEN r.step_plan IS NULL AND NOT EXISTS (
                          SELECT 1 FROM {schema}.definitions d WHERE d.workflow = r.workflow)
                      THEN NULL
                      ELSE coalesce(array_agg(DISTINCT n.name ORDER BY n.name)
                                        FILTER (WHERE n.name IS NOT NULL), ARRAY[]::text[])
                  END
           FROM (
               SELECT p->>'wait_for'
               FROM jsonb_array_elements(coalesce(r.step_plan, '[]'::jsonb)) p
               UNION ALL
               SELECT p->>'wait_for'
               FROM {schema}.definitions d CROSS JOIN LATERAL jsonb_array_elements(d.step_plan) p
               WHERE d.workflow = r.workflow
               UNION ALL
               SELECT p->>'wait_for'
               FROM {schema}.definition_starts ds
               CROSS JOIN LATERAL jsonb_array_elements(ds.step_plan) p
               WHERE ds.workflow = r.workflow
               UNION ALL
               SELECT s.waiting_for FROM {schema}.steps s
               WHERE s.run_id = r.id AND s.status = 'waiting'
           ) n (name)
       ) END AS waited
FROM {schema}.runs r
WHERE r.id = $1
FOR UPDATE OF r
