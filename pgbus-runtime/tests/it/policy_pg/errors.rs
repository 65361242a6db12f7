//! What the step and run rows keep of an error: class, message and causes, a
//! capped message, a panic, a timeout, and NUL characters that never make an
//! outcome unrecordable.

use std::any::type_name;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Panicked, RunStatus};

use crate::pg::{TestDb, at_ms, events, step, steps, t0};

#[derive(Debug, thiserror::Error)]
#[error("layer {depth}")]
struct Layered {
    depth: u32,
    #[source]
    source: Option<Box<Layered>>,
}

impl Layered {
    fn chain(depth: u32) -> Self {
        Self {
            depth,
            source: (depth > 1).then(|| Box::new(Self::chain(depth - 1))),
        }
    }
}

/// What `Failing::fail` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Failure {
    Layered,
    LongMessage,
    Panic,
    Sleep,
    Nothing,
}

struct Failing;

#[workflow(name = "policy.failing", input = Failure)]
impl Failing {
    #[step(
        timeout = "50ms",
        on_exception(matching(Panicked), action = "skip"),
        on_exception(matching(Timeout), action = "cancel")
    )]
    async fn fail(&self, cx: &mut StepCx<Failure>) -> StepResult {
        match cx.input() {
            Failure::Layered => Err(Layered::chain(8).into()),
            Failure::LongMessage => Err(StepError::msg("é".repeat(25_000))),
            Failure::Panic => panic!("boom in the body"),
            Failure::Sleep => {
                // Longer than the step's 50 ms timeout; the timeout bounds it.
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok(Flow::Complete)
            }
            Failure::Nothing => Ok(Flow::Complete),
        }
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Failure>) {}
}

async fn run_failing(t: &TestDb, failure: Failure) -> pgbus_runtime::RunView {
    let worker = t.db.worker().register(Failing).build().expect("worker");
    let run_id = t
        .client()
        .start::<Failing>(&failure)
        .await
        .expect("start")
        .run_id;
    worker.run_until_idle().await.expect("run");
    t.run(run_id).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_keeps_its_class_message_and_causes_on_the_rows() {
    let t = TestDb::new().await;
    let view = run_failing(&t, Failure::Layered).await;
    assert_eq!(view.run.status, RunStatus::Paused, "no policy: pause");
    assert_eq!(steps(&view), ["fail#1 failed/paused"]);
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:fail#1",
            "step_failed:fail#1",
            "paused"
        ]
    );
    let row = step(&view, "fail", 1);
    assert_eq!(row.error_class.as_deref(), Some(type_name::<Layered>()));
    assert_eq!(row.error_message.as_deref(), Some("layer 8"));
    assert_eq!(
        row.error_causes,
        ["layer 7", "layer 6", "layer 5", "layer 4", "layer 3"],
        "the nearest five causes"
    );
    assert_eq!(row.output, None);
    // The run keeps the error it paused on.
    assert_eq!(view.error_class, row.error_class);
    assert_eq!(view.error_message, row.error_message);
    assert_eq!(view.paused_at, Some(t0()));
    assert_eq!(
        view.events[3].reason.as_deref(),
        Some("step failed: layer 8")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_long_error_message_is_capped() {
    let t = TestDb::new().await;
    let view = run_failing(&t, Failure::LongMessage).await;
    let row = step(&view, "fail", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::Message")
    );
    let message = row.error_message.as_deref().expect("a message");
    assert_eq!(message.chars().count(), 10_000);
    assert!(message.starts_with("éé"));
    assert!(message.ends_with('…'));
    assert_eq!(view.error_message.as_deref(), Some(message));
    let reason = view.events[3].reason.as_deref().expect("a reason");
    assert!(
        reason.chars().count() <= 10_100,
        "the reason is bounded too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_body_is_a_panicked_error_and_the_worker_lives_on() {
    let t = TestDb::new().await;
    let worker = t.db.worker().register(Failing).build().expect("worker");
    let client = t.client();
    let panicked = client
        .start::<Failing>(&Failure::Panic)
        .await
        .expect("start")
        .run_id;
    let fine = client
        .start::<Failing>(&Failure::Nothing)
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);

    let view = t.run(panicked).await;
    assert_eq!(
        view.run.status,
        RunStatus::Finished,
        "skipped by its policy"
    );
    assert_eq!(
        steps(&view),
        ["fail#1 failed/skipped", "after#1 completed/completed"]
    );
    let row = step(&view, "fail", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::Panicked")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("step panicked: boom in the body")
    );
    assert_eq!(t.run(fine).await.run.status, RunStatus::Finished);

    // And again, on the same worker.
    let again = client
        .start::<Failing>(&Failure::Panic)
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    assert_eq!(t.run(again).await.run.status, RunStatus::Finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_its_timeout_is_a_timeout_error_matched_by_type() {
    let t = TestDb::new().await;
    let started = std::time::Instant::now();
    let view = run_failing(&t, Failure::Sleep).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the body was cut off"
    );
    assert_eq!(view.run.status, RunStatus::Cancelled, "matching(Timeout)");
    assert_eq!(steps(&view), ["fail#1 failed/cancelled"]);
    let row = step(&view, "fail", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::Timeout")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("step ran past its timeout of 50ms")
    );
    // The stall horizon is the step's own timeout.
    assert_eq!(row.started_at, Some(t0()));
    assert_eq!(row.stall_at, Some(at_ms(50)));
}

/// Where a step puts a NUL character, which Postgres `text` and `jsonb` refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum NulIn {
    ErrorMessage,
    Reason,
    Output,
    IgnoredOutput,
}

struct Nuls;

#[workflow(name = "policy.nuls", input = NulIn)]
impl Nuls {
    #[step]
    async fn only(&self, cx: &mut StepCx<NulIn>) -> StepResult {
        match cx.input() {
            NulIn::ErrorMessage => Err(StepError::msg("bad\0byte")),
            NulIn::Reason => Ok(Flow::pause("why\0not")),
            NulIn::Output => {
                cx.output(&serde_json::json!({ "key\0": "value" }))?;
                Ok(Flow::Complete)
            }
            NulIn::IgnoredOutput => {
                let refused = cx.output(&vec!["a\0b"]).is_err();
                cx.output(&serde_json::json!({ "refused": refused }))?;
                Ok(Flow::Complete)
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_character_from_a_step_never_makes_its_outcome_unrecordable() {
    let t = TestDb::new().await;
    let worker = t.db.worker().register(Nuls).build().expect("worker");
    let client = t.client();
    let mut runs = Vec::new();
    for nul in [
        NulIn::ErrorMessage,
        NulIn::Reason,
        NulIn::Output,
        NulIn::IgnoredOutput,
    ] {
        runs.push((nul, client.start::<Nuls>(&nul).await.expect("start").run_id));
    }
    assert_eq!(worker.run_until_idle().await.expect("run"), 4);

    for (nul, run_id) in runs {
        let view = t.run(run_id).await;
        let row = step(&view, "only", 1);
        let last_reason = view.events.last().and_then(|e| e.reason.as_deref());
        match nul {
            NulIn::ErrorMessage => {
                assert_eq!(steps(&view), ["only#1 failed/paused"]);
                assert_eq!(row.error_message.as_deref(), Some("bad\u{fffd}byte"));
                assert_eq!(view.error_message.as_deref(), Some("bad\u{fffd}byte"));
                assert_eq!(last_reason, Some("step failed: bad\u{fffd}byte"));
            }
            NulIn::Reason => {
                assert_eq!(steps(&view), ["only#1 completed/paused"]);
                assert_eq!(last_reason, Some("why\u{fffd}not"));
            }
            NulIn::Output => {
                // Refused by `cx.output`, so the body's `?` made it a step error.
                assert_eq!(steps(&view), ["only#1 failed/paused"]);
                assert_eq!(row.error_class.as_deref(), Some("serde_json::error::Error"));
                assert!(
                    row.error_message
                        .as_deref()
                        .is_some_and(|m| m.contains("NUL character")),
                    "{:?}",
                    row.error_message
                );
                assert_eq!(row.output, None);
            }
            NulIn::IgnoredOutput => {
                assert_eq!(steps(&view), ["only#1 completed/completed"]);
                assert_eq!(row.output, Some(serde_json::json!({ "refused": true })));
            }
        }
        assert_ne!(view.run.status, RunStatus::Performing, "{nul:?}");
    }
}
