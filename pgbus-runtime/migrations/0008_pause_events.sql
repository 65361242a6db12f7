-- Run statistics count the times runs were paused per time bucket from their
-- `paused` events; without an index that is a scan of every event. Pauses are
-- rare, so the partial index costs next to nothing on the hot path.
CREATE INDEX events_paused ON {schema}.events (created_at) WHERE event = 'paused';
