-- How many runs list_runs.sql's filters keep (every run, not one page),
-- counted up to $3: `scanned` is how many runs were read (at most $3 without
-- an input path, at most $13 with one), `matched` how many of those pass the
-- input path. Which runs are read when there are more is not specified.
-- $1 workflow (NULL = any), $2 status (NULL = any), $3 the most to read
-- (cap + 1), $4 before id, $5 created at or after, $6 created before, $7
-- workflow prefix, $8 top-level only, $9 children of this run, $10
-- idempotency key, $11 input SQL/JSON path, $12 after id, $13 the most runs
-- read for the input path (each NULL = any)
SELECT count(*) AS scanned,
       count(*) FILTER (WHERE $11::text IS NULL OR s.input @? $11::text::jsonpath) AS matched
FROM (
    SELECT r.input
    FROM {schema}.runs r
    WHERE ($1::text IS NULL OR r.workflow = $1)
      AND ($7::text IS NULL OR starts_with(r.workflow, $7))
      AND ($2::text IS NULL OR r.status = $2)
      AND ($4::bigint IS NULL OR r.id < $4)
      AND ($12::bigint IS NULL OR r.id > $12)
      AND ($5::timestamptz IS NULL OR r.created_at >= $5)
      AND ($6::timestamptz IS NULL OR r.created_at < $6)
      AND (NOT $8::boolean OR r.parent_batch_id IS NULL)
      AND ($9::bigint IS NULL OR r.parent_batch_id = ANY (ARRAY(
              SELECT b.id FROM {schema}.batches b WHERE b.run_id = $9)))
      AND ($10::text IS NULL OR r.idempotency_key = $10)
    LIMIT CASE WHEN $11::text IS NULL THEN $3::bigint ELSE $13::bigint END
) s
