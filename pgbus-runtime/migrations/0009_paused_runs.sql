-- The runs an operator looks for first, paused ones, listed without a
-- workflow (`pgbus runs --status paused`) and counted for the `pgbus_runs`
-- gauge: migration 0007 left no index for them. Only paused runs enter it, so
-- steps moving runs between ready and performing never touch it.
CREATE INDEX runs_paused ON {schema}.runs (id) WHERE status = 'paused';
