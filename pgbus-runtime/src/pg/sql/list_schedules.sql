-- Schedules by name, at most $3: all, those of workflow $1, or the one named $2.
-- A listing (no name) leaves each input out (up to 1 MiB each): 'null', and
-- the store marks the row `input_omitted` (ScheduleView::listed).
-- $1 workflow (NULL = any), $2 name (NULL = any), $3 limit
SELECT s.name, s.workflow, s.expression, s.timezone, s.catch_up,
       CASE WHEN $2::text IS NULL THEN 'null'::jsonb ELSE s.input END AS input, s.origin,
       s.next_tick_at, s.last_tick_at, s.last_run_id, s.last_fired_at, s.paused_at,
       s.paused_by, s.paused_reason, s.ticks_skipped, s.declared_at, s.created_at, s.updated_at
FROM {schema}.schedules s
WHERE ($1::text IS NULL OR s.workflow = $1)
  AND ($2::text IS NULL OR s.name = $2)
ORDER BY s.name
LIMIT $3
