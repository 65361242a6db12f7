-- Whether worker $3 already recorded the outcome of the attempt whose step row is
-- $2 (of run $1): every recorded outcome writes an event about its own attempt
-- (`step_completed`, `step_failed`, `step_skipped`, `step_reattempted`,
-- `cancelled`) with the worker as actor. Asked when a retried outcome finds its
-- fence gone, to tell an earlier try that committed (its reply lost with the
-- connection) from a real late completion; the sweep's and operators' changes
-- carry other actors.
-- $1 run id, $2 step id, $3 worker id
SELECT EXISTS (
    SELECT 1
    FROM {schema}.events e
    WHERE e.run_id = $1
      AND e.actor = $3
      AND e.step_id = $2
      AND e.event NOT IN ('step_started', 'late_completion_ignored')
)
