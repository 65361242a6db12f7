-- Whether worker $3 already recorded the outcome of the attempt whose step row is
-- $2 (of run $1): it wrote an event of this run after the attempt's
-- `step_started`. Asked when a retried outcome finds its fence gone, to tell an
-- earlier try that committed (its reply lost with the connection) from a real
-- late completion. The worker cannot have written anything else there, since the
-- run could not advance past an attempt whose outcome was not recorded.
-- $1 run id, $2 step id, $3 worker id
SELECT EXISTS (
    SELECT 1
    FROM {schema}.events e
    WHERE e.run_id = $1
      AND e.actor = $3
      AND e.event NOT IN ('step_started', 'late_completion_ignored')
      AND e.id > (SELECT max(s.id) FROM {schema}.events s
                  WHERE s.run_id = $1 AND s.step_id = $2 AND s.event = 'step_started')
)
