-- Locks a run for an outcome or an operator action and returns what the engine
-- decides with, and the time the change uses. $1 run id, $2 now (NULL =
-- clock_timestamp())
SELECT status, workflow, step_names, step_plan, current_step, error_class, error_message,
       coalesce($2::timestamptz, clock_timestamp()) AS now
FROM {schema}.runs WHERE id = $1 FOR UPDATE
