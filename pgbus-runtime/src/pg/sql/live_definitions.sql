-- The definitions live workers registered, per workflow and digest, with how
-- many live workers registered each, for the pre-deploy check. Live: a
-- heartbeat within the lost-worker threshold. Bounded by $3 rows.
-- $1 now (NULL = clock_timestamp()), $2 lost-worker threshold (ms), $3 limit
WITH t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
)
SELECT wd.workflow, wd.digest, count(*) AS workers
FROM {schema}.worker_definitions wd
JOIN {schema}.workers w ON w.id = wd.worker_id
CROSS JOIN t
WHERE w.heartbeat_at >= t.now - $2::bigint * interval '1 millisecond'
GROUP BY wd.workflow, wd.digest
ORDER BY wd.workflow, wd.digest
LIMIT $3
