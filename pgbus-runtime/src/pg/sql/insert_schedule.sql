-- Inserts a schedule row; nothing when the name is taken (the caller says so).
-- $1 name, $2 workflow, $3 expression, $4 timezone, $5 catch_up, $6 input,
-- $7 origin, $8 next_tick_at, $9 last_tick_at, $10 last_run_id, $11 last_fired_at,
-- $12 paused_at, $13 paused_by, $14 paused_reason, $15 ticks_skipped,
-- $16 declared_at, $17 created_at, $18 updated_at
INSERT INTO {schema}.schedules (name, workflow, expression, timezone, catch_up, input, origin,
                                next_tick_at, last_tick_at, last_run_id, last_fired_at,
                                paused_at, paused_by, paused_reason, ticks_skipped,
                                declared_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)
ON CONFLICT (name) DO NOTHING
RETURNING name
