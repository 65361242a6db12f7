-- One run. $1 run id
SELECT id, workflow, definition_digest, options_digest, status, current_step, input,
       idempotency_key, error_class, error_message, created_at, updated_at, paused_at,
       cancelled_at, finished_at, parent_batch_id
FROM {schema}.runs WHERE id = $1
