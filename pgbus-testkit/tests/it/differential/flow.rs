//! Flow control (issue 21): a key limit with a slot held by a dead worker,
//! and a rate that throttles rows to its window's openings, leave the same
//! histories (due times, `held_by`, `throttled_by`) on both stores, the
//! memory store claiming one row at a time and Postgres eight, with
//! handoffs offered.

use pgbus_runtime::{FlowControl, Rate};

use super::*;

/// Two steps; the definitions below add limits to it.
struct Paced;

#[workflow(name = "diff.paced", input = u8, queue = "diff")]
impl Paced {
    #[step]
    async fn first(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn second(&self, _cx: &mut StepCx<u8>) {}
}

with_flow!(
    KeyLimited,
    KEY_LIMITED,
    Paced,
    "k",
    FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    }
);

with_flow!(
    RateLimited,
    RATE_LIMITED,
    Paced,
    "k",
    FlowControl {
        rate_limit: Some(Rate {
            count: 2,
            period_ms: 60_000,
        }),
        ..FlowControl::NONE
    }
);

/// Three runs of key `k1` and one of `k2`; a worker dies holding the first
/// run's slot: the other `k1` runs are held (the `k2` run is not) until the
/// sweep takes the lost attempt, then run one after the other.
async fn a_dead_workers_slot<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    h.announce().await;
    let mut runs = Vec::new();
    for key in [1, 1, 1, 2] {
        runs.push(h.start::<KeyLimited>(&key).await);
    }
    assert_eq!(h.claim_and_die().await, runs[0]);
    h.run_until_idle().await;
    for run in &runs[1..3] {
        let view = h.view(*run).await;
        assert_eq!(view.steps[0].held_by.as_deref(), Some("key:diff.paced:k1"));
    }
    assert_eq!(h.view(runs[3]).await.run.status, RunStatus::Finished);
    h.advance(Duration::from_secs(31));
    assert_eq!(h.sweep().await, (1, 0));
    h.run_until_idle().await;
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_limit_leaves_the_same_history() {
    let projections = both!(|h| h.register(KeyLimited), a_dead_workers_slot());
    let statuses: Vec<RunStatus> = projections.iter().map(|p| p.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Paused,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished
        ]
    );
}

/// Four runs of two steps under `rate_limit = "2/1m"`, driven over twenty
/// minutes: two starts a minute, each throttled row due at the opening its
/// place behind the rows before it gives.
async fn a_rate_over_time<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    h.announce().await;
    let mut runs = Vec::new();
    for i in 0..4 {
        runs.push(h.start::<RateLimited>(&i).await);
    }
    drive(h).await;
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_leaves_the_same_history() {
    let projections = both!(|h| h.register(RateLimited), a_rate_over_time());
    // Due times in seconds from each run's start, per run: the first two
    // start at once; the next two wait a minute; the second steps of the
    // first two wait behind those (two minutes), the last two behind them
    // (three), run when the drive's clock gets there.
    let due: Vec<Vec<i64>> = projections
        .iter()
        .map(|p| p.steps.iter().map(|s| s.times_ms.0 / 1_000).collect())
        .collect();
    assert_eq!(due, [[0, 120], [0, 120], [60, 180], [60, 180]]);
    for projection in &projections {
        assert_eq!(projection.status, RunStatus::Finished);
        assert!(projection.steps.iter().all(|s| s.throttled_by.is_none()));
    }
}

/// Under `rate_limit = "2/1m"`, two runs start at once; their second steps
/// wait a minute. A run started ten seconds later waits for the same
/// opening (a minute after the first starts, 50 s after its own): a full
/// window sends every row it throttles to its next opening, on both
/// stores. The histories end with the rows throttled.
async fn a_rate_with_rows_waiting<R: Rig>(h: &Harness<R>) -> Vec<RunId> {
    h.announce().await;
    let mut runs = vec![
        h.start::<RateLimited>(&0).await,
        h.start::<RateLimited>(&1).await,
    ];
    h.run_until_idle().await;
    h.advance(Duration::from_secs(10));
    runs.push(h.start::<RateLimited>(&2).await);
    h.run_until_idle().await;
    runs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn throttled_rows_wait_in_turn_on_both_stores() {
    let projections = both!(|h| h.register(RateLimited), a_rate_with_rows_waiting());
    let due: Vec<Vec<i64>> = projections
        .iter()
        .map(|p| p.steps.iter().map(|s| s.times_ms.0 / 1_000).collect())
        .collect();
    // From each run's start: the third run started at 10 s.
    assert_eq!(due, [vec![0, 60], vec![0, 60], vec![50]]);
    let throttled = projections[2].steps[0].throttled_by.as_deref();
    assert_eq!(throttled, Some("workflow:diff.paced"));
}
