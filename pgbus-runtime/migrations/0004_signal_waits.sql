-- Signals: a step parked on `wait_for` records the signal name it waits for, so
-- a signal wakes exactly the steps that wait for it (a fan_out step waiting on
-- its batch has none). A waiting row's `scheduled_at` is the end of its
-- `wait_timeout` ('infinity' without one): it becomes due then, durably, and the
-- claim decides at the gate whether a signal or the timeout won.
ALTER TABLE {schema}.steps ADD COLUMN waiting_for text;

-- The due queue takes waiting rows whose wait ended as well as scheduled rows.
CREATE INDEX steps_due_or_waiting ON {schema}.steps (queue, priority, scheduled_at, id)
    WHERE status IN ('scheduled', 'waiting');
DROP INDEX {schema}.steps_due;

-- What a signal's sender and the gate look up: a run's signals of one name in
-- order, consumed or not (a reattempt sees the signal its step consumed).
CREATE INDEX signals_run_name ON {schema}.signals (run_id, name, id);
DROP INDEX {schema}.signals_pending;
