-- The steps whose attempts ran longest on average among those that ended in
-- the window (started to finished of the last claim), with their count and
-- longest run, and their pickup latency (started minus due) percentiles.
-- $1 from, $2 to, $3 how many
SELECT workflow, step_name,
       count(*) AS attempts,
       (avg(extract(epoch FROM finished_at - started_at)) * 1000)::float8 AS mean_ms,
       (max(extract(epoch FROM finished_at - started_at)) * 1000)::float8 AS max_ms,
       (percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_at)) * 1000)::float8 AS pickup_p50_ms,
       (percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - scheduled_at)) * 1000)::float8 AS pickup_p99_ms
FROM {schema}.steps
WHERE finished_at >= $1 AND finished_at <= $2 AND started_at IS NOT NULL
GROUP BY workflow, step_name
ORDER BY mean_ms DESC, workflow, step_name
LIMIT $3
