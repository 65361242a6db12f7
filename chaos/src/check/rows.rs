//! What the checks and figures read from a chaos run's schema, in one place.

use pgbus_runtime::{Database, EventKind};

use crate::workflow::STEPS;

/// What the checks and figures read.
pub(super) struct Rows {
    pub(super) runs: i64,
    pub(super) finished: i64,
    pub(super) paused: i64,
    pub(super) cancelled: i64,
    pub(super) run_ids: Vec<i64>,
    pub(super) steps_not_once: i64,
    pub(super) completed_twice: i64,
    pub(super) ran_twice: i64,
    pub(super) completed_without_effect: i64,
    pub(super) open: i64,
    pub(super) completed: i64,
    pub(super) attempts: i64,
    pub(super) reattempted: i64,
    pub(super) reattempted_stalled: i64,
    pub(super) effects: i64,
    pub(super) executions: i64,
    /// (run, step) pairs with a side effect from more than one attempt.
    pub(super) steps_rerun: i64,
    pub(super) late: i64,
    /// Per `stall_detected` event: its time (seconds since the epoch), the
    /// worker that held the attempt, the detection.
    pub(super) stalls: Vec<(f64, String, String)>,
}

impl Rows {
    pub(super) async fn read(db: &Database) -> Result<Self, String> {
        let client = db
            .pool()
            .get()
            .await
            .map_err(|e| format!("cannot read the results: {e}"))?;
        let runs = client
            .query_one(
                "SELECT count(*), count(*) FILTER (WHERE status = 'finished'),
                        count(*) FILTER (WHERE status = 'paused'),
                        count(*) FILTER (WHERE status = 'cancelled')
                 FROM chaos.runs",
                &[],
            )
            .await
            .map_err(|e| e.to_string())?;
        let run_ids = client
            .query("SELECT id FROM chaos.runs", &[])
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .map(|row| row.get::<_, i64>(0))
            .collect();
        let steps: Vec<String> = STEPS.iter().map(|s| (*s).to_owned()).collect();
        let steps_not_once: i64 = client
            .query_one(
                "SELECT count(*) FROM (
                     SELECT r.id, n.step_name,
                            count(s.id) FILTER (WHERE s.status = 'completed') AS completed
                     FROM chaos.runs r
                     CROSS JOIN unnest($1::text[]) AS n(step_name)
                     LEFT JOIN chaos.steps s ON s.run_id = r.id AND s.step_name = n.step_name
                     GROUP BY r.id, n.step_name
                 ) x WHERE completed <> 1",
                &[&steps],
            )
            .await
            .map_err(|e| e.to_string())?
            .get(0);
        let rest = Self::read_attempts(db).await?;
        Ok(Self {
            runs: runs.get(0),
            finished: runs.get(1),
            paused: runs.get(2),
            cancelled: runs.get(3),
            run_ids,
            steps_not_once,
            ..rest
        })
    }

    /// Everything but the runs.
    async fn read_attempts(db: &Database) -> Result<Self, String> {
        let client = db
            .pool()
            .get()
            .await
            .map_err(|e| format!("cannot read the results: {e}"))?;
        let client = &client;
        let one = |sql: &'static str| async move {
            client
                .query_one(sql, &[])
                .await
                .map_err(|e| format!("{sql}: {e}"))
        };
        // An event kind's stored name, bound as `$1`.
        let of_kind = |sql: &'static str, kind: EventKind| async move {
            let name = kind.as_str();
            client
                .query_one(sql, &[&name])
                .await
                .map_err(|e| format!("{sql}: {e}"))
        };
        let completed_twice = of_kind(
            "SELECT count(*) FROM (
                 SELECT 1 FROM chaos.events WHERE event = $1
                 GROUP BY run_id, step_name, attempt HAVING count(*) > 1
             ) d",
            EventKind::StepCompleted,
        )
        .await?;
        let effects = one("SELECT count(*) FILTER (WHERE executions > 1), count(*),
                    coalesce(sum(executions), 0)::bigint
             FROM chaos.chaos_effects")
        .await?;
        let completed_without_effect = one("SELECT count(*) FROM chaos.steps s
             LEFT JOIN chaos.chaos_effects e ON e.step_id = s.id
             WHERE s.status = 'completed' AND e.step_id IS NULL")
        .await?;
        let attempts = one(
            "SELECT count(*) FILTER (WHERE status IN ('scheduled', 'in_progress', 'waiting')),
                    count(*) FILTER (WHERE status = 'completed'),
                    count(*),
                    count(*) FILTER (WHERE outcome = 'reattempted'),
                    count(*) FILTER (WHERE outcome = 'reattempted' AND error_class LIKE '%StepStalled')
             FROM chaos.steps",
        )
        .await?;
        let late = of_kind(
            "SELECT count(*) FROM chaos.events WHERE event = $1",
            EventKind::LateCompletionIgnored,
        )
        .await?;
        let steps_rerun = one("SELECT count(*) FROM (
                 SELECT 1 FROM chaos.chaos_effects
                 GROUP BY run_id, step_name HAVING count(*) > 1
             ) r")
        .await?;
        let stalls = client
            .query(
                "SELECT extract(epoch FROM e.created_at)::float8, coalesce(s.worker_id, ''),
                        coalesce(e.reason, '')
                 FROM chaos.events e
                 LEFT JOIN chaos.steps s ON s.id = e.step_id
                 WHERE e.event = $1",
                &[&EventKind::StallDetected.as_str()],
            )
            .await
            .map_err(|e| e.to_string())?
            .iter()
            .map(|row| (row.get(0), row.get(1), row.get(2)))
            .collect();
        Ok(Self {
            runs: 0,
            finished: 0,
            paused: 0,
            cancelled: 0,
            run_ids: Vec::new(),
            steps_not_once: 0,
            completed_twice: completed_twice.get(0),
            ran_twice: effects.get(0),
            effects: effects.get(1),
            executions: effects.get(2),
            completed_without_effect: completed_without_effect.get(0),
            open: attempts.get(0),
            completed: attempts.get(1),
            attempts: attempts.get(2),
            reattempted: attempts.get(3),
            reattempted_stalled: attempts.get(4),
            steps_rerun: steps_rerun.get(0),
            late: late.get(0),
            stalls,
        })
    }
}
