-- The highest signal id a parked attempt's gate has turned down (its `matches`
-- predicate said no to it and to every earlier signal of the name): the
-- attempt's later claims bring only signals above it, a page at a time, so
-- signals turned down are never shipped or judged again by that attempt.
ALTER TABLE {schema}.steps ADD COLUMN signals_seen_to bigint;
