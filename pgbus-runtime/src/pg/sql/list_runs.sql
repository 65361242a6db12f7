-- Runs, newest first, filtered. $1 workflow (NULL = any), $2 status (NULL = any),
-- $3 limit, $4 before id (NULL = from the newest), $5 created at or after
-- (NULL = any), $6 created before (NULL = any)
SELECT id, workflow, status, current_step, created_at, updated_at, finished_at
FROM {schema}.runs
WHERE ($1::text IS NULL OR workflow = $1)
  AND ($2::text IS NULL OR status = $2)
  AND ($4::bigint IS NULL OR id < $4)
  AND ($5::timestamptz IS NULL OR created_at >= $5)
  AND ($6::timestamptz IS NULL OR created_at < $6)
ORDER BY id DESC
LIMIT $3
