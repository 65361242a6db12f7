//! Rate limits (issue 21): both stores' claims start at most `count` steps
//! of a rate key in any window of its period, on the store's clock; a row
//! outside the window is throttled (`throttled_by`, due again when the
//! window lets it start), its attempt unspent, and blocks nothing behind it.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::store::Store;
use pgbus_runtime::{
    Entry, EntryKind, FlowControl, Rate, RunRead, StepOptions, StepStatus, WorkflowDefinition,
};
use pgbus_testkit::default_start;

use super::flow::{Flowing, claim, complete, latest, register, start};
use super::{Clocked, Pinned, memory};

const PER_MINUTE: u64 = 60_000;

static WORKFLOW_RATED: WorkflowDefinition = WorkflowDefinition {
    flow: FlowControl {
        rate_limit: Some(Rate {
            count: 2,
            period_ms: PER_MINUTE,
        }),
        ..FlowControl::NONE
    },
    ..*<Flowing as Workflow>::DEFINITION
};

static WORKFLOW_RATED_FIVE: WorkflowDefinition = WorkflowDefinition {
    flow: FlowControl {
        rate_limit: Some(Rate {
            count: 5,
            period_ms: PER_MINUTE,
        }),
        ..FlowControl::NONE
    },
    ..*<Flowing as Workflow>::DEFINITION
};

static KEY_RATED: WorkflowDefinition = WorkflowDefinition {
    flow: FlowControl {
        has_key: true,
        key_rate_limit: Some(Rate {
            count: 1,
            period_ms: PER_MINUTE,
        }),
        ..FlowControl::NONE
    },
    ..*<Flowing as Workflow>::DEFINITION
};

/// A plain step of `Flowing`, with `rate_limit`.
const fn step(name: &'static str, rate_limit: Option<Rate>) -> Entry {
    Entry {
        name,
        method: Some(name),
        kind: EntryKind::Step,
        options: StepOptions {
            wait_ms: 0,
            timeout_ms: None,
            skip_if: None,
            queue: None,
            priority: None,
            wait_for: None,
            on_batch_failure: None,
            on_exception: &[],
            rate_limit,
        },
    }
}

static STEP_RATED_ENTRIES: [Entry; 3] = [
    step("one", None),
    step(
        "two",
        Some(Rate {
            count: 1,
            period_ms: PER_MINUTE,
        }),
    ),
    step("three", None),
];

static STEP_RATED: WorkflowDefinition = WorkflowDefinition {
    entries: &STEP_RATED_ENTRIES,
    ..*<Flowing as Workflow>::DEFINITION
};

fn at(seconds: i64) -> chrono::DateTime<chrono::Utc> {
    default_start() + chrono::Duration::seconds(seconds)
}

/// `rate_limit = "2/1m"`: two starts in the minute; the third and fourth
/// rows wait for the first start to leave the window (both due then: the
/// claim at that opening admits one and throttles the other again, to the
/// second start's leaving); a throttled row keeps its attempt, no
/// `step_started` written for it.
async fn a_rate_throttles_to_the_window_opening<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let def = &WORKFLOW_RATED;
    register(store, &[def], &[]).await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(start(store, def, None).await);
    }
    let first = claim(store, &[def], 1).await;
    assert_eq!(first.len(), 1);
    clocked.advance(Duration::from_secs(10));
    let claimed = claim(store, &[def], 8).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [runs[1]]);
    for (run, due) in [(runs[2], 60), (runs[3], 60)] {
        let row = latest(store, run).await;
        assert_eq!(
            (row.status, row.attempt, row.scheduled_at),
            (StepStatus::Scheduled, 1, at(due)),
            "run {run}"
        );
        assert_eq!(row.throttled_by.as_deref(), Some("workflow:contract.flow"));
        assert_eq!(row.held_by, None);
        let view = store.run(run, RunRead::default()).await.expect("the run");
        assert!(
            view.events.iter().all(|e| e.event != "step_started"),
            "no attempt spent"
        );
    }
    // Completing steps frees no rate: the window counts starts.
    complete(store, def, &first[0]).await;
    assert!(claim(store, &[def], 8).await.is_empty());
    clocked.advance(Duration::from_secs(50));
    let ids: Vec<RunId> = claim(store, &[def], 8)
        .await
        .iter()
        .map(|c| c.run_id)
        .collect();
    assert_eq!(ids, [runs[2]], "at 60 s the first start left the window");
    let started = latest(store, runs[2]).await;
    assert_eq!(
        (started.status, started.throttled_by),
        (StepStatus::InProgress, None)
    );
    // Run 3, throttled again to the second start's leaving (70 s), and run
    // 0's second step (due at 10 s, a later row) both wait for that opening;
    // run 3 goes first, in claim order.
    assert_eq!(latest(store, runs[3]).await.scheduled_at, at(70));
    assert_eq!(
        latest(store, runs[0]).await.throttled_by.as_deref(),
        Some("workflow:contract.flow")
    );
    clocked.advance(Duration::from_secs(10));
    let ids: Vec<RunId> = claim(store, &[def], 8)
        .await
        .iter()
        .map(|c| c.run_id)
        .collect();
    assert_eq!(ids, [runs[3]]);
}

/// A step's `rate_limit` throttles that step alone.
async fn a_step_rate_throttles_its_step_only<C: Clocked>(clocked: C) {
    let store = clocked.store();
    register(store, &[&STEP_RATED], &[]).await;
    let a = start(store, &STEP_RATED, None).await;
    let b = start(store, &STEP_RATED, None).await;
    let ones = claim(store, &[&STEP_RATED], 8).await;
    assert_eq!(ones.len(), 2, "`one` has no rate");
    for one in &ones {
        complete(store, &STEP_RATED, one).await;
    }
    let twos = claim(store, &[&STEP_RATED], 8).await;
    let ids: Vec<RunId> = twos.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [a]);
    let row = latest(store, b).await;
    assert_eq!((row.step_name.as_str(), row.scheduled_at), ("two", at(60)));
    assert_eq!(row.throttled_by.as_deref(), Some("step:contract.flow/two"));
}

/// `key_rate_limit = "1/1m"`: each key's starts on their own.
async fn a_key_rate_throttles_each_key<C: Clocked>(clocked: C) {
    let store = clocked.store();
    register(store, &[&KEY_RATED], &[]).await;
    let x = start(store, &KEY_RATED, Some("k1")).await;
    let y = start(store, &KEY_RATED, Some("k1")).await;
    let z = start(store, &KEY_RATED, Some("k2")).await;
    let ids: Vec<RunId> = claim(store, &[&KEY_RATED], 8)
        .await
        .iter()
        .map(|c| c.run_id)
        .collect();
    assert_eq!(ids, [x, z], "`y` is throttled, `z` behind it is not");
    let row = latest(store, y).await;
    assert_eq!(row.throttled_by.as_deref(), Some("key:contract.flow:k1"));
    assert_eq!(row.scheduled_at, at(60));
}

/// A rate lowered at registration (`5/1m` to `2/1m`) over a window holding
/// five starts (at 0 to 4 s): the next row waits until only one start is
/// left inside, when the fourth (3 s) leaves it, at 63 s, on both stores.
async fn a_lowered_rate_opens_when_the_window_has_room<C: Clocked>(clocked: C) {
    let store = clocked.store();
    register(store, &[&WORKFLOW_RATED_FIVE], &[]).await;
    for _ in 0..5 {
        start(store, &WORKFLOW_RATED_FIVE, None).await;
        assert_eq!(claim(store, &[&WORKFLOW_RATED_FIVE], 1).await.len(), 1);
        clocked.advance(Duration::from_secs(1));
    }
    register(store, &[&WORKFLOW_RATED], &[]).await;
    let run = start(store, &WORKFLOW_RATED, None).await;
    clocked.advance(Duration::from_secs(5));
    assert!(claim(store, &[&WORKFLOW_RATED], 8).await.is_empty());
    let row = latest(store, run).await;
    assert_eq!(row.throttled_by.as_deref(), Some("workflow:contract.flow"));
    assert_eq!(row.scheduled_at, at(63));
}

both_stores!(
    a_rate_throttles_to_the_window_opening,
    a_step_rate_throttles_its_step_only,
    a_key_rate_throttles_each_key,
    a_lowered_rate_opens_when_the_window_has_room,
);
