//! Run deadlines (issue 21), held to both stores: which deadline a start
//! writes, the claim and a handoff starting no step of a run past it, and
//! the sweep's pass cancelling (with the fan-out tree) or pausing the run
//! through the operator path, once.

use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_runtime::engine::{AttemptResult, RunStatus, StepStatus, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Attempted, Claim, Ended, Handoff, NewRun, Observe, Runner, Store};
use pgbus_runtime::{
    Action, DeadlineAction, Error, EventView, RunFilter, RunRead, RunView, StartOptions,
};
use pgbus_testkit::default_start;

use super::{Clocked, Pinned, WORKER, memory};

/// A parent that fans out two `Leaf` children, then wraps up.
struct Tree;

#[workflow(name = "contract.deadline_tree", input = u8)]
impl Tree {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<u8>, fan: &mut FanOut) -> StepResult {
        fan.start::<Leaf>(&1)?;
        fan.start::<Leaf>(&2)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn wrap(&self, _cx: &mut StepCx<u8>) {}
}

/// A child whose only step is due an hour after it starts.
struct Leaf;

#[workflow(name = "contract.deadline_leaf", input = u8)]
impl Leaf {
    #[step(wait = "1h")]
    async fn slow(&self, _cx: &mut StepCx<u8>) {}
}

/// Two steps, the second due at once.
struct Two;

#[workflow(name = "contract.deadline_two", input = u8)]
impl Two {
    #[step]
    async fn first(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait = "1h")]
    async fn second(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn third(&self, _cx: &mut StepCx<u8>) {}
}

with_deadline!(
    TreeIn10m,
    TREE_IN_10M,
    Tree,
    600_000,
    DeadlineAction::Cancel
);
with_deadline!(TwoPausing, TWO_PAUSING, Two, 600_000, DeadlineAction::Pause);
with_deadline!(TwoIn2h, TWO_IN_2H, Two, 7_200_000, DeadlineAction::Cancel);

/// An observer that keeps nothing.
struct Quiet;

impl Observe for Quiet {
    type Tracked = ();

    fn track(&self, _claim: &Claim) {}

    fn attempted(&self, _attempted: &Attempted<'_>) {}
}

fn queues() -> Vec<String> {
    vec![Tree::DEFINITION.queue.to_owned()]
}

/// Claims and runs the due steps one at a time, no handoff; how many ran.
async fn run_due<S: Store>(runner: &Runner<S>) -> usize {
    let stopping = AtomicBool::new(true);
    let mut ran = 0;
    while let Some(claim) = runner.claim(&queues(), 1).await.expect("a claim").pop() {
        ran += runner.run_claim(claim, (), &Quiet, 0, &stopping).await;
    }
    ran
}

fn at(minutes: i64) -> DateTime<Utc> {
    default_start() + chrono::Duration::minutes(minutes)
}

async fn view<S: Store>(store: &S, run: RunId) -> RunView {
    store.run(run, RunRead::default()).await.expect("the run")
}

/// The events of `kind`.
fn said<'v>(view: &'v RunView, kind: &str) -> Vec<&'v EventView> {
    view.events.iter().filter(|e| e.event == kind).collect()
}

/// A cancel deadline: nothing before it; past it the sweep's pass cancels the
/// parent after a `deadline_exceeded` event, and the cancel cascades to its
/// children; all of it by actor `deadline`. The deadline is spent: a second
/// pass finds nothing. The children have no deadline of their own.
async fn a_deadline_cancels_the_run_and_its_fan_out_tree<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = Runner::new(store.clone(), WORKER)
        .register(TreeIn10m(Tree))
        .register(Leaf);
    let (parent, _) = store
        .start_run(&TREE_IN_10M, &serde_json::json!(1), &StartOptions::new())
        .await
        .expect("a start");
    assert_eq!(view(store, parent).await.deadline_at, Some(at(10)));
    assert_eq!(run_due(&runner).await, 1, "the fan-out parks its parent");
    let children = store
        .list_runs(&RunFilter::new().workflow(Leaf::DEFINITION.name))
        .await
        .expect("the children");
    assert_eq!(children.len(), 2);
    for child in &children {
        assert_eq!(view(store, child.id).await.deadline_at, None);
    }

    clocked.advance(Duration::from_mins(9));
    assert_eq!(store.expire_deadlines(10).await.expect("the pass"), []);
    clocked.advance(Duration::from_mins(1));
    assert_eq!(
        store.expire_deadlines(10).await.expect("the pass"),
        [(parent, DeadlineAction::Cancel)],
        "a deadline that falls now is past"
    );

    let parent_view = view(store, parent).await;
    assert_eq!(parent_view.run.status, RunStatus::Cancelled);
    assert_eq!(parent_view.deadline_at, None, "spent");
    let kinds: Vec<&str> = parent_view
        .events
        .iter()
        .map(|e| e.event.as_str())
        .collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["deadline_exceeded", "cancelled"],
        "{kinds:?}"
    );
    let exceeded = said(&parent_view, "deadline_exceeded")[0];
    assert_eq!(exceeded.actor, "deadline");
    assert_eq!(
        exceeded.details,
        Some(serde_json::json!({ "deadline_at": "2026-01-01T00:10:00.000Z" }))
    );
    let cancelled = said(&parent_view, "cancelled")[0];
    assert_eq!(cancelled.actor, "deadline");
    assert_eq!(
        cancelled.reason.as_deref(),
        Some("the run's deadline (2026-01-01T00:10:00.000Z) passed")
    );
    for child in &children {
        let child = view(store, child.id).await;
        assert_eq!(child.run.status, RunStatus::Cancelled);
        assert_eq!(
            child.steps.iter().map(|s| s.status).collect::<Vec<_>>(),
            [StepStatus::Cancelled]
        );
        assert_eq!(said(&child, "cancelled")[0].actor, "deadline");
    }
    assert_eq!(store.expire_deadlines(10).await.expect("the pass"), []);
}

/// A pause deadline pauses the run (a step in progress would still record
/// its outcome); resumed, it goes on, the deadline spent. A run an operator
/// paused before its deadline gets the event alone.
async fn a_deadline_pauses_and_a_resumed_run_goes_on<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = Runner::new(store.clone(), WORKER).register(TwoPausing(Two));
    let (input, options) = (serde_json::json!(2), StartOptions::new());
    let start = || store.start_run(&TWO_PAUSING, &input, &options);
    let (run, _) = start().await.expect("a start");
    let (held, _) = start().await.expect("a start");
    assert_eq!(run_due(&runner).await, 2, "each `first`");
    store
        .act(held, Action::Pause, "ops", "hold on")
        .await
        .expect("a pause");

    clocked.advance(Duration::from_mins(11));
    let mut expired = store.expire_deadlines(10).await.expect("the pass");
    expired.sort_by_key(|(id, _)| id.0);
    assert_eq!(
        expired,
        [(run, DeadlineAction::Pause), (held, DeadlineAction::Pause)]
    );
    let paused = view(store, run).await;
    assert_eq!(paused.run.status, RunStatus::Paused);
    let kinds: Vec<&str> = paused.events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds[kinds.len() - 2..], ["deadline_exceeded", "paused"]);
    assert_eq!(said(&paused, "paused")[0].actor, "deadline");
    let held_view = view(store, held).await;
    assert_eq!(held_view.run.status, RunStatus::Paused);
    assert_eq!(
        said(&held_view, "paused")
            .iter()
            .map(|e| e.actor.as_str())
            .collect::<Vec<_>>(),
        ["ops"],
        "already paused: the event alone"
    );
    assert_eq!(said(&held_view, "deadline_exceeded").len(), 1);
    assert_eq!(held_view.deadline_at, None);

    store
        .act(run, Action::Resume, "ops", "go on")
        .await
        .expect("a resume");
    clocked.advance(Duration::from_hours(1));
    assert_eq!(store.expire_deadlines(10).await.expect("the pass"), []);
    assert_eq!(run_due(&runner).await, 2, "`second`, then `third`");
    assert_eq!(view(store, run).await.run.status, RunStatus::Finished);
}

/// Past its deadline a run starts no step: not a due row by a claim, not
/// the next step by a handoff; the pass then cancels it with its open row.
async fn a_step_past_the_deadline_is_not_started<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = Runner::new(store.clone(), WORKER).register(super::Pair);
    let (run, _) = store
        .start_run(
            super::Pair::DEFINITION,
            &serde_json::json!(3),
            &StartOptions::new().deadline_after(Duration::from_mins(1)),
        )
        .await
        .expect("a start");
    let claim = runner
        .claim(&queues(), 1)
        .await
        .expect("a claim")
        .pop()
        .expect("`first` is due");
    clocked.advance(Duration::from_mins(2));
    let queues = queues();
    let ended = store
        .end_attempt(
            super::Pair::DEFINITION,
            &claim,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            Some(Handoff {
                queues: &queues,
                stall_threshold_ms: 60_000,
            }),
        )
        .await
        .expect("the outcome");
    assert!(
        matches!(ended, Ended::Applied(_)),
        "not handed on: {ended:?}"
    );
    assert!(
        runner.claim(&queues, 1).await.expect("a claim").is_empty(),
        "`second` is due, but the run is past its deadline"
    );
    assert_eq!(
        store.expire_deadlines(10).await.expect("the pass"),
        [(run, DeadlineAction::Cancel)]
    );
    let cancelled = view(store, run).await;
    assert_eq!(cancelled.run.status, RunStatus::Cancelled);
    assert_eq!(
        cancelled
            .steps
            .iter()
            .map(|s| (s.step_name.as_str(), s.status))
            .collect::<Vec<_>>(),
        [
            ("first", StepStatus::Completed),
            ("second", StepStatus::Cancelled)
        ]
    );
}

/// The deadline a start writes: the start's own over the declared one, each
/// duration from the run's start time; a bad one refused, nothing started;
/// the same through a bulk start.
async fn a_starts_deadline_wins_over_the_declared_one<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let input = serde_json::json!(4);
    let cases = [
        (StartOptions::new(), Some(at(120))),
        (
            StartOptions::new().deadline_after(Duration::from_mins(1)),
            Some(at(1)),
        ),
        (
            StartOptions::new().delay(Duration::from_mins(10)),
            Some(at(130)),
        ),
        (
            StartOptions::new()
                .at(at(60))
                .deadline_after(Duration::from_mins(30)),
            Some(at(90)),
        ),
        (StartOptions::new().deadline(at(5)), Some(at(5))),
    ];
    for (options, deadline) in &cases {
        let (run, _) = store
            .start_run(&TWO_IN_2H, &input, options)
            .await
            .expect("a start");
        assert_eq!(view(store, run).await.deadline_at, *deadline, "{options:?}");
    }
    let (plain, _) = store
        .start_run(Two::DEFINITION, &input, &StartOptions::new())
        .await
        .expect("a start");
    assert_eq!(view(store, plain).await.deadline_at, None, "none declared");

    let refused = store
        .start_run(&TWO_IN_2H, &input, &StartOptions::new().deadline(at(0)))
        .await;
    assert!(
        matches!(
            refused,
            Err(Error::InvalidStartOption {
                option: "deadline",
                ..
            })
        ),
        "{refused:?}"
    );

    let bulk: Vec<NewRun> = cases
        .iter()
        .map(|(options, _)| NewRun::new(input.clone(), options.clone()))
        .collect();
    let started = store
        .start_many(&TWO_IN_2H, &bulk)
        .await
        .expect("a bulk start");
    for ((run, _), (options, deadline)) in started.iter().zip(&cases) {
        assert_eq!(
            view(store, *run).await.deadline_at,
            *deadline,
            "{options:?}"
        );
    }
    let bad = [
        NewRun::new(input.clone(), StartOptions::new()),
        NewRun::new(
            input.clone(),
            StartOptions::new().deadline_after(Duration::ZERO),
        ),
    ];
    let refused = store.start_many(&TWO_IN_2H, &bad).await;
    assert!(
        matches!(&refused, Err(Error::StartRefused { index: 1, source })
            if matches!(**source, Error::InvalidStartOption { option: "deadline_after", .. })),
        "{refused:?}"
    );
    let listed = store
        .list_runs(&RunFilter::new().workflow(Two::DEFINITION.name))
        .await
        .expect("the runs");
    assert_eq!(listed.len(), 2 * cases.len() + 1, "nothing refused started");
}

both_stores!(
    a_deadline_cancels_the_run_and_its_fan_out_tree,
    a_deadline_pauses_and_a_resumed_run_goes_on,
    a_step_past_the_deadline_is_not_started,
    a_starts_deadline_wins_over_the_declared_one,
);
