//! Per-verb contract tests of the store trait: each scenario is one generic
//! function over `Store`, run against the memory store and the Postgres store
//! alike. A future store runs the same functions.

use std::time::Duration;

use pgbus_runtime::engine::{AttemptResult, RunStatus, SignalCheck, StepStatus, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Claim, Ended, Handoff, Runner, Store};
use pgbus_runtime::{Clock, ManualClock, RunRead};
use pgbus_testkit::{MemoryStore, TestDatabase, default_start};

/// Two plain steps, the second due at once.
struct Pair;

#[workflow(name = "contract.pair", input = u8)]
impl Pair {
    #[step]
    async fn first(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn second(&self, _cx: &mut StepCx<u8>) {}
}

/// A store and its clock.
trait Clocked {
    type S: Store + Clone;
    fn store(&self) -> &Self::S;
    fn advance(&self, by: Duration);
    /// Worker `id` is gone: its heartbeat stopped now (memory), or its row
    /// was removed (Postgres).
    async fn worker_died(&self, id: &str);
    /// What the registry holds for worker `id`, by workflow.
    async fn registered(&self, id: &str) -> Vec<pgbus_runtime::RegisteredWorkflow>;
}

impl Clocked for MemoryStore {
    type S = Self;
    fn store(&self) -> &Self {
        self
    }
    fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).expect("a short duration");
        self.set_now(self.now() + by);
    }
    async fn worker_died(&self, id: &str) {
        Self::worker_died(self, id);
    }
    async fn registered(&self, id: &str) -> Vec<pgbus_runtime::RegisteredWorkflow> {
        Self::registered(self, id).unwrap_or_default()
    }
}

/// The Postgres store on a pinned clock, and the schema it lives in.
struct Pinned {
    store: pgbus_runtime::store::PgStore,
    clock: ManualClock,
    db: TestDatabase,
}

impl Pinned {
    async fn new() -> Self {
        let clock = ManualClock::new(default_start());
        let db = TestDatabase::with_clock(Clock::Manual(clock.clone()))
            .await
            .expect("a test schema");
        // A live worker row for the claims' worker id: the Postgres store
        // takes an attempt whose worker has no row for lost (the memory
        // store knows no workers but the crashed ones).
        let client = db.db().pool().get().await.expect("a connection");
        client
            .execute(
                &format!(
                    "INSERT INTO {}.workers (id, host, pid, queues, started_at, heartbeat_at) \
                     VALUES ($1, 'test', 0, ARRAY[]::text[], $2, $2)",
                    db.db().schema().as_str()
                ),
                &[&WORKER, &default_start()],
            )
            .await
            .expect("a worker row");
        drop(client);
        Self {
            store: db.db().store(),
            clock,
            db,
        }
    }
}

impl Clocked for Pinned {
    type S = pgbus_runtime::store::PgStore;
    fn store(&self) -> &Self::S {
        &self.store
    }
    fn advance(&self, by: Duration) {
        self.clock.advance(by);
    }
    async fn worker_died(&self, id: &str) {
        let client = self.db.db().pool().get().await.expect("a connection");
        client
            .execute(
                &format!(
                    "DELETE FROM {}.workers WHERE id = $1",
                    self.db.db().schema().as_str()
                ),
                &[&id],
            )
            .await
            .expect("a removed worker row");
    }
    async fn registered(&self, id: &str) -> Vec<pgbus_runtime::RegisteredWorkflow> {
        let workers = self
            .db
            .db()
            .client()
            .workers(Duration::from_secs(30), 100)
            .await
            .expect("the workers");
        workers
            .into_iter()
            .find(|worker| worker.id == id)
            .map(|worker| worker.workflows)
            .unwrap_or_default()
    }
}

fn memory() -> MemoryStore {
    MemoryStore::starting_at(default_start())
}

const WORKER: &str = "contract-worker";

fn queues() -> Vec<String> {
    vec![Pair::DEFINITION.queue.to_owned()]
}

async fn claim_one<S: Store>(runner: &Runner<S>) -> Option<Claim> {
    runner.claim(&queues(), 1).await.expect("the claim").pop()
}

fn runner<S: Store>(store: S) -> Runner<S> {
    Runner::new(store, WORKER).register(Pair)
}

/// Start, claim, complete: the next step is scheduled, due at once; the run
/// is `ready` again; the claim takes the next step.
async fn claim_then_complete<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = runner(store.clone());
    let (run, created) = store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(1),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    assert!(created);
    let claim = claim_one(&runner).await.expect("the first step is due");
    assert_eq!(
        (claim.run_id, claim.step_name.as_str(), claim.attempt),
        (run, "first", 1)
    );
    assert_eq!(claim.input, serde_json::json!(1));
    assert!(claim_one(&runner).await.is_none(), "one attempt, one claim");
    let view = store.run(run, RunRead::default()).await.expect("the run");
    assert_eq!(view.run.status, RunStatus::Performing);

    let done = AttemptResult::ok(Verb::Complete, Some(serde_json::json!("one")));
    let ended = store
        .end_attempt(Pair::DEFINITION, &claim, WORKER, &done, false, None)
        .await
        .expect("the outcome");
    let Ended::Applied(plan) = ended else {
        panic!("applied, not {ended:?}");
    };
    assert_eq!(plan.run_status, RunStatus::Ready);
    let next = claim_one(&runner)
        .await
        .expect("the second step is due at once");
    assert_eq!(next.step_name, "second");
    assert_eq!(next.outputs.get("first"), Some(&serde_json::json!("one")));
}

/// An outcome a lost claim records changes nothing: late.
async fn a_lost_fence_is_late<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = runner(store.clone());
    store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(2),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let claim = claim_one(&runner).await.expect("due");
    let done = AttemptResult::ok(Verb::Complete, None);
    let ended = store
        .end_attempt(Pair::DEFINITION, &claim, "someone-else", &done, false, None)
        .await
        .expect("the outcome");
    assert!(matches!(ended, Ended::Late), "{ended:?}");
    let view = store
        .run(claim.run_id, RunRead::default())
        .await
        .expect("the run");
    assert_eq!(
        view.steps.last().map(|s| s.status),
        Some(StepStatus::InProgress)
    );
}

/// With a handoff, the next step comes back claimed for the same worker, the
/// run `performing`, and no claim takes it again.
async fn a_handoff_claims_the_next_step<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = runner(store.clone());
    store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(3),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let claim = claim_one(&runner).await.expect("due");
    let queues = queues();
    let handoff = Handoff {
        queues: &queues,
        stall_threshold_ms: 60_000,
    };
    let done = AttemptResult::ok(Verb::Complete, Some(serde_json::json!("kept")));
    let ended = store
        .end_attempt(
            Pair::DEFINITION,
            &claim,
            WORKER,
            &done,
            false,
            Some(handoff),
        )
        .await
        .expect("the outcome");
    let Ended::Continued(_, next) = ended else {
        panic!("continued, not {ended:?}");
    };
    assert_eq!(next.step_name, "second");
    assert_eq!(next.outputs.get("first"), Some(&serde_json::json!("kept")));
    assert!(claim_one(&runner).await.is_none(), "handed on, not queued");
    let view = store
        .run(claim.run_id, RunRead::default())
        .await
        .expect("the run");
    assert_eq!(view.run.status, RunStatus::Performing);
    let started = view
        .events
        .iter()
        .filter(|e| e.event == "step_started")
        .count();
    assert_eq!(
        started, 2,
        "the handoff writes the step_started a claim writes"
    );
    // A retried outcome never hands on.
    let finish = AttemptResult::ok(Verb::Complete, None);
    let ended = store
        .end_attempt(
            Pair::DEFINITION,
            &next,
            WORKER,
            &finish,
            true,
            Some(handoff),
        )
        .await
        .expect("the outcome");
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
}

/// Past its stall horizon an attempt is stalled (`timeout`); the sweep ends
/// it, and the body's own outcome after that is late.
async fn a_stalled_attempt_is_swept<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = runner(store.clone()).stall_threshold_ms(1_000);
    store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(4),
            &pgbus_runtime::StartOptions::new(),
        )
        .await
        .expect("a start");
    let claim = claim_one(&runner).await.expect("due");
    assert!(store.stalled(60_000, 10).await.expect("stalled").is_empty());
    clocked.advance(Duration::from_secs(2));
    let stalled = store.stalled(60_000, 10).await.expect("stalled");
    assert_eq!(stalled.len(), 1);
    assert_eq!(
        (
            stalled[0].claim.step_id,
            stalled[0].worker_id.as_str(),
            stalled[0].detection.as_str()
        ),
        (claim.step_id, WORKER, "timeout")
    );
    let result = pgbus_runtime::engine::stalled_result(
        pgbus_runtime::StallAction::Pause,
        true,
        &claim.step_name,
        claim.attempt,
        claim.reattempts,
        "timeout",
    );
    let swept = store
        .sweep_attempt(Pair::DEFINITION, &stalled[0], &result)
        .await
        .expect("the sweep");
    assert!(matches!(swept, Ended::Applied(_)), "{swept:?}");
    let again = store
        .sweep_attempt(Pair::DEFINITION, &stalled[0], &result)
        .await
        .expect("the sweep again");
    assert!(
        matches!(again, Ended::Late),
        "a second sweep leaves it alone"
    );
    let late = store
        .end_attempt(
            Pair::DEFINITION,
            &claim,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            None,
        )
        .await
        .expect("the outcome");
    assert!(matches!(late, Ended::Late), "{late:?}");
    let view = store
        .run(claim.run_id, RunRead::default())
        .await
        .expect("the run");
    assert_eq!(view.run.status, RunStatus::Paused);
    let kinds: Vec<&str> = view.events.iter().map(|e| e.event.as_str()).collect();
    assert!(kinds.contains(&"stall_detected"), "{kinds:?}");
    assert!(kinds.contains(&"late_completion_ignored"), "{kinds:?}");
}

/// Checks belong to the verb: a bad key, actor or payload is refused by the
/// store itself, and an unknown run is `RunNotFound`.
async fn the_verbs_check_their_input<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let blank = store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(5),
            &pgbus_runtime::StartOptions::new().key(" "),
        )
        .await;
    assert!(
        matches!(blank, Err(pgbus_runtime::Error::BlankIdempotencyKey)),
        "{blank:?}"
    );
    let (run, _) = store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(5),
            &pgbus_runtime::StartOptions::new().key("k"),
        )
        .await
        .expect("a start");
    let (again, created) = store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(6),
            &pgbus_runtime::StartOptions::new().key("k"),
        )
        .await
        .expect("a start");
    assert_eq!((again, created), (run, false));
    let actor = store
        .act(run, pgbus_runtime::Action::Pause, "", "why")
        .await;
    assert!(
        matches!(actor, Err(pgbus_runtime::Error::InvalidActor)),
        "{actor:?}"
    );
    let paused = store
        .act(run, pgbus_runtime::Action::Pause, "ops", "why")
        .await
        .expect("a pause");
    assert_eq!(paused, RunStatus::Paused);
    let missing = store
        .act(RunId(i64::MAX), pgbus_runtime::Action::Pause, "ops", "why")
        .await;
    assert!(
        matches!(missing, Err(pgbus_runtime::Error::RunNotFound { .. })),
        "{missing:?}"
    );
    let bad = store
        .signal(run, "", &serde_json::json!(null), SignalCheck::Waited)
        .await;
    assert!(
        matches!(bad, Err(pgbus_runtime::Error::InvalidSignal { .. })),
        "{bad:?}"
    );
}

/// Retention counts from when a run ended: a run that started two hours
/// ago and ended just now stays under a retention of one hour, and goes
/// with its rows once it has been over for more than that; a run still
/// going stays whatever its age.
async fn retention_counts_from_when_a_run_ended<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = runner(store.clone());
    let options = pgbus_runtime::StartOptions::new();
    let (ended, _) = store
        .start_run(Pair::DEFINITION, &serde_json::json!(1), &options)
        .await
        .expect("a start");
    clocked.advance(Duration::from_hours(2));
    let done = AttemptResult::ok(Verb::Complete, None);
    while let Some(claim) = claim_one(&runner).await {
        store
            .end_attempt(Pair::DEFINITION, &claim, WORKER, &done, false, None)
            .await
            .expect("the outcome");
    }
    let view = store.run(ended, RunRead::default()).await.expect("the run");
    assert_eq!(view.run.status, RunStatus::Finished);
    let (going, _) = store
        .start_run(Pair::DEFINITION, &serde_json::json!(2), &options)
        .await
        .expect("a start");
    let hour_ms = 3_600_000;
    assert_eq!(
        store
            .delete_expired_runs(hour_ms, 10)
            .await
            .expect("a pass"),
        0
    );
    clocked.advance(Duration::from_mins(61));
    assert_eq!(
        store
            .delete_expired_runs(hour_ms, 10)
            .await
            .expect("a pass"),
        1
    );
    assert!(store.run(ended, RunRead::default()).await.is_err(), "gone");
    assert!(store.run(going, RunRead::default()).await.is_ok(), "kept");
}

macro_rules! both_stores {
    ($($scenario:ident),* $(,)?) => {
        mod memory_store {
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario(super::memory()).await;
                }
            )*
        }
        mod postgres_store {
            $(
                #[tokio::test]
                async fn $scenario() {
                    super::$scenario(super::Pinned::new().await).await;
                }
            )*
        }
    };
}

both_stores!(
    claim_then_complete,
    a_lost_fence_is_late,
    a_handoff_claims_the_next_step,
    a_stalled_attempt_is_swept,
    the_verbs_check_their_input,
    retention_counts_from_when_a_run_ended,
);

// The registry's scenarios (issue 19), under the same macro.
mod registry;
mod unrunnable;
// Signals checked against the definitions (issue 19).
mod signals;
// Schedules (issue 20).
mod schedules;
// Start options and bulk starts (issue 20).
mod starts;
// A run's result (issue 20).
mod results;
// Run deadlines (issue 21).
mod deadlines;
// Flow control: concurrency and rate limits (issue 21).
mod flow;
mod flow_rates;
mod limits;
mod operator;
// Per-deployment overrides (issue 24).
mod overrides;
