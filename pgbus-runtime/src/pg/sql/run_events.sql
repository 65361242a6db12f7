-- A run's latest events and, older than those, the ones the timeline of the
-- attempts read needs: their starts and parks, and the run's pauses and ends.
-- $1 run id, $2 how many, $3 the first attempt read (steps.id)
SELECT e.id, e.step_id, e.step_name, e.attempt, e.event, e.actor, e.reason, e.details,
       e.created_at
FROM (
    (SELECT id FROM {schema}.events WHERE run_id = $1 ORDER BY id DESC LIMIT $2)
    UNION
    (SELECT id FROM {schema}.events
     WHERE run_id = $1 AND step_id >= $3 AND event IN ('step_started', 'step_waiting')
     ORDER BY id DESC LIMIT 4 * $2)
    UNION
    (SELECT id FROM {schema}.events
     WHERE run_id = $1 AND event IN ('paused', 'resumed', 'cancelled', 'finished')
     ORDER BY id DESC LIMIT 2 * $2)
) kept
JOIN {schema}.events e ON e.id = kept.id
ORDER BY e.id
