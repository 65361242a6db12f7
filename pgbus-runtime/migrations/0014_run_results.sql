-- Run results (issue 20): a run that ends (finished, cancelled) or pauses
-- says so on the schema's run-end channel, `ended_<schema>`, with its id as
-- the payload, so `Client::result` wakes without polling. A trigger, not a
-- statement in each path, so every path that ends a run notifies: a step's
-- outcome, an operator's action, the sweep, a parent's cancel cascading to
-- its fan-out children, and anything later or written by hand. It fires once
-- per change of status (a run re-marked `paused` under a pause is not a
-- change), after the row is written; Postgres delivers the notification at
-- commit, and not at all on a rollback. A step's outcome that leaves the run
-- `ready` or `performing` pays only the WHEN test. Retention deletes only
-- ended runs, each notified when it ended.
CREATE FUNCTION {schema}.notify_run_ended() RETURNS trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $notify_run_ended$
BEGIN
    PERFORM pg_notify('ended_' || TG_TABLE_SCHEMA, NEW.id::text);
    RETURN NULL;
END
$notify_run_ended$;

CREATE TRIGGER runs_ended
    AFTER UPDATE OF status ON {schema}.runs
    FOR EACH ROW
    WHEN (NEW.status IN ('finished', 'cancelled', 'paused')
          AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION {schema}.notify_run_ended();
