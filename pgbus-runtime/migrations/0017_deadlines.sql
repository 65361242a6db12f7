-- Run deadlines (issue 21): a run may have a deadline, from the workflow's
-- `#[workflow(deadline = "2h")]` (counted from the run's start time) or the
-- start's own (`StartOptions::deadline`, `deadline_after`). A run past its
-- deadline starts no step (claim.sql, next_due.sql and a handoff check it),
-- and the sweep (expiring_runs.sql, then one transaction per run under its
-- lock) cancels or pauses it as `on_deadline` says, after a
-- `deadline_exceeded` event, and clears `deadline_at`: a deadline fires once,
-- so a run it paused goes on when resumed. NULL: no deadline (every run
-- before this migration, fan-out children, runs the SQL entry point
-- `start_run` starts); `on_deadline` is written with a deadline.
ALTER TABLE {schema}.runs
    ADD COLUMN deadline_at timestamptz,
    ADD COLUMN on_deadline text CHECK (on_deadline IN ('cancel', 'pause'));

-- The sweep's scan: runs not ended whose deadline has come, oldest deadline
-- first. Ended runs and runs without a deadline are not in it.
CREATE INDEX runs_deadline ON {schema}.runs (deadline_at, id)
    WHERE deadline_at IS NOT NULL AND status IN ('ready', 'performing', 'paused');
