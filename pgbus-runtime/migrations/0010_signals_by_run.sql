-- A run's latest signals are read newest first (`Client::run_with`); with
-- `(run_id)` alone every signal of the run was fetched and sorted first.
-- `(run_id, id)` serves retention's deletes as the old index did, at the
-- same cost on each insert.
CREATE INDEX signals_run_id ON {schema}.signals (run_id, id);
DROP INDEX {schema}.signals_run;
