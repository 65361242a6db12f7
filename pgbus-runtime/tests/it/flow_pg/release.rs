//! Slots given back: a run-held slot across steps, every path that wakes a
//! held row, and the eager handoff that never bypasses a limit.

use pgbus_runtime::engine::{AttemptResult, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Ended, Handoff, Store};
use pgbus_runtime::{FlowControl, RunId, RunStatus, SlotHolder, StepStatus};

use super::{Job, Steps, claim, end, held_by, job_key, limited, register, runs_of, start};
use crate::pg::TestDb;

limited!(
    RunSlot(Steps),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        slot: SlotHolder::Run,
        ..FlowControl::NONE
    },
    key: job_key,
);

limited!(
    KeyedOne(Steps),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    },
    key: job_key,
);

const HELD: Option<&str> = Some("key:flow.steps:k");

/// Whether `run` holds a slot as a run.
async fn holds_as_run(t: &TestDb, run: RunId) -> bool {
    t.query(
        "SELECT slot_held FROM {schema}.runs WHERE id = $1",
        &[&run.0],
    )
    .await[0]
        .get(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // one run's slot through each way it ends
async fn a_run_slot_is_held_across_steps_given_back_on_pause_cancel_and_finish_and_retaken() {
    let t = TestDb::new().await;
    let (store, client) = (t.db.store(), t.client());
    let defs = [RunSlot::DEFINITION];
    register(&t, "w1", &defs, &[]).await;
    let a = start::<RunSlot>(&t, "k").await;
    let b = start::<RunSlot>(&t, "k").await;

    // A's first step takes the key's slot for the run; B is held back.
    let first = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&first), [a]);
    assert!(holds_as_run(&t, a).await);
    assert_eq!(held_by(&t, b).await.as_deref(), HELD);

    // Between A's steps the run keeps its slot: B stays held, and A's next
    // step is admitted although the key is at its limit (the slot is A's).
    end(&store, RunSlot::DEFINITION, &first[0], "w1", Verb::Complete).await;
    assert!(holds_as_run(&t, a).await);
    assert_eq!(held_by(&t, b).await.as_deref(), HELD);
    let second = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&second), [a]);
    assert_eq!(second[0].step_name, "two");
    end(
        &store,
        RunSlot::DEFINITION,
        &second[0],
        "w1",
        Verb::Complete,
    )
    .await;
    assert_eq!(held_by(&t, b).await.as_deref(), HELD);

    // A pause gives the slot back: B is woken and takes it.
    client.pause(a, "ops", "hold").await.expect("pause");
    assert!(!holds_as_run(&t, a).await);
    assert_eq!(held_by(&t, b).await, None);
    let b_first = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&b_first), [b]);

    // Resumed, A must take a slot again: held while B has it.
    client.resume(a, "ops", "go on").await.expect("resume");
    assert!(claim(&store, "w1", &defs, 4).await.is_empty());
    assert_eq!(held_by(&t, a).await.as_deref(), HELD);

    // B cancelled (its step in progress): A is woken, claimed, and takes the
    // run slot again.
    client.cancel(b, "ops", "enough").await.expect("cancel");
    assert!(!holds_as_run(&t, b).await);
    assert_eq!(held_by(&t, a).await, None);
    let third = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&third), [a]);
    assert_eq!(third[0].step_name, "three");
    assert!(holds_as_run(&t, a).await);

    // A finishes: its slot is free for a new run of the key.
    let c = start::<RunSlot>(&t, "k").await;
    assert!(claim(&store, "w1", &defs, 4).await.is_empty());
    assert_eq!(held_by(&t, c).await.as_deref(), HELD);
    end(&store, RunSlot::DEFINITION, &third[0], "w1", Verb::Complete).await;
    assert_eq!(t.run(a).await.run.status, RunStatus::Finished);
    assert!(!holds_as_run(&t, a).await);
    assert_eq!(runs_of(&claim(&store, "w1", &defs, 4).await), [c]);
}

/// A step waiting for signal `go` first, keyed, one run per key at a time.
struct Waits;

#[workflow(name = "flow.waits", input = Job)]
impl Waits {
    #[step(wait_for = "go")]
    async fn first(&self, _cx: &mut StepCx<Job>) {}

    #[step]
    async fn second(&self, _cx: &mut StepCx<Job>) {}
}

limited!(
    KeyedWaits(Waits),
    flow: FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    },
    key: job_key,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::many_single_char_names)] // runs a to e, as the prose names them
async fn a_held_row_is_woken_by_every_path_that_gives_a_slot_back() {
    let t = TestDb::new().await;
    let (store, client) = (t.db.store(), t.client());
    let defs = [KeyedOne::DEFINITION, KeyedWaits::DEFINITION];
    register(&t, "w1", &defs, &[]).await;

    // An outcome.
    let a = start::<KeyedOne>(&t, "k").await;
    let b = start::<KeyedOne>(&t, "k").await;
    let claimed = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&claimed), [a]);
    assert_eq!(held_by(&t, b).await.as_deref(), HELD);
    end(
        &store,
        KeyedOne::DEFINITION,
        &claimed[0],
        "w1",
        Verb::Complete,
    )
    .await;
    assert_eq!(held_by(&t, b).await, None, "woken by the outcome");

    // An operator's cancel of the run in progress.
    let claimed = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&claimed), [b], "B is older than A's next step");
    assert_eq!(held_by(&t, a).await.as_deref(), HELD);
    client.cancel(b, "ops", "stop").await.expect("cancel");
    assert_eq!(held_by(&t, a).await, None, "woken by the cancel");

    // The sweep of a stalled attempt (its worker gone).
    let lost = claim(&store, "gone", &defs, 4).await;
    assert_eq!(runs_of(&lost), [a]);
    let c = start::<KeyedOne>(&t, "k").await;
    assert!(claim(&store, "w1", &defs, 4).await.is_empty());
    assert_eq!(held_by(&t, c).await.as_deref(), HELD);
    let sweeper =
        t.db.worker()
            .register(KeyedOne(Steps))
            .register(KeyedWaits(Waits))
            .build()
            .expect("a worker");
    sweeper.sweep().await.expect("a sweep");
    assert_eq!(t.run(a).await.run.status, RunStatus::Paused);
    assert_eq!(held_by(&t, c).await, None, "woken by the sweep");

    // A park for a signal: the attempt waits, its slot given back.
    let d = start::<KeyedWaits>(&t, "k").await;
    let e = start::<KeyedWaits>(&t, "k").await;
    let worker =
        t.db.worker()
            .register(KeyedWaits(Waits))
            .concurrency(1)
            .build()
            .expect("a worker");
    assert_eq!(worker.run_once().await.expect("a claim"), 1);
    let view = t.run(d).await;
    assert_eq!(view.steps[0].status, StepStatus::Waiting);
    assert_eq!(held_by(&t, e).await, None, "woken by the park");
    // E's wait then parks too, and a signal to D wakes it behind its key.
    assert_eq!(worker.run_once().await.expect("a claim"), 1);
    client.signal(d, "go", &()).await.expect("a signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    assert_eq!(t.run(d).await.run.status, RunStatus::Finished);
}

limited!(
    Throttled(Steps),
    flow: FlowControl {
        rate_limit: Some(pgbus_runtime::Rate {
            count: 100,
            period_ms: 1_000,
        }),
        ..FlowControl::NONE
    },
    key: |_| None,
);

/// Ends `claim` as completed, offering a handoff on the default queue.
async fn end_offering_handoff(
    t: &TestDb,
    definition: &'static pgbus_runtime::WorkflowDefinition,
    claim: &pgbus_runtime::store::Claim,
) -> Ended {
    let queues = super::default_queue();
    t.db.store()
        .end_attempt(
            definition,
            claim,
            "w1",
            &AttemptResult::ok(Verb::Complete, None),
            false,
            Some(Handoff {
                queues: &queues,
                stall_threshold_ms: 60_000,
            }),
        )
        .await
        .expect("an outcome")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_workflow_or_queue_never_hands_its_next_step_on() {
    let t = TestDb::new().await;
    let store = t.db.store();

    // Unlimited: the next step is handed on (the control).
    register(&t, "w1", &[Steps::DEFINITION], &[]).await;
    let plain = start::<Steps>(&t, "k").await;
    let claimed = claim(&store, "w1", &[Steps::DEFINITION], 1).await;
    assert_eq!(runs_of(&claimed), [plain]);
    let ended = end_offering_handoff(&t, Steps::DEFINITION, &claimed[0]).await;
    let Ended::Continued(_, next) = ended else {
        panic!("handed on: {ended:?}");
    };

    // A queue limit another worker declared: through the claim.
    register(&t, "w2", &[], &[("default".to_owned(), 50)]).await;
    let ended = end_offering_handoff(&t, Steps::DEFINITION, &next).await;
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");

    // A workflow's limit, from its own definition: through the claim.
    register(&t, "w2", &[], &[]).await;
    t.execute("DELETE FROM {schema}.flow_limits", &[]).await;
    for (definition, key) in [(KeyedOne::DEFINITION, "a"), (Throttled::DEFINITION, "b")] {
        register(&t, "w1", &[definition], &[]).await;
        let run = start::<KeyedOne>(&t, key).await;
        let ended = end_own_claim(&t, definition, run).await;
        assert!(matches!(ended, Ended::Applied(_)), "{key}: {ended:?}");
    }

    // Limits another version of the workflow registered, which the ending
    // worker's own definition lacks: through the claim too.
    register(&t, "w1", &[Steps::DEFINITION], &[]).await;
    let run = start::<KeyedOne>(&t, "c").await;
    let claimed: Vec<_> = claim(&store, "w1", &[Steps::DEFINITION], 10)
        .await
        .into_iter()
        .filter(|c| c.run_id == run)
        .collect();
    register(&t, "w3", &[KeyedOne::DEFINITION], &[]).await;
    let ended = end_offering_handoff(&t, Steps::DEFINITION, &claimed[0]).await;
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
}

/// Claims `run`'s due step with `definition` (other rows claimed with it are
/// left in progress) and ends it offering a handoff.
async fn end_own_claim(
    t: &TestDb,
    definition: &'static pgbus_runtime::WorkflowDefinition,
    run: RunId,
) -> Ended {
    let claimed = claim(&t.db.store(), "w1", &[definition], 10).await;
    let own = claimed
        .iter()
        .find(|c| c.run_id == run)
        .expect("the run's step claimed");
    end_offering_handoff(t, definition, own).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_runs_held_row_is_passed_over_by_a_release_and_freed_by_its_resume() {
    let t = TestDb::new().await;
    let (store, client) = (t.db.store(), t.client());
    let defs = [KeyedOne::DEFINITION];
    register(&t, "w1", &defs, &[]).await;
    let a = start::<KeyedOne>(&t, "k").await;
    let b = start::<KeyedOne>(&t, "k").await;
    let c = start::<KeyedOne>(&t, "k").await;
    let claimed = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&claimed), [a]);
    assert_eq!(held_by(&t, b).await.as_deref(), HELD);

    // B paused: the slot A gives back goes to C, the oldest held row of a
    // ready run.
    client.pause(b, "ops", "wait").await.expect("pause");
    end(
        &store,
        KeyedOne::DEFINITION,
        &claimed[0],
        "w1",
        Verb::Complete,
    )
    .await;
    assert_eq!(held_by(&t, b).await.as_deref(), HELD);
    assert_eq!(held_by(&t, c).await, None);

    // Resumed, B's row is freed for the next claim to decide, which admits
    // the oldest due row of the key (B's) and holds the others back again.
    client.resume(b, "ops", "go").await.expect("resume");
    assert_eq!(held_by(&t, b).await, None);
    let next = claim(&store, "w1", &defs, 4).await;
    assert_eq!(runs_of(&next), [b]);
    assert_eq!(held_by(&t, c).await.as_deref(), HELD);
    assert_eq!(held_by(&t, a).await.as_deref(), HELD, "A's next step");
}
