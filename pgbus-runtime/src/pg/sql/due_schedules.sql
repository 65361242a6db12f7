-- Up to $2 unpaused schedules of the given workflows whose next tick has
-- come, oldest tick first, with the store's time; read without locks (the
-- fire locks and fences each, see lock_due_schedule.sql).
-- $1 workflows (text[]), $2 limit, $3 now (NULL = clock_timestamp())
WITH t AS (
    SELECT coalesce($3::timestamptz, clock_timestamp()) AS now
)
SELECT s.name, s.workflow, s.expression, s.timezone, s.catch_up, s.input, s.origin,
       s.next_tick_at, s.last_tick_at, s.last_run_id, s.last_fired_at, s.paused_at,
       s.paused_by, s.paused_reason, s.ticks_skipped, s.declared_at, s.created_at, s.updated_at,
       t.now
FROM t
CROSS JOIN LATERAL (
    SELECT *
    FROM {schema}.schedules d
    WHERE d.paused_at IS NULL
      AND d.next_tick_at IS NOT NULL
      AND d.next_tick_at <= t.now
      AND d.workflow = ANY ($1::text[])
    ORDER BY d.next_tick_at
    LIMIT $2
) s
ORDER BY s.next_tick_at, s.name
