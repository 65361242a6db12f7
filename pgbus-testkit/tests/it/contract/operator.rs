//! Operator reads at scale (issue 23), held to both stores: the list's
//! filters and pages, a run's parent and children, bounded counts, the
//! workflow names and the overview, read the same from either.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Attempted, Claim, Observe, Runner, Store};
use pgbus_runtime::{Action, Error, RunCount, RunFilter, RunRead, StartOptions};
use pgbus_testkit::default_start;

use super::{Clocked, Pinned, WORKER, memory};

/// A parent that fans out three `OpsLeaf` children, then wraps up.
struct OpsTree;

#[workflow(name = "ops.tree", input = u8, queue = "ops")]
impl OpsTree {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<u8>, fan: &mut FanOut) -> StepResult {
        for i in 0..3_u8 {
            fan.start::<OpsLeaf>(&serde_json::json!({"n": i}))?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn wrap(&self, _cx: &mut StepCx<u8>) {}
}

/// A child whose only step waits an hour.
struct OpsLeaf;

#[workflow(name = "ops.leaf", input = serde_json::Value, queue = "ops")]
impl OpsLeaf {
    #[step(wait = "1h")]
    async fn slow(&self, _cx: &mut StepCx<serde_json::Value>) {}
}

/// A one-step workflow with a JSON input, on another queue.
struct Mail;

#[workflow(name = "mail.send", input = serde_json::Value, queue = "mail")]
impl Mail {
    #[step]
    async fn send(&self, _cx: &mut StepCx<serde_json::Value>) {}
}

struct Quiet;

impl Observe for Quiet {
    type Tracked = ();

    fn track(&self, _claim: &Claim) {}

    fn attempted(&self, _attempted: &Attempted<'_>) {}
}

fn ids(list: &[pgbus_runtime::RunSummary]) -> Vec<RunId> {
    list.iter().map(|r| r.id).collect()
}

async fn list<S: Store>(store: &S, filter: RunFilter) -> Vec<RunId> {
    ids(&store.list_runs(&filter).await.expect("a list"))
}

/// Five mail runs (inputs `{"customer": "c0|c1", "n": i}`, the third with
/// key `order-2`), then a tree whose fan-out started its three children.
async fn fixture<S: Store + Clone>(store: &S) -> (Vec<RunId>, RunId) {
    let mut mails = Vec::new();
    for i in 0..5_i64 {
        let options = if i == 2 {
            StartOptions::new().key("order-2")
        } else {
            StartOptions::new()
        };
        let (run, _) = store
            .start_run(
                Mail::DEFINITION,
                &serde_json::json!({"customer": format!("c{}", i % 2), "n": i}),
                &options,
            )
            .await
            .expect("a start");
        mails.push(run);
    }
    let (parent, _) = store
        .start_run(
            OpsTree::DEFINITION,
            &serde_json::json!(1),
            &StartOptions::new(),
        )
        .await
        .expect("a start");
    let runner = Runner::new(store.clone(), WORKER)
        .register(OpsTree)
        .register(OpsLeaf);
    let stopping = AtomicBool::new(true);
    let claim = runner
        .claim(&["ops".to_owned()], 1)
        .await
        .expect("a claim")
        .pop()
        .expect("the fan-out is due");
    runner.run_claim(claim, (), &Quiet, 0, &stopping).await;

    (mails, parent)
}

/// Every filter keeps what it says, pages both ways come newest first, and
/// the tree reads its parent and children.
async fn lists_filter_and_page_alike<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (mails, parent) = fixture(store).await;
    let children = list(store, RunFilter::new().parent(parent)).await;
    assert_eq!(children.len(), 3, "{children:?}");
    assert!(children.windows(2).all(|w| w[0] > w[1]), "newest first");
    let all = store.list_runs(&RunFilter::new()).await.expect("a list");
    assert_eq!(all.len(), 9);
    for run in &all {
        let child = children.contains(&run.id);
        assert_eq!(run.parent_run, child.then_some(parent), "{run:?}");
        assert_eq!(run.children, if run.id == parent { 3 } else { 0 });
    }
    let view = store
        .run(children[0], RunRead::default())
        .await
        .expect("a run");
    assert_eq!(view.parent_run_id, Some(parent));
    assert_eq!(view.parent_step.as_deref(), Some("spread"));
    assert_eq!(view.run.parent_run, Some(parent));
    let mut top = mails.clone();
    top.push(parent);
    top.reverse();
    assert_eq!(list(store, RunFilter::new().top_level()).await, top);

    let mut newest_mails = mails.clone();
    newest_mails.reverse();
    assert_eq!(
        list(store, RunFilter::new().workflow("mail.send")).await,
        newest_mails
    );
    assert_eq!(
        list(store, RunFilter::new().workflow_prefix("mail.")).await,
        newest_mails
    );
    assert_eq!(
        list(store, RunFilter::new().workflow_prefix("ops.").top_level()).await,
        vec![parent]
    );
    assert_eq!(
        list(store, RunFilter::new().workflow_prefix("nope")).await,
        vec![]
    );
    assert_eq!(
        list(store, RunFilter::new().idempotency_key("order-2")).await,
        vec![mails[2]]
    );
    assert_eq!(
        list(
            store,
            RunFilter::new().input_path(r#"$.customer ? (@ == "c1")"#)
        )
        .await,
        vec![mails[3], mails[1]]
    );
    assert_eq!(
        list(
            store,
            RunFilter::new()
                .input_path("$.n ? (@ >= 3)")
                .workflow("mail.send")
        )
        .await,
        vec![mails[4], mails[3]]
    );
    let bad = store
        .list_runs(&RunFilter::new().input_path("$.customer ? (@ =="))
        .await;
    assert!(
        matches!(bad, Err(Error::InvalidInputPath { .. })),
        "{bad:?}"
    );

    // Pages: older than, newer than; each newest first.
    assert_eq!(
        list(
            store,
            RunFilter::new().top_level().before(mails[3]).limit(2)
        )
        .await,
        vec![mails[2], mails[1]]
    );
    assert_eq!(
        list(store, RunFilter::new().top_level().after(mails[1]).limit(2)).await,
        vec![mails[3], mails[2]],
        "the two right after, newest first"
    );
    assert_eq!(
        list(
            store,
            RunFilter::new()
                .workflow("mail.send")
                .after(mails[1])
                .limit(2)
        )
        .await,
        vec![mails[3], mails[2]]
    );
}

/// Counts stop at their cap and say so, a bad path is refused, and the
/// names and the newest activity are the store's.
async fn counts_and_names_read_alike<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let _ = fixture(store).await;
    assert_eq!(
        store
            .count_runs(&RunFilter::new(), 100)
            .await
            .expect("a count"),
        RunCount::Exactly(9)
    );
    assert_eq!(
        store
            .count_runs(&RunFilter::new().top_level(), 3)
            .await
            .expect("a count"),
        RunCount::MoreThan(3)
    );
    assert_eq!(
        store
            .count_runs(
                &RunFilter::new().input_path(r#"$.customer ? (@ == "c0")"#),
                100
            )
            .await
            .expect("a count"),
        RunCount::Exactly(3)
    );
    let bad = store
        .count_runs(&RunFilter::new().input_path("nope"), 10)
        .await;
    assert!(
        matches!(bad, Err(Error::InvalidInputPath { .. })),
        "{bad:?}"
    );

    assert_eq!(
        store.workflows().await.expect("the names"),
        vec!["mail.send", "ops.leaf", "ops.tree"]
    );
    assert_eq!(
        store.newest_activity().await.expect("a time"),
        Some(default_start())
    );
}

/// The overview: runs not ended per workflow and status, the due steps of
/// each queue with the oldest's due time, and the last hour per minute,
/// on the store's clock.
async fn the_overview_reads_now_and_the_last_hour<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let empty = store.overview().await.expect("an overview");
    assert_eq!((empty.workflows.len(), empty.queues.len()), (0, 0));
    let mut mails = Vec::new();
    for i in 0..3 {
        let (run, _) = store
            .start_run(
                Mail::DEFINITION,
                &serde_json::json!(i),
                &StartOptions::new(),
            )
            .await
            .expect("a start");
        mails.push(run);
        clocked.advance(Duration::from_secs(90));
    }
    store
        .act(mails[0], Action::Pause, "ops", "looking")
        .await
        .expect("a pause");
    store
        .act(mails[1], Action::Cancel, "ops", "wrong")
        .await
        .expect("a cancel");
    let overview = store.overview().await.expect("an overview");
    assert_eq!(
        overview.at,
        default_start() + chrono::Duration::seconds(270)
    );
    assert_eq!(overview.workflows.len(), 1);
    assert!(
        !overview.workflows_cut,
        "one workflow, few runs: nothing cut"
    );
    let mail = &overview.workflows[0];
    assert_eq!(
        (
            mail.workflow.as_str(),
            mail.ready,
            mail.performing,
            mail.paused
        ),
        ("mail.send", 1, 0, 1)
    );
    assert_eq!(overview.queues.len(), 1);
    let queue = &overview.queues[0];
    assert_eq!(
        (queue.queue.as_str(), queue.due, queue.held, queue.in_flight),
        ("mail", 1, 0, 0)
    );
    assert_eq!(
        queue.oldest_due,
        Some(default_start() + chrono::Duration::seconds(180))
    );
    assert_eq!(queue.oldest_due_ms(overview.at), Some(90_000));
    assert_eq!(
        (overview.cancelled_last_hour, overview.pauses_last_hour),
        (1, 1)
    );
    assert_eq!(
        overview.failed_pauses_last_hour, 0,
        "an operator's pause is no failure"
    );
    assert_eq!(overview.failures_last_hour(), 1);
    let minute = |m: &pgbus_runtime::MinuteCounts| (m.finished, m.cancelled, m.paused);
    assert_eq!(
        overview.minutes.iter().map(minute).collect::<Vec<_>>(),
        vec![(0, 1, 1)]
    );

    clocked.advance(Duration::from_hours(1));
    let later = store.overview().await.expect("an overview");
    assert!(later.minutes.is_empty(), "{:?}", later.minutes);
    assert_eq!(later.pauses_last_hour, 0);
    assert_eq!(later.queues[0].oldest_due_ms(later.at), Some(3_690_000));
}

both_stores!(
    lists_filter_and_page_alike,
    counts_and_names_read_alike,
    the_overview_reads_now_and_the_last_hour,
);
