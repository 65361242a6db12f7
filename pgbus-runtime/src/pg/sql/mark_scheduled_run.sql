-- Records on a run the tick it was started for (`StepCx::tick`).
-- $1 run id, $2 schedule name, $3 tick time
UPDATE {schema}.runs
SET schedule_name = $2, tick_at = $3
WHERE id = $1 AND schedule_name IS NULL
