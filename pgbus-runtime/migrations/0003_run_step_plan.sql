-- Where each live step of the definition a run started with goes: its queue,
-- priority, timeout and wait, in order, as a JSON array of objects
-- {"name", "queue", "priority", "timeout_ms", "wait_ms"}. It lets an operator's
-- resume or skip (which has no definition at hand) schedule the run's next step,
-- and a worker of another version place a step its own definition lacks. NULL for
-- runs started before this migration: they fall back to the step names and the
-- worker's definition.
ALTER TABLE {schema}.runs ADD COLUMN step_plan jsonb;

-- Retention deletes runs with their signals; without an index on run_id, each
-- cascade would scan the table (the other index on it is partial).
CREATE INDEX signals_run ON {schema}.signals (run_id);
