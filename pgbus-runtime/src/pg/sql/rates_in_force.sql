-- The rate limits in force, by key bytewise, with the step starts inside
-- the window ending at $1 for a limit of one window (`workflow:`, `step:`;
-- its `rate_windows` row, a probe of the primary key and at most
-- `max_starts` times); NULL for a per-key rate (`key:<W>`, one window per
-- concurrency key: not listed).
-- $1 now (NULL = clock_timestamp()), $2 the most rows read
SELECT r.key, r.workflow, r.max_starts::bigint AS max_starts, r.period_ms,
       CASE WHEN split_part(r.key, ':', 1) = 'key' THEN NULL
            ELSE (SELECT count(*)
                  FROM {schema}.rate_windows w
                  CROSS JOIN LATERAL unnest(w.starts) AS s(t)
                  WHERE w.key = r.key
                    AND s.t > coalesce($1::timestamptz, clock_timestamp())
                              - r.period_ms * interval '1 millisecond')
       END AS starts_in_window
FROM {schema}.rate_limits r
ORDER BY r.key COLLATE "C"
LIMIT $2
