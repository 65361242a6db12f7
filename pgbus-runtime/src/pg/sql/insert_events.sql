-- Appends events. $1 run id, $2 step ids, $3 step names, $4 attempts, $5 events,
-- $6 actor, $7 reasons, $8 now, $9 details (jsonb[])
INSERT INTO {schema}.events (run_id, step_id, step_name, attempt, event, actor, reason, details,
                             created_at)
SELECT $1, e.step_id, e.step_name, e.attempt, e.event, $6, e.reason, e.details, $8
FROM unnest($2::bigint[], $3::text[], $4::integer[], $5::text[], $7::text[], $9::jsonb[])
     AS e(step_id, step_name, attempt, event, reason, details)
