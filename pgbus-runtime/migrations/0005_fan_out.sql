-- Fan-out: a child run counts toward its batch in its own final transaction,
-- and the last one wakes the parent's parked step. These indexes serve the
-- lookups that takes: a batch's children (cancelling a parent's open children,
-- the sweep's check that all of them ended), a parked attempt's batch (its
-- claim), and the open batches (the sweep).
CREATE INDEX runs_parent_batch ON {schema}.runs (parent_batch_id)
    WHERE parent_batch_id IS NOT NULL;
CREATE INDEX batches_parent_step ON {schema}.batches (parent_step_id, id);
CREATE INDEX batches_open ON {schema}.batches (id) WHERE status = 'open';
-- `succeeded` counts children that finished, `failed` those that were
-- cancelled. A batch closed because its parent was cancelled is `failed` too.
COMMENT ON COLUMN {schema}.batches.succeeded IS 'children that finished';
COMMENT ON COLUMN {schema}.batches.failed IS 'children that were cancelled (or are missing)';
