-- Removes worker rows: this one ($1) when it stops, and any whose heartbeat is
-- older than $3 ms. Attempts such a worker still held count as lost at once.
-- $1 worker id (NULL for none), $2 now (NULL = clock_timestamp()), $3 age (ms;
-- NULL for none)
DELETE FROM {schema}.workers
WHERE id = $1
   OR heartbeat_at < coalesce($2::timestamptz, clock_timestamp()) - $3::bigint * interval '1 millisecond'
