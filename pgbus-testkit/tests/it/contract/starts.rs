//! Start options and bulk starts (issue 20): both stores start a run at its
//! time, on the run's queue and priority (a step's own still winning), keep
//! that placement for every later row, and start many runs at once, in
//! order, all or none, with keys behaving as single starts do.

use std::time::Duration;

use pgbus_runtime::engine::{Action, AttemptResult, RunStatus, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Claim, NewRun, Runner, Store};
use pgbus_runtime::{
    Error, MAX_STARTS_PER_CALL, RunFilter, RunRead, StartOptions, WorkflowDefinition,
};
use pgbus_testkit::default_start;
use serde_json::json;

use super::{Clocked, Pinned, WORKER, memory};

/// Three steps: `label` names its own queue; the rest take the workflow's
/// (`route`, priority 5) or the run's.
struct Route;

#[workflow(name = "contract.route", input = u8, queue = "route", priority = 5)]
impl Route {
    #[step(wait = "2s")]
    async fn pick(&self, _cx: &mut StepCx<u8>) {}

    #[step(queue = "labels")]
    async fn label(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn ship(&self, _cx: &mut StepCx<u8>) {}
}

const DEF: &WorkflowDefinition = Route::DEFINITION;

async fn claim_from<S: Store>(runner: &Runner<S>, queues: &[&str]) -> Option<Claim> {
    let queues: Vec<String> = queues.iter().map(|q| (*q).to_owned()).collect();
    runner.claim(&queues, 1).await.expect("a claim").pop()
}

async fn end<S: Store>(store: &S, claim: &Claim, verb: Verb) {
    store
        .end_attempt(
            DEF,
            claim,
            WORKER,
            &AttemptResult::ok(verb, None),
            false,
            None,
        )
        .await
        .expect("the outcome");
}

/// Each step row of the run as `(step, attempt, queue, priority)`.
async fn rows<S: Store>(store: &S, run: RunId) -> Vec<(String, i32, String, i16)> {
    store
        .run(run, RunRead::default())
        .await
        .expect("the run")
        .steps
        .into_iter()
        .map(|s| (s.step_name, s.attempt, s.queue, s.priority))
        .collect()
}

fn row(step: &str, attempt: i32, queue: &str, priority: i16) -> (String, i32, String, i16) {
    (step.to_owned(), attempt, queue.to_owned(), priority)
}

/// A delay and a start time: the first row is due at that time plus the
/// first step's `wait`, and no claim takes it before.
async fn a_later_start_is_due_at_its_time<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = Runner::new(store.clone(), WORKER).register(Route);
    let start = default_start();
    let (delayed, created) = store
        .start_run(
            DEF,
            &json!(1),
            &StartOptions::new().delay(Duration::from_mins(1)),
        )
        .await
        .expect("a start");
    assert!(created);
    let at = start + chrono::Duration::minutes(10);
    let (timed, _) = store
        .start_run(DEF, &json!(2), &StartOptions::new().at(at))
        .await
        .expect("a start");
    let (backdated, _) = store
        .start_run(
            DEF,
            &json!(3),
            &StartOptions::new().at(start - chrono::Duration::days(1)),
        )
        .await
        .expect("a start");
    let due = |run| async move {
        store
            .run(run, RunRead::default())
            .await
            .expect("the run")
            .steps[0]
            .scheduled_at
    };
    assert_eq!(due(delayed).await, start + chrono::Duration::seconds(62));
    assert_eq!(due(timed).await, at + chrono::Duration::seconds(2));
    assert_eq!(
        due(backdated).await,
        start,
        "a past time is due at once, now"
    );

    let first = claim_from(&runner, &["route"])
        .await
        .expect("the backdated run");
    assert_eq!(first.run_id, backdated);
    assert!(claim_from(&runner, &["route"]).await.is_none());
    clocked.advance(Duration::from_secs(61));
    assert!(
        claim_from(&runner, &["route"]).await.is_none(),
        "due at 62 s"
    );
    clocked.advance(Duration::from_secs(1));
    let claim = claim_from(&runner, &["route"]).await.expect("due now");
    assert_eq!(claim.run_id, delayed);
    assert!(claim_from(&runner, &["route"]).await.is_none());
    clocked.advance(Duration::from_mins(9));
    let claim = claim_from(&runner, &["route"]).await.expect("due now");
    assert_eq!(claim.run_id, timed);
    let view = store.run(timed, RunRead::default()).await.expect("the run");
    assert_eq!(view.run.status, RunStatus::Performing);
}

/// The run's queue and priority place its first row, its later steps, a
/// reattempt and the row an operator's skip schedules; a step's own queue
/// still wins, and the recorded step plan says so.
async fn the_runs_queue_and_priority_place_every_row<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = Runner::new(store.clone(), WORKER).register(Route);
    let (run, _) = store
        .start_run(
            DEF,
            &json!(1),
            &StartOptions::new().queue("bulk").priority(9),
        )
        .await
        .expect("a start");
    let view = store.run(run, RunRead::default()).await.expect("the run");
    let plan: Vec<(String, String, i16)> = view
        .step_plan
        .expect("a step plan")
        .into_iter()
        .map(|s| (s.name, s.queue, s.priority))
        .collect();
    assert_eq!(
        plan,
        [
            ("pick".to_owned(), "bulk".to_owned(), 9),
            ("label".to_owned(), "labels".to_owned(), 9),
            ("ship".to_owned(), "bulk".to_owned(), 9),
        ]
    );
    clocked.advance(Duration::from_secs(2));
    assert!(
        claim_from(&runner, &["route", "labels"]).await.is_none(),
        "not on the workflow's queue"
    );
    let pick = claim_from(&runner, &["bulk"]).await.expect("pick");
    end(store, &pick, Verb::Reattempt { wait_ms: 0 }).await;
    let pick = claim_from(&runner, &["bulk"]).await.expect("pick again");
    assert_eq!(pick.attempt, 2);
    end(store, &pick, Verb::Complete).await;
    assert!(claim_from(&runner, &["bulk"]).await.is_none());

    store
        .act(run, Action::Pause, "ops", "hold")
        .await
        .expect("a pause");
    store
        .act(run, Action::Skip, "ops", "no label")
        .await
        .expect("a skip");
    let ship = claim_from(&runner, &["bulk"]).await.expect("ship");
    assert_eq!(ship.step_name, "ship");
    assert_eq!(
        rows(store, run).await,
        [
            row("pick", 1, "bulk", 9),
            row("pick", 2, "bulk", 9),
            row("label", 1, "labels", 9),
            row("ship", 1, "bulk", 9),
        ]
    );

    // Only a priority: the workflow's queue.
    let (other, _) = store
        .start_run(DEF, &json!(2), &StartOptions::new().priority(-1))
        .await
        .expect("a start");
    assert_eq!(rows(store, other).await, [row("pick", 1, "route", -1)]);
}

/// Bad options are refused by the store itself, naming the option, and
/// nothing is started.
async fn start_options_are_checked_by_the_store<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let start = default_start();
    let refused = |options: StartOptions| async move {
        store.start_run(DEF, &json!(1), &options).await.unwrap_err()
    };
    let option = |error: Error| match error {
        Error::InvalidStartOption { option, .. } => option,
        other => panic!("{other:?}"),
    };
    let far = start + chrono::Duration::days(36_500) + chrono::Duration::seconds(1);
    assert_eq!(option(refused(StartOptions::new().at(far)).await), "at");
    let long = Duration::from_millis(pgbus_runtime::MAX_DURATION_MS + 1);
    assert_eq!(
        option(refused(StartOptions::new().delay(long)).await),
        "delay"
    );
    assert_eq!(
        option(refused(StartOptions::new().queue("two words")).await),
        "queue"
    );
    assert_eq!(
        option(refused(StartOptions::new().queue("")).await),
        "queue"
    );
    assert!(matches!(
        refused(StartOptions::new().key(" ").queue("q")).await,
        Error::BlankIdempotencyKey
    ));
    let listed = store.list_runs(&RunFilter::new()).await.expect("a list");
    assert!(listed.is_empty(), "{listed:?}");
}

/// Many starts in one call: in order; a key repeated in the call gives the
/// first start's run, a key a run holds gives that run, both `created:
/// false`; each start's own options apply.
async fn start_many_starts_each_in_order<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (earlier, _) = store
        .start_run(DEF, &json!(0), &StartOptions::new().key("b"))
        .await
        .expect("a start");
    let runs = vec![
        NewRun::new(json!(1), StartOptions::new().key("a")),
        NewRun::new(json!(2), StartOptions::new().queue("bulk").priority(1)),
        NewRun::new(json!(3), StartOptions::new().key("a").queue("other")),
        NewRun::new(json!(4), StartOptions::new().key("b")),
        NewRun::new(json!(5), StartOptions::new().delay(Duration::from_secs(30))),
    ];
    let started = store.start_many(DEF, &runs).await.expect("a bulk start");
    assert_eq!(started.len(), 5);
    let created: Vec<bool> = started.iter().map(|(_, created)| *created).collect();
    assert_eq!(created, [true, true, false, false, true]);
    assert_eq!(
        started[2].0, started[0].0,
        "the call's first start with `a`"
    );
    assert_eq!(started[3].0, earlier, "the run holding `b`");
    let new: Vec<RunId> = [0, 1, 4].iter().map(|&i| started[i].0).collect();
    assert!(new.iter().all(|run| *run != earlier));
    assert_eq!(
        new.iter().collect::<std::collections::BTreeSet<_>>().len(),
        3
    );
    for (index, input) in [(0, 1), (1, 2), (3, 0), (4, 5)] {
        let view = store
            .run(started[index].0, RunRead::default())
            .await
            .expect("the run");
        assert_eq!(view.input, json!(input), "start {index}");
        let kinds: Vec<&str> = view.events.iter().map(|e| e.event.as_str()).collect();
        assert_eq!(kinds, ["started"], "start {index}");
    }
    assert_eq!(rows(store, started[1].0).await, [row("pick", 1, "bulk", 1)]);
    assert_eq!(
        rows(store, started[0].0).await,
        [row("pick", 1, "route", 5)],
        "the repeat's queue changes nothing"
    );
    let delayed = store
        .run(started[4].0, RunRead::default())
        .await
        .expect("the run");
    assert_eq!(
        delayed.steps[0].scheduled_at,
        default_start() + chrono::Duration::seconds(32)
    );
    let listed = store.list_runs(&RunFilter::new()).await.expect("a list");
    assert_eq!(listed.len(), 4);
    assert!(
        store
            .start_many(DEF, &[])
            .await
            .expect("nothing")
            .is_empty(),
        "an empty call starts nothing"
    );
}

/// One bad start refuses the whole call, saying which; a call over the
/// bound is refused before anything is written.
async fn start_many_is_all_or_none<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runs = vec![
        NewRun::new(json!(1), StartOptions::new()),
        NewRun::new(json!(2), StartOptions::new().key("k")),
        NewRun::new(json!(3), StartOptions::new().queue("")),
    ];
    match store.start_many(DEF, &runs).await {
        Err(Error::StartRefused { index: 2, source }) => assert!(
            matches!(
                *source,
                Error::InvalidStartOption {
                    option: "queue",
                    ..
                }
            ),
            "{source:?}"
        ),
        other => panic!("{other:?}"),
    }
    let nul = vec![
        NewRun::new(json!(1), StartOptions::new()),
        NewRun::new(json!("a\u{0}b"), StartOptions::new()),
    ];
    match store.start_many(DEF, &nul).await {
        Err(Error::StartRefused { index: 1, source }) => {
            assert!(matches!(*source, Error::InvalidInput { .. }), "{source:?}");
        }
        other => panic!("{other:?}"),
    }
    let too_many: Vec<NewRun> = (0..=MAX_STARTS_PER_CALL)
        .map(|_| NewRun::new(json!(1), StartOptions::new()))
        .collect();
    assert!(matches!(
        store.start_many(DEF, &too_many).await,
        Err(Error::TooManyStarts { runs, .. }) if runs == MAX_STARTS_PER_CALL + 1
    ));
    let listed = store.list_runs(&RunFilter::new()).await.expect("a list");
    assert!(listed.is_empty(), "{listed:?}");
    let (_, created) = store
        .start_run(DEF, &json!(9), &StartOptions::new().key("k"))
        .await
        .expect("a start");
    assert!(created, "the refused call took no key");
}

both_stores!(
    a_later_start_is_due_at_its_time,
    the_runs_queue_and_priority_place_every_row,
    start_options_are_checked_by_the_store,
    start_many_starts_each_in_order,
    start_many_is_all_or_none,
);
