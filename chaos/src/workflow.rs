//! The workflow under test: five steps, each recording that its body ran in a
//! side table, keyed by the step row (one row per attempt), so a second run of
//! the same attempt shows up as `executions > 1`.

use std::time::Duration;

use pgbus_runtime::Database;
use pgbus_runtime::prelude::*;

/// The schema the chaos test runs in (its private cluster has nothing else).
pub(crate) const SCHEMA: &str = "chaos";

/// The live steps, in order.
pub(crate) const STEPS: [&str; 5] = ["reserve", "charge", "pack", "ship", "notify"];

/// The side table: one row per step attempt whose body ran, and how often it ran.
pub(crate) const CREATE_EFFECTS: &str = "
CREATE TABLE chaos.chaos_effects (
    step_id    bigint      PRIMARY KEY,
    run_id     bigint      NOT NULL,
    step_name  text        NOT NULL,
    attempt    integer     NOT NULL,
    worker     text        NOT NULL,
    executions integer     NOT NULL DEFAULT 1,
    first_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (run_id, step_name, attempt)
)";

/// Records one execution of an attempt, in a statement (and transaction) of its
/// own, outside pgbus's. $1 run id, $2 step, $3 attempt, $4 worker label.
const RECORD_EFFECT: &str = "
INSERT INTO chaos.chaos_effects (step_id, run_id, step_name, attempt, worker)
SELECT s.id, s.run_id, s.step_name, s.attempt, $4
FROM chaos.steps s
WHERE s.run_id = $1 AND s.step_name = $2 AND s.attempt = $3
ON CONFLICT (step_id) DO UPDATE SET executions = chaos_effects.executions + 1";

/// A run's input.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Order {
    /// Which run this is, from 0.
    pub(crate) n: u32,
}

/// The step row a body was asked to record is missing.
#[derive(Debug)]
struct NoStepRow;

impl std::fmt::Display for NoStepRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("no step row for this attempt")
    }
}

impl std::error::Error for NoStepRow {}

/// The workflow value: the database for the side table, and who runs it.
pub(crate) struct Pipeline {
    pub(crate) db: Database,
    pub(crate) label: String,
}

// A body that fails (the database went away under it) is run again as a new
// attempt, reported only if it fails thirty times in a row, which would pause
// the run and fail the test.
#[workflow(
    name = "chaos.pipeline",
    input = Order,
    on_exception(
        action = "reattempt",
        wait = "100ms",
        max_reattempts = 30,
        report = "terminal_only"
    )
)]
impl Pipeline {
    #[step]
    async fn reserve(&self, cx: &mut StepCx<Order>) -> StepResult {
        self.effect(cx).await
    }

    #[step]
    async fn charge(&self, cx: &mut StepCx<Order>) -> StepResult {
        self.effect(cx).await
    }

    #[step]
    async fn pack(&self, cx: &mut StepCx<Order>) -> StepResult {
        self.effect(cx).await
    }

    #[step]
    async fn ship(&self, cx: &mut StepCx<Order>) -> StepResult {
        self.effect(cx).await
    }

    #[step]
    async fn notify(&self, cx: &mut StepCx<Order>) -> StepResult {
        self.effect(cx).await
    }
}

impl Pipeline {
    /// Works 10 to 40 ms (so kills land mid-step), records the execution half
    /// way through, and completes.
    async fn effect(&self, cx: &StepCx<Order>) -> StepResult {
        let step = STEPS.iter().position(|s| *s == cx.step()).unwrap_or(0);
        let step = u32::try_from(step).unwrap_or(0);
        let half = Duration::from_millis(5 + u64::from((cx.input().n + 3 * step) % 16));
        tokio::time::sleep(half).await;
        let client = self.db.pool().get().await?;
        let attempt = i32::try_from(cx.attempt()).unwrap_or(i32::MAX);
        let recorded = client
            .execute(
                RECORD_EFFECT,
                &[&cx.run_id().0, &cx.step(), &attempt, &self.label],
            )
            .await?;
        drop(client);
        if recorded != 1 {
            return Err(NoStepRow.into());
        }
        tokio::time::sleep(half).await;
        Ok(Flow::Complete)
    }
}
