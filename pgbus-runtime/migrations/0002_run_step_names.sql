-- The live steps of the definition a run started with, in order. A run advances
-- along its own list, so a worker of another version never skips a step the run
-- has (it schedules it; a worker that lacks it pauses the run there). NULL for
-- runs started before this migration: they follow the worker's definition.
ALTER TABLE {schema}.runs ADD COLUMN step_names text[];
