-- Locks schedule $1 for a fire, only while it is still unpaused and still at
-- the tick the fire pass read ($2): the fence that keeps two workers from
-- firing one tick. SKIP LOCKED: a worker firing it now has it; the others
-- pass. No row: fired or changed meanwhile.
-- $1 name, $2 next_tick_at as read, $3 now (NULL = clock_timestamp())
SELECT s.name, s.workflow, s.expression, s.timezone, s.catch_up, s.input, s.origin,
       s.next_tick_at, s.last_tick_at, s.last_run_id, s.last_fired_at, s.paused_at,
       s.paused_by, s.paused_reason, s.ticks_skipped, s.declared_at, s.created_at, s.updated_at,
       coalesce($3::timestamptz, clock_timestamp()) AS now
FROM {schema}.schedules s
WHERE s.name = $1
  AND s.next_tick_at = $2
  AND s.paused_at IS NULL
FOR UPDATE SKIP LOCKED
