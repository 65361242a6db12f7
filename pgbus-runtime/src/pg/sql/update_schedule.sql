-- Writes a locked schedule row back as the engine changed it.
-- $1 name, $2 workflow, $3 expression, $4 timezone, $5 catch_up, $6 input,
-- $7 origin, $8 next_tick_at, $9 last_tick_at, $10 last_run_id, $11 last_fired_at,
-- $12 paused_at, $13 paused_by, $14 paused_reason, $15 ticks_skipped,
-- $16 declared_at, $17 created_at, $18 updated_at
UPDATE {schema}.schedules
SET workflow = $2, expression = $3, timezone = $4, catch_up = $5, input = $6, origin = $7,
    next_tick_at = $8, last_tick_at = $9, last_run_id = $10, last_fired_at = $11,
    paused_at = $12, paused_by = $13, paused_reason = $14, ticks_skipped = $15,
    declared_at = $16, created_at = $17, updated_at = $18
WHERE name = $1
