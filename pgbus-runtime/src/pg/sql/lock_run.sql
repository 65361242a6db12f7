-- Locks a run for an outcome or an operator action and returns what the engine
-- decides with. $1 run id
SELECT status, workflow, step_names FROM {schema}.runs WHERE id = $1 FOR UPDATE
