-- How many runs are in each status that is not an end: what the `pgbus_runs`
-- gauge shows. A scan of the runs table (retention bounds it), so it runs only
-- when a worker is asked for the gauge, once per sweep.
SELECT status, count(*) AS runs
FROM {schema}.runs
WHERE status IN ('ready', 'performing', 'paused')
GROUP BY status
