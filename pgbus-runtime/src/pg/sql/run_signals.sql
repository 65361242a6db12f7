-- A run's latest signals, in the order they were sent; values measured only
-- for the signals read. $1 run id, $2 how many, $3 the most bytes of payload
-- text to read (NULL: any)
SELECT s.id, s.name,
       CASE WHEN $3::bigint IS NULL OR octet_length(s.payload::text) <= $3 THEN s.payload END
           AS payload,
       CASE WHEN $3::bigint IS NOT NULL THEN octet_length(s.payload::text)::bigint END
           AS payload_bytes,
       s.created_at, s.consumed_by, s.consumed_at
FROM (SELECT id FROM {schema}.signals WHERE run_id = $1 ORDER BY id DESC LIMIT $2) latest
JOIN {schema}.signals s ON s.id = latest.id
ORDER BY s.id
