-- Start options (issue 20): a run may be started with a queue and a priority
-- of its own (`StartOptions::queue`, `StartOptions::priority`). Each replaces
-- the workflow's `queue`/`priority` for every step of the run that names none
-- of its own: the first row, later steps, reattempts. The first row is placed
-- at start; the engine places each later row from the definition and these
-- columns (read under the run's lock), so they are kept on the run. NULL: the
-- workflow's (every run before this migration, every run started without the
-- option, and every run the SQL entry point `start_run` starts).
--
-- The run's recorded step plan (`runs.step_plan`) holds the placement with
-- these applied, so an operator's resume or skip, which schedules from that
-- plan, places a row where the engine would.
ALTER TABLE {schema}.runs
    ADD COLUMN queue_override    text,
    ADD COLUMN priority_override smallint;
