-- A run is being cancelled: locks its open descendants (children of its open
-- batches, theirs, all the way down), parents first (by depth), the order
-- every transaction takes, and returns them. Run before cancel_children.sql,
-- again until it returns no more rows than the time before. Why: a statement
-- reads with the snapshot taken when it starts, and a grandchild's own
-- transactions lock its parent, not the run being cancelled; while a single
-- statement waited for such a parent's lock, the grandchild could commit a new
-- step row (and a worker claim it) that the statement could not see, leaving
-- the grandchild cancelled with an attempt still in progress. Once every open
-- descendant is locked nothing in the tree can change (each transition and
-- each new child takes its parent's lock, claims skip locked runs), so the
-- cancel that follows sees all of it.
-- $1 run id
WITH RECURSIVE tree AS (
    SELECT c.id, 1 AS depth
    FROM {schema}.batches b JOIN {schema}.runs c ON c.parent_batch_id = b.id
    WHERE b.run_id = $1 AND b.status = 'open'
  UNION ALL
    SELECT c.id, t.depth + 1
    FROM tree t
    JOIN {schema}.batches b ON b.run_id = t.id AND b.status = 'open'
    JOIN {schema}.runs c ON c.parent_batch_id = b.id
)
SELECT r.id FROM {schema}.runs r JOIN tree t ON t.id = r.id
WHERE r.status NOT IN ('finished', 'cancelled')
ORDER BY t.depth, r.id
FOR UPDATE OF r
