-- Operator reads at production scale (issue 23): lists of runs that stay a
-- bounded read on millions of runs. Every index here is on columns of `runs`
-- no change of a run writes (its id, its parent batch),
-- so an update that leaves the run's indexed columns alone stays heap-only
-- (HOT, see 0018), and none is on `steps` or `events`, which every step
-- writes (issue 22). Why each, and the plans they serve, in
-- docs/decisions.md, "Operator reads (issue 23)".
--
-- Top-level runs, newest first: a list of them reads one entry per run it
-- shows, however many fan_out children were started since.
CREATE INDEX runs_top_level ON {schema}.runs (id) WHERE parent_batch_id IS NULL;
-- A batch's children in id order (a page of a parent's children without
-- sorting all of them); it serves every lookup of `runs_parent_batch` too.
CREATE INDEX runs_children ON {schema}.runs (parent_batch_id, id)
    WHERE parent_batch_id IS NOT NULL;
DROP INDEX {schema}.runs_parent_batch;
