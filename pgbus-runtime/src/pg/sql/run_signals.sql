-- A run's latest signals, in the order they were sent. $1 run id, $2 how many,
-- $3 the most bytes of payload text to read (NULL: any)
SELECT * FROM (
    SELECT id, name,
           CASE WHEN $3::bigint IS NULL OR octet_length(payload::text) <= $3 THEN payload END
               AS payload,
           CASE WHEN $3::bigint IS NOT NULL THEN octet_length(payload::text)::bigint END AS payload_bytes,
           created_at, consumed_by, consumed_at
    FROM {schema}.signals WHERE run_id = $1 ORDER BY id DESC LIMIT $2
) latest ORDER BY id
