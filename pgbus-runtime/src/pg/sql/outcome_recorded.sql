-- Whether worker $3 already recorded the outcome of its latest claim of the
-- attempt whose step row is $2 (of run $1): every recorded outcome, and a park,
-- writes an event about its own attempt (`step_completed`, `step_failed`,
-- `step_skipped`, `step_reattempted`, `cancelled`, `step_waiting`) with the
-- worker as actor, after the claim's `step_started`. Asked when a retried
-- outcome finds its fence gone, to tell an earlier try that committed (its reply
-- lost with the connection) from a real late completion; the sweep's and
-- operators' changes carry other actors. Only events after the worker's latest
-- `step_started` of the row count: a row that parked and was woken is claimed
-- again, and what an earlier claim recorded says nothing about this one.
-- $1 run id, $2 step id, $3 worker id
SELECT EXISTS (
    SELECT 1
    FROM {schema}.events e
    WHERE e.run_id = $1
      AND e.actor = $3
      AND e.step_id = $2
      AND e.event NOT IN ('step_started', 'late_completion_ignored', 'batch_resolved')
      AND e.id > (SELECT max(s.id) FROM {schema}.events s
                  WHERE s.run_id = $1 AND s.step_id = $2 AND s.actor = $3
                    AND s.event = 'step_started')
)
