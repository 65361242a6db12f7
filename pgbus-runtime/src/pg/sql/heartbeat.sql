-- A worker is alive. $1 worker id, $2 now (NULL = clock_timestamp())
UPDATE {schema}.workers SET heartbeat_at = coalesce($2::timestamptz, clock_timestamp()) WHERE id = $1
