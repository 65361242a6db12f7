//! A run's result (issue 20): both stores read the same `ResultView` of a
//! run (its status; for a finished run the attempt that finished it, with
//! its output; for a cancelled or paused run the reason of the event that
//! did it), and the engine's `settle_result` makes the same of it.

use pgbus_runtime::engine::{
    AttemptResult, OnPause, RunStatus, StepStatus, Verb, settle_result, settle_result_as,
};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Ended, Store};
use pgbus_runtime::{Action, Error, LastAttempt, StartOptions};
use serde_json::{Value, json};

use super::{Clocked, Pair, Pinned, WORKER, claim_one, memory, runner};

/// Starts a run of `Pair` and ends its attempts with `verbs` in turn (each
/// with its output), as a worker would.
async fn drive<S: Store + Clone>(store: &S, input: u8, verbs: Vec<(Verb, Option<Value>)>) -> RunId {
    let runner = runner(store.clone());
    let (run, _) = store
        .start_run(Pair::DEFINITION, &json!(input), &StartOptions::new())
        .await
        .expect("a start");
    for (verb, output) in verbs {
        let claim = claim_one(&runner).await.expect("a due step");
        assert_eq!(claim.run_id, run, "one run at a time");
        let ended = store
            .end_attempt(
                Pair::DEFINITION,
                &claim,
                WORKER,
                &AttemptResult::ok(verb, output),
                false,
                None,
            )
            .await
            .expect("the outcome");
        assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    }
    run
}

fn last(step: &str, status: StepStatus, output: Option<Value>) -> LastAttempt {
    LastAttempt {
        step_name: step.to_owned(),
        attempt: 1,
        status,
        output,
    }
}

/// A run under way has no result yet; once its last step completes, its
/// result is that step's output, and nothing of earlier steps.
async fn a_finished_run_gives_its_last_steps_output<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let run = drive(store, 1, vec![(Verb::Complete, Some(json!("first")))]).await;
    let view = store.run_result(run).await.expect("the read");
    assert_eq!(
        (view.status, &view.last_attempt, &view.reason),
        (RunStatus::Ready, &None, &None)
    );
    assert!(settle_result(&view, OnPause::Return).is_none());

    let claim = claim_one(&runner(store.clone())).await.expect("second");
    let output = json!({"parcels": 2});
    store
        .end_attempt(
            Pair::DEFINITION,
            &claim,
            WORKER,
            &AttemptResult::ok(Verb::Complete, Some(output.clone())),
            false,
            None,
        )
        .await
        .expect("the outcome");
    let view = store.run_result(run).await.expect("the read");
    assert_eq!(view.run_id, run);
    assert_eq!(view.workflow, "contract.pair");
    assert_eq!(view.status, RunStatus::Finished);
    assert_eq!(
        view.last_attempt,
        Some(last("second", StepStatus::Completed, Some(output.clone())))
    );
    assert_eq!(
        settle_result(&view, OnPause::Return).map(Result::ok),
        Some(Some(output))
    );
}

/// `Flow::Finish` ends the run with its own step's output; a skipped last
/// step gives `null`, which is `()` or `None` and no `u32`.
async fn finish_early_and_a_skipped_last_step<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let early = drive(store, 2, vec![(Verb::Finish, Some(json!(5)))]).await;
    let view = store.run_result(early).await.expect("the read");
    assert_eq!(
        (view.status, view.last_attempt.clone()),
        (
            RunStatus::Finished,
            Some(last("first", StepStatus::Completed, Some(json!(5))))
        )
    );
    assert!(matches!(
        settle_result_as::<u32>(&view, OnPause::Return),
        Some(Ok(5))
    ));

    let skipped = drive(
        store,
        3,
        vec![
            (Verb::Complete, Some(json!("first"))),
            (
                Verb::Skip {
                    reason: "nothing to send".to_owned(),
                },
                None,
            ),
        ],
    )
    .await;
    let view = store.run_result(skipped).await.expect("the read");
    assert_eq!(
        view.last_attempt,
        Some(last("second", StepStatus::Skipped, None)),
        "the skipped attempt finished the run, not the first step"
    );
    assert!(matches!(
        settle_result_as::<Option<u32>>(&view, OnPause::Return),
        Some(Ok(None))
    ));
    let decoded = settle_result_as::<u32>(&view, OnPause::Return);
    assert!(
        matches!(decoded, Some(Err(Error::ResultDecode { ref step, .. })) if step.as_deref() == Some("second")),
        "{decoded:?}"
    );
}

/// A cancelled or paused run carries the reason of the event that did it
/// (an operator's, a step's own verb), and settles as the matching error.
async fn cancelled_and_paused_runs_carry_their_reason<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let (by_operator, _) = store
        .start_run(Pair::DEFINITION, &json!(4), &StartOptions::new())
        .await
        .expect("a start");
    store
        .act(by_operator, Action::Cancel, "ops", "out of stock")
        .await
        .expect("a cancel");
    let view = store.run_result(by_operator).await.expect("the read");
    assert_eq!(
        (view.status, view.reason.as_deref(), &view.last_attempt),
        (RunStatus::Cancelled, Some("out of stock"), &None)
    );
    let settled = settle_result(&view, OnPause::Wait);
    assert!(
        matches!(settled, Some(Err(Error::RunCancelled { run_id, reason: Some(ref r) })) if run_id == by_operator && r == "out of stock"),
        "{settled:?}"
    );

    let by_step = drive(
        store,
        5,
        vec![(
            Verb::Cancel {
                reason: "card declined".to_owned(),
            },
            None,
        )],
    )
    .await;
    let view = store.run_result(by_step).await.expect("the read");
    assert_eq!(
        (view.status, view.reason.as_deref()),
        (RunStatus::Cancelled, Some("card declined"))
    );

    let paused = drive(
        store,
        6,
        vec![(
            Verb::Pause {
                reason: "needs a look".to_owned(),
            },
            None,
        )],
    )
    .await;
    let view = store.run_result(paused).await.expect("the read");
    assert_eq!(
        (view.status, view.reason.as_deref(), &view.last_attempt),
        (RunStatus::Paused, Some("needs a look"), &None)
    );
    assert!(matches!(
        settle_result(&view, OnPause::Return),
        Some(Err(Error::RunPaused { reason: Some(ref r), .. })) if r == "needs a look"
    ));
    assert!(settle_result(&view, OnPause::Wait).is_none());

    // Resumed, it runs on: no reason, no result yet.
    store
        .act(paused, Action::Resume, "ops", "looked")
        .await
        .expect("a resume");
    let view = store.run_result(paused).await.expect("the read");
    assert_eq!(
        (view.status, view.reason.as_deref()),
        (RunStatus::Ready, None)
    );
}

/// A run that does not exist is `RunNotFound`.
async fn a_missing_run_is_not_found<C: Clocked>(clocked: C) {
    let missing = clocked.store().run_result(RunId(i64::MAX)).await;
    assert!(
        matches!(
            missing,
            Err(Error::RunNotFound {
                run_id: RunId(i64::MAX)
            })
        ),
        "{missing:?}"
    );
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
    a_finished_run_gives_its_last_steps_output,
    finish_early_and_a_skipped_last_step,
    cancelled_and_paused_runs_carry_their_reason,
    a_missing_run_is_not_found,
);
