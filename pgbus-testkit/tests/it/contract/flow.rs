//! Flow control (issue 21): both stores' claims keep every concurrency
//! limit strictly (per key, per workflow, per queue), hold a row back
//! without blocking the rows behind it, wake it when a slot is given back,
//! hold a run's slot across its steps with `slot = "run"` until it ends or
//! pauses; the rate scenarios are in `flow_rates`.
//!
//! The definitions are written here with `flow` set, on the steps of
//! workflows the macro compiled (the scenarios drive the store through the
//! contract, running no body).

use std::collections::BTreeMap;

use pgbus_runtime::engine::{Action, AttemptResult, RunStatus, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Claim, Claimer, Registered, Registration, Store};
use pgbus_runtime::{FlowControl, RunRead, SlotHolder, StartOptions, StepView, WorkflowDefinition};

use super::{Clocked, Pinned, WORKER, memory};

/// Three steps on the queue `contract_flow`.
pub(super) struct Flowing;

#[workflow(name = "contract.flow", input = u8, queue = "contract_flow")]
impl Flowing {
    #[step]
    async fn one(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn three(&self, _cx: &mut StepCx<u8>) {}
}

/// Another workflow on the same queue, with no limit of its own.
pub(super) struct Other;

#[workflow(name = "contract.flow_other", input = u8, queue = "contract_flow")]
impl Other {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u8>) {}
}

/// `Flowing`'s definition with `flow` as given.
macro_rules! limited {
    ($name:ident, $flow:expr) => {
        pub(super) static $name: WorkflowDefinition = WorkflowDefinition {
            flow: $flow,
            ..*<Flowing as Workflow>::DEFINITION
        };
    };
}

limited!(
    KEY_ONE,
    FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        ..FlowControl::NONE
    }
);
limited!(
    KEY_THREE,
    FlowControl {
        has_key: true,
        key_concurrency: Some(3),
        ..FlowControl::NONE
    }
);
limited!(
    WORKFLOW_TWO,
    FlowControl {
        concurrency: Some(2),
        ..FlowControl::NONE
    }
);
limited!(
    WORKFLOW_THREE,
    FlowControl {
        concurrency: Some(3),
        ..FlowControl::NONE
    }
);
limited!(
    RUN_KEY_ONE,
    FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        slot: SlotHolder::Run,
        ..FlowControl::NONE
    }
);

pub(super) const QUEUE: &str = "contract_flow";

/// Registers `WORKER` with `definitions` and `queue_limits`.
pub(super) async fn register<S: Store>(
    store: &S,
    definitions: &[&'static WorkflowDefinition],
    queue_limits: &[(String, u32)],
) {
    let queues = vec![QUEUE.to_owned()];
    store
        .register_worker(&Registration {
            worker_id: WORKER,
            name: WORKER,
            host: "test",
            pid: 0,
            queues: &queues,
            concurrency: 8,
            definitions,
            queue_limits,
        })
        .await
        .expect("a registration");
}

/// Claims up to `limit` steps of `definitions` on the queue, for `WORKER`.
pub(super) async fn claim<S: Store>(
    store: &S,
    definitions: &[&'static WorkflowDefinition],
    limit: usize,
) -> Vec<Claim> {
    let registered = Registered::of(definitions.iter().copied());
    let queues = vec![QUEUE.to_owned()];
    let claimer = Claimer {
        worker_id: WORKER,
        queues: &queues,
        registered: &registered,
        stall_threshold_ms: 600_000,
    };
    store.claim(&claimer, limit).await.expect("a claim")
}

/// Completes `claim`'s attempt.
pub(super) async fn complete<S: Store>(
    store: &S,
    definition: &'static WorkflowDefinition,
    claim: &Claim,
) {
    store
        .end_attempt(
            definition,
            claim,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            None,
        )
        .await
        .expect("the outcome");
}

/// Starts a run of `definition`, with concurrency key `key` if given.
pub(super) async fn start<S: Store>(
    store: &S,
    definition: &'static WorkflowDefinition,
    key: Option<&str>,
) -> RunId {
    let options = key.map_or_else(StartOptions::new, |key| {
        StartOptions::new().concurrency_key(key)
    });
    let (run, _) = store
        .start_run(definition, &serde_json::json!(0), &options)
        .await
        .expect("a start");
    run
}

/// The run's latest step row.
pub(super) async fn latest<S: Store>(store: &S, run: RunId) -> StepView {
    let view = store.run(run, RunRead::default()).await.expect("the run");
    view.steps.last().cloned().expect("a row")
}

async fn status<S: Store>(store: &S, run: RunId) -> RunStatus {
    let view = store.run(run, RunRead::default()).await.expect("the run");
    view.run.status
}

/// Drives `per_key` runs of each of six keys through three steps each,
/// claiming eight at a time and completing the two oldest attempts between
/// claims: never more than `limit` attempts of a key in flight, the limit
/// reached, and every run finished.
async fn a_key_limit_is_strict_over_many_keys<S: Store>(
    store: &S,
    definition: &'static WorkflowDefinition,
    limit: usize,
) {
    register(store, &[definition], &[]).await;
    let mut keys = BTreeMap::new();
    for i in 0..24 {
        let key = format!("k{}", i % 6);
        let run = start(store, definition, Some(&key)).await;
        keys.insert(run, key);
    }
    let mut in_flight: Vec<Claim> = Vec::new();
    let mut most = 0;
    for _ in 0..500 {
        let claimed = claim(store, &[definition], 8).await;
        let idle = claimed.is_empty() && in_flight.is_empty();
        in_flight.extend(claimed);
        let mut per_key: BTreeMap<&str, usize> = BTreeMap::new();
        for claim in &in_flight {
            *per_key.entry(keys[&claim.run_id].as_str()).or_default() += 1;
        }
        let top = per_key.values().copied().max().unwrap_or(0);
        assert!(
            top <= limit,
            "{top} attempts of one key in flight: {per_key:?}"
        );
        most = most.max(top);
        if idle {
            break;
        }
        for claim in in_flight.drain(..in_flight.len().min(2)) {
            complete(store, definition, &claim).await;
        }
    }
    assert_eq!(most, limit, "the limit is reached, not only kept");
    for run in keys.keys() {
        assert_eq!(status(store, *run).await, RunStatus::Finished, "run {run}");
    }
    let view = store
        .run(*keys.keys().next().expect("a run"), RunRead::default())
        .await
        .expect("the run");
    assert_eq!(view.concurrency_key.as_deref(), Some("k0"));
}

async fn a_key_limit_of_one_is_strict<C: Clocked>(clocked: C) {
    a_key_limit_is_strict_over_many_keys(clocked.store(), &KEY_ONE, 1).await;
}

async fn a_key_limit_of_three_is_strict<C: Clocked>(clocked: C) {
    a_key_limit_is_strict_over_many_keys(clocked.store(), &KEY_THREE, 3).await;
}

/// `concurrency = 2`: two steps of the workflow in progress, the others
/// held back (`held_by`, still `scheduled`), one let go per step ended.
async fn a_workflow_limit_holds_the_rest<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let def = &WORKFLOW_TWO;
    register(store, &[def], &[]).await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(start(store, def, None).await);
    }
    let claimed = claim(store, &[def], 8).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, runs[..2]);
    for run in &runs[2..] {
        let row = latest(store, *run).await;
        assert_eq!(row.held_by.as_deref(), Some("workflow:contract.flow"));
        assert_eq!(row.status, pgbus_runtime::StepStatus::Scheduled);
    }
    assert!(claim(store, &[def], 8).await.is_empty(), "all held");
    complete(store, def, &claimed[0]).await;
    // One slot free: the oldest held row is let go; the run's own next
    // step and the other held row wait their turn.
    assert_eq!(latest(store, runs[2]).await.held_by, None);
    assert!(latest(store, runs[3]).await.held_by.is_some());
    let next = claim(store, &[def], 8).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].run_id, runs[2]);
    assert_eq!(
        latest(store, runs[0]).await.held_by.as_deref(),
        Some("workflow:contract.flow"),
        "the finished step's next one is held in turn"
    );
}

/// A queue limit counts the steps of every workflow on the queue.
async fn a_queue_limit_counts_every_workflow<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let defs = [Flowing::DEFINITION, Other::DEFINITION];
    register(store, &defs, &[(QUEUE.to_owned(), 2)]).await;
    let flowing = start(store, Flowing::DEFINITION, None).await;
    let first = start(store, Other::DEFINITION, None).await;
    let second = start(store, Other::DEFINITION, None).await;
    let claimed = claim(store, &defs, 8).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [flowing, first]);
    assert_eq!(
        latest(store, second).await.held_by.as_deref(),
        Some("queue:contract_flow")
    );
    complete(store, Other::DEFINITION, &claimed[1]).await;
    let next = claim(store, &defs, 8).await;
    let ids: Vec<RunId> = next.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [second]);
    // A worker that declares no queue limit leaves it in force.
    register(store, &defs, &[]).await;
    complete(store, Other::DEFINITION, &next[0]).await;
    let third = start(store, Other::DEFINITION, None).await;
    let fourth = start(store, Other::DEFINITION, None).await;
    let ids: Vec<RunId> = claim(store, &defs, 8)
        .await
        .iter()
        .map(|c| c.run_id)
        .collect();
    assert_eq!(ids, [third], "`flowing` holds one slot, `third` the other");
    assert!(latest(store, fourth).await.held_by.is_some());
}

/// Rows held back leave the claim's way: the rows behind them (another
/// key, another workflow) are claimed in the same call.
async fn a_held_row_blocks_nothing_behind_it<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let defs: [&'static WorkflowDefinition; 2] = [&KEY_ONE, Other::DEFINITION];
    register(store, &defs, &[]).await;
    let mut a = Vec::new();
    for _ in 0..3 {
        a.push(start(store, &KEY_ONE, Some("a")).await);
    }
    let b = start(store, &KEY_ONE, Some("b")).await;
    let other = start(store, Other::DEFINITION, None).await;
    let claimed = claim(store, &defs, 3).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [a[0], b, other]);
    for run in &a[1..] {
        assert_eq!(
            latest(store, *run).await.held_by.as_deref(),
            Some("key:contract.flow:a")
        );
    }
}

/// `slot = "run"`: the run's first claimed step takes the key's slot and
/// the run keeps it across its steps; it gives it back when it finishes,
/// is cancelled or pauses (a step still running holding it until it ends),
/// each time waking the next run's held row; a run resumed from a pause
/// takes one again through its claim.
async fn a_run_slot_is_held_across_steps<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let def = &RUN_KEY_ONE;
    register(store, &[def], &[]).await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(start(store, def, Some("k")).await);
    }
    // Run 0 runs its three steps; run 1 stays held throughout.
    for step in ["one", "two", "three"] {
        let claimed = claim(store, &[def], 8).await;
        assert_eq!(claimed.len(), 1, "{step}");
        assert_eq!(
            (claimed[0].run_id, claimed[0].step_name.as_str()),
            (runs[0], step)
        );
        assert!(latest(store, runs[1]).await.held_by.is_some(), "{step}");
        complete(store, def, &claimed[0]).await;
    }
    // Finished: run 1 is let go and takes the slot.
    assert_eq!(status(store, runs[0]).await, RunStatus::Finished);
    let claimed = claim(store, &[def], 8).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].run_id, runs[1]);
    complete(store, def, &claimed[0]).await;
    let claimed = claim(store, &[def], 8).await;
    assert_eq!(claimed.len(), 1, "run 1 holds the slot between steps");
    assert_eq!(
        (claimed[0].run_id, claimed[0].step_name.as_str()),
        (runs[1], "two")
    );
    // Cancelled with its step running: run 2 is let go.
    store
        .act(runs[1], Action::Cancel, "ops", "enough")
        .await
        .expect("a cancel");
    let claimed = claim(store, &[def], 8).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].run_id, runs[2]);
    // Paused with its step still running: the step keeps the slot until it
    // ends; then run 3 is let go, and run 2, resumed, waits for the slot
    // again.
    store
        .act(runs[2], Action::Pause, "ops", "look")
        .await
        .expect("a pause");
    assert!(
        claim(store, &[def], 8).await.is_empty(),
        "run 2's step runs"
    );
    complete(store, def, &claimed[0]).await;
    let third = claim(store, &[def], 8).await;
    assert_eq!(third.len(), 1);
    assert_eq!(third[0].run_id, runs[3]);
    store
        .act(runs[2], Action::Resume, "ops", "go on")
        .await
        .expect("a resume");
    assert!(claim(store, &[def], 8).await.is_empty());
    assert_eq!(
        latest(store, runs[2]).await.held_by.as_deref(),
        Some("key:contract.flow:k")
    );
    // Run 3 pauses between steps: its slot goes back, run 2 takes it.
    complete(store, def, &third[0]).await;
    store
        .act(runs[3], Action::Pause, "ops", "look")
        .await
        .expect("a pause");
    let claimed = claim(store, &[def], 8).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(
        (claimed[0].run_id, claimed[0].step_name.as_str()),
        (runs[2], "two")
    );
    // Resumed, run 3's row is decided again: held.
    store
        .act(runs[3], Action::Resume, "ops", "go on")
        .await
        .expect("a resume");
    assert!(claim(store, &[def], 8).await.is_empty());
    assert!(latest(store, runs[3]).await.held_by.is_some());
}

/// A row held while its run is paused stays held on release; resumed, it
/// is let go for its claim to decide.
async fn a_paused_runs_held_row_waits_for_its_resume<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let def = &KEY_ONE;
    register(store, &[def], &[]).await;
    let first = start(store, def, Some("k")).await;
    let second = start(store, def, Some("k")).await;
    let claimed = claim(store, &[def], 8).await;
    assert_eq!(claimed.len(), 1);
    assert!(latest(store, second).await.held_by.is_some());
    store
        .act(second, Action::Pause, "ops", "look")
        .await
        .expect("a pause");
    complete(store, def, &claimed[0]).await;
    assert!(
        latest(store, second).await.held_by.is_some(),
        "a paused run's row is not woken"
    );
    let next = claim(store, &[def], 8).await;
    assert_eq!(next.len(), 1);
    assert_eq!((next[0].run_id, next[0].step_name.as_str()), (first, "two"));
    store
        .act(second, Action::Resume, "ops", "go on")
        .await
        .expect("a resume");
    assert_eq!(
        latest(store, second).await.held_by,
        None,
        "let go on resume"
    );
    assert!(
        claim(store, &[def], 8).await.is_empty(),
        "decided again: held"
    );
    assert!(latest(store, second).await.held_by.is_some());
}

/// A limit changed at registration lets go of the rows its workflow held
/// back, for the claim to decide again under the new limit; a held row that
/// leaves the queue (its run cancelled) is held no more.
async fn a_changed_limit_lets_held_rows_go<C: Clocked>(clocked: C) {
    let store = clocked.store();
    register(store, &[&WORKFLOW_TWO], &[]).await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        runs.push(start(store, &WORKFLOW_TWO, None).await);
    }
    assert_eq!(claim(store, &[&WORKFLOW_TWO], 8).await.len(), 2);
    register(store, &[&WORKFLOW_THREE], &[]).await;
    assert_eq!(latest(store, runs[2]).await.held_by, None, "let go");
    assert_eq!(latest(store, runs[3]).await.held_by, None, "let go");
    let claimed = claim(store, &[&WORKFLOW_THREE], 8).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [runs[2]], "three in flight under the new limit");
    assert!(latest(store, runs[3]).await.held_by.is_some());
    store
        .act(runs[3], Action::Cancel, "ops", "enough")
        .await
        .expect("a cancel");
    let row = latest(store, runs[3]).await;
    assert_eq!(
        (row.status, row.held_by),
        (pgbus_runtime::StepStatus::Cancelled, None)
    );
}

/// A deploy that turns `slot = "run"` into `"step"` while a run holds the
/// key's slot: that run's next step is its own slot (the run counts once),
/// so it goes on and the others wait for it to end, rather than the run
/// being held back behind itself for good.
async fn a_run_holding_its_slot_goes_on_when_the_slot_becomes_a_step<C: Clocked>(clocked: C) {
    let store = clocked.store();
    register(store, &[&RUN_KEY_ONE], &[]).await;
    let first = start(store, &RUN_KEY_ONE, Some("k")).await;
    let second = start(store, &RUN_KEY_ONE, Some("k")).await;
    let claimed = claim(store, &[&RUN_KEY_ONE], 8).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].run_id, first);
    complete(store, &RUN_KEY_ONE, &claimed[0]).await;
    register(store, &[&KEY_ONE], &[]).await;
    let claimed = claim(store, &[&KEY_ONE], 8).await;
    let got: Vec<(RunId, &str)> = claimed
        .iter()
        .map(|c| (c.run_id, c.step_name.as_str()))
        .collect();
    assert_eq!(got, [(first, "two")], "the run holding the key goes on");
    assert!(latest(store, second).await.held_by.is_some());
}

/// A row a release let go but whose run leaves before a claim takes it
/// (cancelled, or paused) took no slot: the slot it was woken for goes to
/// the next held row, which would otherwise wait with the key's slots free
/// and nothing left in progress to release one.
async fn a_woken_rows_run_leaving_wakes_the_next<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let def = &KEY_ONE;
    register(store, &[def], &[]).await;
    let first = start(store, def, Some("k")).await;
    let second = start(store, def, Some("k")).await;
    let third = start(store, def, Some("k")).await;
    let fourth = start(store, def, Some("k")).await;
    let claimed = claim(store, &[def], 8).await;
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].run_id, first);
    store
        .act(first, Action::Cancel, "ops", "enough")
        .await
        .expect("a cancel");
    assert_eq!(latest(store, second).await.held_by, None, "woken");
    store
        .act(second, Action::Cancel, "ops", "enough")
        .await
        .expect("a cancel");
    assert_eq!(
        latest(store, third).await.held_by,
        None,
        "the slot second never took goes to third"
    );
    store
        .act(third, Action::Pause, "ops", "look")
        .await
        .expect("a pause");
    assert_eq!(
        latest(store, fourth).await.held_by,
        None,
        "the slot a paused run's woken row never took goes to fourth"
    );
    let claimed = claim(store, &[def], 8).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [fourth]);
}

/// A row let go for a free slot whose run then passes its deadline: the
/// claim starts no step of it, and the sweep's cancel hands the slot on.
async fn a_woken_row_past_its_deadline_hands_the_slot_on<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let def = &KEY_ONE;
    register(store, &[def], &[]).await;
    let first = start(store, def, Some("k")).await;
    let options = StartOptions::new()
        .concurrency_key("k")
        .deadline_after(std::time::Duration::from_mins(10));
    let (late, _) = store
        .start_run(def, &serde_json::json!(0), &options)
        .await
        .expect("a start");
    let third = start(store, def, Some("k")).await;
    assert_eq!(claim(store, &[def], 8).await.len(), 1);
    store
        .act(first, Action::Cancel, "ops", "enough")
        .await
        .expect("a cancel");
    assert_eq!(latest(store, late).await.held_by, None, "woken");
    clocked.advance(std::time::Duration::from_mins(11));
    assert!(
        claim(store, &[def], 8).await.is_empty(),
        "past its deadline"
    );
    assert!(latest(store, third).await.held_by.is_some());
    store.expire_deadlines(10).await.expect("the pass");
    assert_eq!(status(store, late).await, RunStatus::Cancelled);
    let claimed = claim(store, &[def], 8).await;
    let ids: Vec<RunId> = claimed.iter().map(|c| c.run_id).collect();
    assert_eq!(ids, [third]);
}

both_stores!(
    a_changed_limit_lets_held_rows_go,
    a_key_limit_of_one_is_strict,
    a_key_limit_of_three_is_strict,
    a_workflow_limit_holds_the_rest,
    a_queue_limit_counts_every_workflow,
    a_held_row_blocks_nothing_behind_it,
    a_run_slot_is_held_across_steps,
    a_paused_runs_held_row_waits_for_its_resume,
    a_run_holding_its_slot_goes_on_when_the_slot_becomes_a_step,
    a_woken_rows_run_leaving_wakes_the_next,
    a_woken_row_past_its_deadline_hands_the_slot_on,
);
