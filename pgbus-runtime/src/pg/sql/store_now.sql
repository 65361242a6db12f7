-- The store's time.
-- $1 now (NULL = clock_timestamp())
SELECT coalesce($1::timestamptz, clock_timestamp()) AS now
