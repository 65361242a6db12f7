//! The insights reads (issue 23): bounded whatever the window, each saying
//! when it stopped at its cap with more of the window unread; counts right
//! below the cap; the workflow prefix; top-level runs and fan-out children
//! counted apart; failed attempts marked. On a pinned clock: runs before the
//! window, then runs a minute apart inside it.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_runtime::prelude::*;
use pgbus_runtime::window::{Range, Window};
use pgbus_runtime::{InsightsFilter, RunActivity, StepOutcome};

use crate::pg::{TestDb, t0};

/// What `Alpha::only` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Mode {
    /// Completes.
    Ok,
    /// Pauses its run with the `Pause` verb: no failure.
    Ask,
    /// Returns an error; the workflow's policy pauses the run: a failure.
    Broken,
    /// Asks for a second attempt (a failure), which completes.
    Again,
}

#[derive(Debug, thiserror::Error)]
#[error("broken")]
struct Broken;

struct Alpha;

#[workflow(name = "insights.alpha", input = Mode, on_exception(action = "pause"))]
impl Alpha {
    #[step]
    async fn only(&self, cx: &mut StepCx<Mode>) -> StepResult {
        match cx.input() {
            Mode::Ask => Ok(Flow::pause("asks")),
            Mode::Broken => Err(Broken.into()),
            Mode::Again if cx.attempt() == 1 => Ok(Flow::reattempt(Duration::ZERO)),
            Mode::Ok | Mode::Again => Ok(Flow::Complete),
        }
    }
}

struct Beta;

#[workflow(name = "insights.beta")]
impl Beta {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

struct Leaf;

#[workflow(name = "insights.leaf", input = u32)]
impl Leaf {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

/// Fans out `input` leaves.
struct Parent;

#[workflow(name = "insights.parent", input = u32)]
impl Parent {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for i in 0..*cx.input() {
            fan.start::<Leaf>(&i)?;
        }
        Ok(Flow::Complete)
    }
}

/// The last hour, ending 3 h after `t0()`: from `t0()` + 2 h.
fn last_hour() -> Range {
    Window::Hour.at(t0() + chrono::Duration::hours(3), None)
}

fn minutes(n: u64) -> Duration {
    Duration::from_secs(60 * n)
}

/// Sums of `activity`'s buckets: started, finished, paused, cancelled;
/// then the children's started and finished.
fn totals(activity: &RunActivity) -> [i64; 6] {
    activity.buckets.iter().fold([0; 6], |mut t, b| {
        t[0] += b.started;
        t[1] += b.finished;
        t[2] += b.paused;
        t[3] += b.cancelled;
        t[4] += b.children.started;
        t[5] += b.children.finished;
        t
    })
}

/// Three runs at `t0()` (before the window), then, from `t0()` + 2 h 5 min,
/// one a minute: alpha `Ok`, `Ok`, `Ask`, `Broken`, `Again`, beta, and a
/// parent of two leaves. Returns the time of the last.
async fn seed(t: &TestDb) -> DateTime<Utc> {
    let client = t.client();
    let worker =
        t.db.worker()
            .notifications(false)
            .register(Alpha)
            .register(Beta)
            .register(Parent)
            .register(Leaf)
            .build()
            .expect("worker");
    for _ in 0..3 {
        client.start::<Alpha>(&Mode::Ok).await.expect("start");
    }
    worker.run_until_idle().await.expect("run");
    t.clock.advance(minutes(125));
    for mode in [Mode::Ok, Mode::Ok, Mode::Ask, Mode::Broken, Mode::Again] {
        client.start::<Alpha>(&mode).await.expect("start");
        worker.run_until_idle().await.expect("run");
        t.clock.advance(minutes(1));
    }
    client.start::<Beta>(&()).await.expect("start");
    worker.run_until_idle().await.expect("run");
    t.clock.advance(minutes(1));
    client.start::<Parent>(&2).await.expect("start");
    worker.run_until_idle().await.expect("run");
    t.clock.now()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_below_their_cap_count_everything_and_at_it_say_so() {
    let t = TestDb::new().await;
    let last = seed(&t).await;
    let client = t.client();
    let range = last_hour();

    // In the window: 5 alpha, 1 beta, 1 parent and its 2 children started;
    // finished all but the two alpha runs paused (`Ask`, `Broken`); the
    // three runs at t0 are before it.
    let all = client
        .run_counts(&range, &InsightsFilter::new())
        .await
        .expect("counts");
    assert_eq!(totals(&all), [9, 7, 2, 0, 2, 2]);
    assert_eq!(all.buckets.len(), 13);
    for coverage in [all.started, all.ended, all.paused] {
        assert!(!coverage.partial, "{coverage:?}");
        assert_eq!(coverage.cap, InsightsFilter::DEFAULT_CAP);
    }
    assert_eq!(
        all.started.read, 9,
        "the runs before the window are not read"
    );
    assert_eq!(all.ended.read, 7);
    assert_eq!(all.paused.read, 2);
    // The children are counted apart; the top-level rest is what is left.
    let top_level: i64 = all.buckets.iter().map(|b| b.top_level().started).sum();
    assert_eq!(top_level, 7);

    // A cap of exactly what the window holds reads it all: not partial, even
    // with older runs outside the window.
    let exact = client
        .run_counts(&range, &InsightsFilter::new().cap(9))
        .await
        .expect("counts");
    assert_eq!(totals(&exact), totals(&all));
    assert!(!exact.started.partial);

    // One below: the newest 8 runs started, partial, back to the second run.
    let capped = client
        .run_counts(&range, &InsightsFilter::new().cap(8))
        .await
        .expect("counts");
    assert_eq!(capped.started.read, 8);
    assert!(capped.started.partial);
    assert_eq!(
        capped.started.oldest_read,
        Some(t0() + chrono::Duration::minutes(126))
    );
    assert_eq!(totals(&capped)[0], 8);
    assert!(!capped.ended.partial, "7 runs ended: below 8");
    assert!(!capped.started.whole_from(range.first_bucket));
    assert!(capped.started.whole_from(last));

    // Steps: 10 attempts in the window (5 alpha, `Again` twice; beta; the
    // parent's; two leaves'), 3 before it.
    let outcomes = client
        .step_outcomes(&range, &InsightsFilter::new())
        .await
        .expect("outcomes");
    assert!(!outcomes.coverage.partial);
    assert_eq!(outcomes.coverage.read, 10);
    let sum = |failed: bool, outcome: StepOutcome| -> i64 {
        outcomes
            .counts
            .iter()
            .filter(|c| c.failed == failed && c.outcome == outcome)
            .map(|c| c.steps)
            .sum()
    };
    assert_eq!(sum(false, StepOutcome::Completed), 7, "{outcomes:?}");
    assert_eq!(sum(false, StepOutcome::Paused), 1, "the step's own pause");
    assert_eq!(sum(true, StepOutcome::Paused), 1, "paused on its error");
    assert_eq!(sum(true, StepOutcome::Reattempted), 1);
    assert_eq!(sum(true, StepOutcome::Completed), 0);

    let capped = client
        .step_outcomes(&range, &InsightsFilter::new().cap(4))
        .await
        .expect("outcomes");
    assert!(capped.coverage.partial);
    assert_eq!(capped.coverage.read, 4);
    let counted: i64 = capped.counts.iter().map(|c| c.steps).sum();
    assert_eq!(counted, 4, "{capped:?}");
    let exact = client
        .step_outcomes(&range, &InsightsFilter::new().cap(10))
        .await
        .expect("outcomes");
    assert!(!exact.coverage.partial);

    let slowest = client
        .slowest_steps(&range, &InsightsFilter::new(), 10)
        .await
        .expect("slowest");
    assert!(!slowest.coverage.partial);
    let attempts: i64 = slowest.steps.iter().map(|s| s.attempts).sum();
    assert_eq!(attempts, 10, "{slowest:?}");
    let capped = client
        .slowest_steps(&range, &InsightsFilter::new().cap(3), 10)
        .await
        .expect("slowest");
    assert!(capped.coverage.partial);
    assert_eq!(capped.steps.iter().map(|s| s.attempts).sum::<i64>(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workflow_prefix_counts_its_workflows_only() {
    let t = TestDb::new().await;
    seed(&t).await;
    let client = t.client();
    let range = last_hour();

    let alpha = client
        .run_counts(
            &range,
            &InsightsFilter::new().workflow_prefix("insights.al"),
        )
        .await
        .expect("counts");
    assert_eq!(totals(&alpha), [5, 3, 2, 0, 0, 0]);
    assert_eq!(
        alpha.started.read, 9,
        "the cap counts rows read, any workflow"
    );
    // With a prefix each pause costs its event and run: a tenth of the cap.
    let few = client
        .run_counts(
            &range,
            &InsightsFilter::new().workflow_prefix("insights.al").cap(10),
        )
        .await
        .expect("counts");
    assert_eq!((few.paused.cap, few.paused.read), (1, 1));
    assert!(few.paused.partial, "two pauses, one read");
    assert_eq!(totals(&few)[2], 1);
    assert!(!few.started.partial, "9 runs, cap 10");
    let leaves = client
        .run_counts(
            &range,
            &InsightsFilter::new().workflow_prefix("insights.leaf"),
        )
        .await
        .expect("counts");
    assert_eq!(totals(&leaves), [2, 2, 0, 0, 2, 2]);
    let none = client
        .run_counts(&range, &InsightsFilter::new().workflow_prefix("nothing."))
        .await
        .expect("counts");
    assert_eq!(totals(&none), [0; 6]);
    // An empty prefix is no filter.
    let empty = client
        .run_counts(&range, &InsightsFilter::new().workflow_prefix(""))
        .await
        .expect("counts");
    assert_eq!(totals(&empty)[0], 9);

    let outcomes = client
        .step_outcomes(
            &range,
            &InsightsFilter::new().workflow_prefix("insights.beta"),
        )
        .await
        .expect("outcomes");
    assert_eq!(outcomes.counts.len(), 1, "{outcomes:?}");
    assert_eq!(
        (outcomes.counts[0].outcome, outcomes.counts[0].steps),
        (StepOutcome::Completed, 1)
    );
    let slowest = client
        .slowest_steps(
            &range,
            &InsightsFilter::new().workflow_prefix("insights.a"),
            10,
        )
        .await
        .expect("slowest");
    assert_eq!(slowest.steps.len(), 1);
    assert_eq!(slowest.steps[0].workflow, "insights.alpha");
    assert_eq!(slowest.steps[0].attempts, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_schema_reads_nothing_and_nothing_is_partial() {
    let t = TestDb::new().await;
    let client = t.client();
    let range = last_hour();
    let runs = client
        .run_counts(&range, &InsightsFilter::new().cap(1))
        .await
        .expect("counts");
    assert_eq!(totals(&runs), [0; 6]);
    assert_eq!((runs.started.read, runs.started.partial), (0, false));
    let outcomes = client
        .step_outcomes(&range, &InsightsFilter::new().cap(1))
        .await
        .expect("outcomes");
    assert!(outcomes.counts.is_empty() && !outcomes.coverage.partial);
    assert_eq!(outcomes.coverage.oldest_read, None);
}
