-- The time an outcome transaction works with. $1 now (NULL = clock_timestamp())
SELECT coalesce($1::timestamptz, clock_timestamp())
