-- A run as a wait for its result reads it (view::ResultView): its row; for a
-- finished run its latest attempt (the one whose end finished it) with its
-- output; for a cancelled or paused run the reason of the latest event of
-- that name among its latest $2 events. No row when the run does not exist.
-- The lateral read runs only for a finished run (a one-time filter), so a
-- poll of a running run reads its row alone.
-- $1 run id, $2 how many of its latest events to look through
SELECT r.id, r.workflow, r.status, r.error_class, r.error_message,
       s.step_name, s.attempt, s.status AS step_status, s.output,
       (SELECT e.reason
          FROM (SELECT ev.event, ev.reason FROM {schema}.events ev
                 WHERE ev.run_id = r.id AND r.status IN ('cancelled', 'paused')
                 ORDER BY ev.id DESC LIMIT $2) e
         WHERE e.event = r.status
         LIMIT 1) AS reason
FROM {schema}.runs r
LEFT JOIN LATERAL (
    SELECT st.step_name, st.attempt, st.status, st.output
    FROM {schema}.steps st
    WHERE st.run_id = r.id AND r.status = 'finished'
    ORDER BY st.id DESC
    LIMIT 1
) s ON true
WHERE r.id = $1
