-- Run rows updated in place (issue 22). An outcome that hands the run's next
-- step to its worker leaves every indexed column of the run row as it was but
-- `updated_at`, which retention's index (`runs_ended_updated`) held; a change
-- of an indexed column (even one only a partial index's predicate reads)
-- makes Postgres write a new entry in every index of the table, where a
-- heap-only (HOT) update writes none. Retention now reads the time a run
-- ended, which no later change of a run moves: `finished_at` or
-- `cancelled_at`, which every path of the engine that ends a run sets
-- (existing rows get theirs from `updated_at` here); a run ended by hand
-- without either counts from its creation. The run table's new pages keep a
-- fifth free for those updates (`fillfactor`).
UPDATE {schema}.runs SET finished_at = updated_at
WHERE status = 'finished' AND finished_at IS NULL;
UPDATE {schema}.runs SET cancelled_at = updated_at
WHERE status = 'cancelled' AND cancelled_at IS NULL;
DROP INDEX {schema}.runs_ended_updated;
CREATE INDEX runs_ended ON {schema}.runs ((coalesce(finished_at, cancelled_at, created_at)))
    WHERE status IN ('finished', 'cancelled');
ALTER TABLE {schema}.runs SET (fillfactor = 80);
