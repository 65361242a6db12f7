-- Locks schedule $1 for a change, a delete or a declaration, with the store's
-- time; no row when it does not exist.
-- $1 name, $2 now (NULL = clock_timestamp())
SELECT s.name, s.workflow, s.expression, s.timezone, s.catch_up, s.input, s.origin,
       s.next_tick_at, s.last_tick_at, s.last_run_id, s.last_fired_at, s.paused_at,
       s.paused_by, s.paused_reason, s.ticks_skipped, s.declared_at, s.created_at, s.updated_at,
       coalesce($2::timestamptz, clock_timestamp()) AS now
FROM {schema}.schedules s
WHERE s.name = $1
FOR UPDATE
