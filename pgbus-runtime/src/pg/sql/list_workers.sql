-- Live workers for `pgbus workers` and `Client::workers`: those whose heartbeat
-- is within the lost-worker threshold, by name (the id for a worker of a version
-- before the registry, which has none), each with the definitions it registered
-- (digests, and the per-deployment overrides in force) and the attempts in progress under its id (counted from the partial index of
-- in-progress rows by worker). Bounded by $3.
-- $1 now (NULL = clock_timestamp()), $2 lost-worker threshold (ms), $3 limit
WITH t AS (
    SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
)
SELECT w.id, w.name, w.host, w.pid, w.queues, w.concurrency, w.started_at,
       w.heartbeat_at, t.now,
       (SELECT count(*) FROM {schema}.steps s
        WHERE s.worker_id = w.id AND s.status = 'in_progress') AS in_flight,
       (SELECT coalesce(jsonb_agg(jsonb_build_object('workflow', wd.workflow,
                                                     'digest', wd.digest,
                                                     'options_digest', wd.options_digest,
                                                     'overrides', wd.overrides)
                                  ORDER BY wd.workflow), '[]'::jsonb)
        FROM {schema}.worker_definitions wd
        WHERE wd.worker_id = w.id) AS workflows
FROM {schema}.workers w
CROSS JOIN t
WHERE w.heartbeat_at >= t.now - $2::bigint * interval '1 millisecond'
ORDER BY coalesce(w.name, w.id), w.id
LIMIT $3
