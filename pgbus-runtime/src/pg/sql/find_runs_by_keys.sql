-- The runs of a workflow holding the given idempotency keys (a bulk start's
-- keys that were taken), as visible to this statement.
-- $1 workflow, $2 the keys (text[], at most MAX_STARTS_PER_CALL)
SELECT r.idempotency_key, r.id
FROM {schema}.runs r
WHERE r.workflow = $1 AND r.idempotency_key = ANY($2::text[])
