//! The registry's contract scenarios (issue 19): a claim takes only what the
//! worker's definition has, `definition_changed`, and the sweep's grace rule.

use std::time::Duration;

use pgbus_runtime::RunRead;
use pgbus_runtime::engine::{AttemptResult, RunStatus, StepStatus, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Ended, Handoff, Runner, Store};

use super::{Clocked, Pair, Pinned, WORKER, memory};

/// Two versions of one workflow: the second adds `middle`.
struct GrowV1;

#[workflow(name = "contract.grow", input = u8)]
impl GrowV1 {
    #[step]
    async fn first(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn last(&self, _cx: &mut StepCx<u8>) {}
}

struct GrowV2;

#[workflow(name = "contract.grow", input = u8)]
impl GrowV2 {
    #[step]
    async fn first(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn middle(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn last(&self, _cx: &mut StepCx<u8>) {}
}

fn grow_queues() -> Vec<String> {
    vec![GrowV1::DEFINITION.queue.to_owned()]
}

/// Registers `worker` in the store's registry with `definitions`.
async fn register<S: Store>(
    store: &S,
    worker: &str,
    definitions: &[&'static pgbus_runtime::WorkflowDefinition],
) {
    let queues = grow_queues();
    store
        .register_worker(&pgbus_runtime::store::Registration {
            worker_id: worker,
            name: worker,
            host: "test",
            pid: 0,
            queues: &queues,
            concurrency: 1,
            definitions,
            queue_limits: &[],
        })
        .await
        .expect("a registration");
}

/// The events of `run`, as `kind:step`.
async fn event_lines<S: Store>(store: &S, run: RunId) -> Vec<String> {
    let view = store.run(run, RunRead::default()).await.expect("the run");
    view.events
        .iter()
        .map(|e| format!("{}:{}", e.event, e.step_name.as_deref().unwrap_or("-")))
        .collect()
}

/// A worker claims only steps its own definition has: a v1 worker passes
/// over a v2 run's `middle` at the head of the queue and takes the row
/// behind it (no head-of-line blocking), and its outcome does not hand
/// `middle` on to itself; a v2 worker takes `middle`.
async fn a_claim_takes_only_steps_its_definition_has<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let v1 = Runner::new(store.clone(), WORKER).register(GrowV1);
    let v2 = Runner::new(store.clone(), "v2-worker").register(GrowV2);
    let queues = grow_queues();
    let (run, _) = store
        .start_run(
            GrowV2::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let first = v1.claim(&queues, 1).await.expect("a claim").pop();
    let first = first.expect("v1 has `first`");
    let handoff = Handoff {
        queues: &queues,
        stall_threshold_ms: 60_000,
    };
    let ended = store
        .end_attempt(
            GrowV1::DEFINITION,
            &first,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            Some(handoff),
        )
        .await
        .expect("the outcome");
    assert!(
        matches!(ended, Ended::Applied(_)),
        "`middle` is not handed to a worker that lacks it: {ended:?}"
    );
    clocked.advance(Duration::from_secs(1));
    let (other, _) = store
        .start_run(
            GrowV2::DEFINITION,
            &serde_json::json!(2),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let taken = v1.claim(&queues, 5).await.expect("a claim");
    let taken: Vec<(RunId, &str)> = taken
        .iter()
        .map(|c| (c.run_id, c.step_name.as_str()))
        .collect();
    assert_eq!(
        taken,
        [(other, "first")],
        "`middle` waits, the row behind it is taken"
    );
    let middle = v2.claim(&queues, 5).await.expect("a claim");
    let middle: Vec<(RunId, &str)> = middle
        .iter()
        .map(|c| (c.run_id, c.step_name.as_str()))
        .collect();
    assert_eq!(middle, [(run, "middle")]);
}

/// A run driven by a worker of another digest records `definition_changed`
/// (old and new digest) once per change, before the claim's `step_started`,
/// and takes the new digest.
async fn a_changed_definition_is_recorded_once<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let v2 = Runner::new(store.clone(), WORKER).register(GrowV2);
    let queues = grow_queues();
    let (run, _) = store
        .start_run(
            GrowV1::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    for _ in 0..2 {
        let claim = v2.claim(&queues, 1).await.expect("a claim").pop();
        let claim = claim.expect("a due step");
        store
            .end_attempt(
                GrowV2::DEFINITION,
                &claim,
                WORKER,
                &AttemptResult::ok(Verb::Complete, None),
                false,
                None,
            )
            .await
            .expect("the outcome");
    }
    assert_eq!(
        event_lines(store, run).await[..5],
        [
            "started:-",
            "definition_changed:first",
            "step_started:first",
            "step_completed:first",
            "step_started:last",
        ]
    );
    let view = store.run(run, RunRead::default()).await.expect("the run");
    let changed: Vec<_> = view
        .events
        .iter()
        .filter(|e| e.event == pgbus_runtime::EventKind::DefinitionChanged)
        .collect();
    assert_eq!(changed.len(), 1, "once per change");
    assert_eq!(
        changed[0].details,
        Some(serde_json::json!({
            "old_digest": GrowV1::DEFINITION.digest,
            "new_digest": GrowV2::DEFINITION.digest,
        }))
    );
    assert_eq!(changed[0].actor, WORKER);
}

/// The grace rule: a due row whose step no live worker's definition holds
/// is found only once it has been due for longer than the grace, and paused
/// with `StepNotDefined`; not while a live worker has the step, and never a
/// row of a workflow no live worker registered.
#[allow(clippy::too_many_lines)] // one scenario, step by step
async fn the_grace_rule_pauses_only_what_no_live_worker_has<C: Clocked>(clocked: C) {
    const GRACE: i64 = 5 * 60_000;
    const LOST: i64 = 30_000;
    let store = clocked.store();
    register(store, WORKER, &[GrowV1::DEFINITION]).await;
    let v1 = Runner::new(store.clone(), WORKER).register(GrowV1);
    let queues = grow_queues();
    let (run, _) = store
        .start_run(
            GrowV2::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    // A workflow no live worker registered: its row waits, never paused.
    store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let first = v1.claim(&queues, 1).await.expect("a claim").pop();
    let first = first.expect("`first` is due");
    store
        .end_attempt(
            GrowV1::DEFINITION,
            &first,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            None,
        )
        .await
        .expect("the outcome");
    let found = store.undefined_steps(GRACE, LOST, 10).await.expect("read");
    assert!(found.is_empty(), "within the grace: {found:?}");

    clocked.advance(Duration::from_mins(6));
    register(store, WORKER, &[GrowV1::DEFINITION]).await; // a heartbeat
    let found = store.undefined_steps(GRACE, LOST, 10).await.expect("read");
    let names: Vec<(RunId, &str)> = found
        .iter()
        .map(|c| (c.run_id, c.step_name.as_str()))
        .collect();
    assert_eq!(names, [(run, "middle")]);
    let result = pgbus_runtime::engine::undefined_result("contract.grow", "middle");

    // A worker that has `middle` registers meanwhile: the fence holds it off.
    register(store, "v2-worker", &[GrowV2::DEFINITION]).await;
    let ended = store
        .pause_undefined(&found[0], &result, GRACE, LOST)
        .await
        .expect("the fence");
    assert!(matches!(ended, Ended::Late), "{ended:?}");
    assert!(
        store
            .undefined_steps(GRACE, LOST, 10)
            .await
            .expect("read")
            .is_empty()
    );

    // It goes away: `middle` is paused.
    clocked.worker_died("v2-worker").await;
    clocked.advance(Duration::from_mins(1));
    register(store, WORKER, &[GrowV1::DEFINITION]).await; // a heartbeat
    let found = store.undefined_steps(GRACE, LOST, 10).await.expect("read");
    assert_eq!(found.len(), 1);
    let ended = store
        .pause_undefined(&found[0], &result, GRACE, LOST)
        .await
        .expect("the pause");
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    let again = store
        .pause_undefined(&found[0], &result, GRACE, LOST)
        .await
        .expect("the fence");
    assert!(matches!(again, Ended::Late), "once");
    let view = store.run(run, RunRead::default()).await.expect("the run");
    assert_eq!(view.run.status, RunStatus::Paused);
    let middle = view.steps.last().expect("the middle row");
    assert_eq!(
        (middle.step_name.as_str(), middle.status),
        ("middle", StepStatus::Failed)
    );
    assert_eq!(
        middle.error_class.as_deref(),
        Some("pgbus_runtime::error::StepNotDefined")
    );
    assert_eq!(
        view.error_message.as_deref(),
        Some("workflow `contract.grow` has no step `middle`")
    );
    let events = event_lines(store, run).await;
    assert_eq!(
        events[events.len() - 2..],
        ["step_failed:middle", "paused:-"]
    );
    assert_eq!(view.events.last().map(|e| e.actor.as_str()), Some("sweep"));
}

both_stores!(
    a_claim_takes_only_steps_its_definition_has,
    a_changed_definition_is_recorded_once,
    the_grace_rule_pauses_only_what_no_live_worker_has,
);
