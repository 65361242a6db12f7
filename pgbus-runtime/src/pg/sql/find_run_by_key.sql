-- The run an earlier start created with this idempotency key.
-- $1 workflow, $2 idempotency key
SELECT id FROM {schema}.runs WHERE workflow = $1 AND idempotency_key = $2
