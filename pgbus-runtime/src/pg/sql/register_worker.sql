-- Records a worker. $1 id, $2 host, $3 pid, $4 queues, $5 now
INSERT INTO {schema}.workers (id, host, pid, queues, started_at, heartbeat_at)
VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, clock_timestamp()), coalesce($5::timestamptz, clock_timestamp()))
ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at
