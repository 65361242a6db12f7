-- A run's latest events and, older than those, the ones the timeline of the
-- attempts read needs: each attempt's first start and latest 8 starts and
-- parks, and the run's latest pauses, resumes and end. $1 run id, $2 how many,
-- $3 the first attempt read (steps.id), $4 how many pauses, resumes and ends
SELECT e.id, e.step_id, e.step_name, e.attempt, e.event, e.actor, e.reason, e.details,
       e.created_at
FROM (
    (SELECT id FROM {schema}.events WHERE run_id = $1 ORDER BY id DESC LIMIT $2)
    UNION
    (SELECT id FROM (
        SELECT id, event,
               row_number() OVER (PARTITION BY step_id ORDER BY id DESC) AS latest,
               row_number() OVER (PARTITION BY step_id, event ORDER BY id) AS first
        FROM {schema}.events
        WHERE run_id = $1 AND step_id >= $3 AND event IN ('step_started', 'step_waiting')
     ) marks
     WHERE latest <= 8 OR (event = 'step_started' AND first = 1))
    UNION
    (SELECT id FROM {schema}.events
     WHERE run_id = $1 AND event IN ('paused', 'resumed', 'cancelled', 'finished')
     ORDER BY id DESC LIMIT $4)
) kept
JOIN {schema}.events e ON e.id = kept.id
ORDER BY e.id
