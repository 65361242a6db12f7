-- Deletes schedule $1 and returns it; no row when it did not exist. Its runs stay.
-- $1 name
DELETE FROM {schema}.schedules s
WHERE s.name = $1
RETURNING s.name, s.workflow, s.expression, s.timezone, s.catch_up, s.input, s.origin,
       s.next_tick_at, s.last_tick_at, s.last_run_id, s.last_fired_at, s.paused_at,
       s.paused_by, s.paused_reason, s.ticks_skipped, s.declared_at, s.created_at, s.updated_at
