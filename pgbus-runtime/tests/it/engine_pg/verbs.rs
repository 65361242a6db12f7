//! Every verb's rows and events, a reattempt's attempt number and wait, and a
//! cancel that closes every open step row.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StepOutcome, StepStatus};

use crate::pg::{TestDb, at_ms, events, step, steps, t0};

/// Which verb `Verbs::first` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
enum Verb {
    Complete,
    Finish,
    Pause,
    Cancel,
    Skip,
    Reattempt,
}

struct Verbs;

#[workflow(name = "engine.verbs", input = Verb)]
impl Verbs {
    #[step]
    async fn first(&self, cx: &mut StepCx<Verb>) -> Flow {
        match cx.input() {
            Verb::Reattempt if cx.attempt() == 1 => Flow::reattempt(Duration::from_secs(3)),
            Verb::Complete | Verb::Reattempt => Flow::Complete,
            Verb::Finish => Flow::Finish,
            Verb::Pause => Flow::pause("verb pause"),
            Verb::Cancel => Flow::cancel("verb cancel"),
            Verb::Skip => Flow::skip("verb skip"),
        }
    }

    #[step]
    async fn second(&self, _cx: &mut StepCx<Verb>) -> Flow {
        Flow::Complete
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // one table of every verb reads best in one place
async fn every_verb_sets_its_rows_and_events() {
    struct Case {
        verb: Verb,
        run: RunStatus,
        steps: &'static [&'static str],
        events: &'static [&'static str],
        reason: Option<(&'static str, &'static str)>,
    }
    let cases = [
        Case {
            verb: Verb::Complete,
            run: RunStatus::Finished,
            steps: &[
                "first#1 completed/completed",
                "second#1 completed/completed",
            ],
            events: &[
                "started",
                "step_started:first#1",
                "step_completed:first#1",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            reason: None,
        },
        Case {
            verb: Verb::Finish,
            run: RunStatus::Finished,
            steps: &["first#1 completed/finished_early"],
            events: &[
                "started",
                "step_started:first#1",
                "step_completed:first#1",
                "finished",
            ],
            reason: None,
        },
        Case {
            verb: Verb::Pause,
            run: RunStatus::Paused,
            steps: &["first#1 completed/paused"],
            events: &[
                "started",
                "step_started:first#1",
                "step_completed:first#1",
                "paused",
            ],
            reason: Some(("paused", "verb pause")),
        },
        Case {
            verb: Verb::Cancel,
            run: RunStatus::Cancelled,
            steps: &["first#1 cancelled/cancelled"],
            events: &["started", "step_started:first#1", "cancelled:first#1"],
            reason: Some(("cancelled", "verb cancel")),
        },
        Case {
            verb: Verb::Skip,
            run: RunStatus::Finished,
            steps: &["first#1 skipped/skipped", "second#1 completed/completed"],
            events: &[
                "started",
                "step_started:first#1",
                "step_skipped:first#1",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            reason: Some(("step_skipped", "verb skip")),
        },
        Case {
            verb: Verb::Reattempt,
            run: RunStatus::Finished,
            steps: &[
                "first#1 failed/reattempted",
                "first#2 completed/completed",
                "second#1 completed/completed",
            ],
            events: &[
                "started",
                "step_started:first#1",
                "step_reattempted:first#1",
                "step_started:first#2",
                "step_completed:first#2",
                "step_started:second#1",
                "step_completed:second#1",
                "finished",
            ],
            reason: None,
        },
    ];

    let t = TestDb::new().await;
    let client = t.client();
    let worker = t.db.worker().register(Verbs).build().expect("worker");
    for case in &cases {
        let run_id = client
            .start::<Verbs>(&case.verb)
            .await
            .expect("start")
            .run_id;
        worker.run_until_idle().await.expect("run");
        if case.verb == Verb::Reattempt {
            // The new attempt is due 3 s after the first ended, not before.
            assert_eq!(t.run(run_id).await.run.status, RunStatus::Ready);
            t.clock.advance(Duration::from_secs(3));
            worker.run_until_idle().await.expect("run");
        }
        let view = t.run(run_id).await;
        let what = format!("{:?}", case.verb);
        assert_eq!(view.run.status, case.run, "{what}");
        assert_eq!(steps(&view), case.steps, "{what}");
        assert_eq!(events(&view), case.events, "{what}");
        assert_eq!(view.error_class, None, "{what}: no error, no error columns");
        assert_eq!(view.error_message, None, "{what}");
        assert!(view.steps.iter().all(|s| s.error_class.is_none()), "{what}");
        if let Some((event, reason)) = case.reason {
            let found = view
                .events
                .iter()
                .find(|e| e.event == event)
                .expect("the event");
            assert_eq!(found.reason.as_deref(), Some(reason), "{what}");
        }
        // Step events come from the worker, `started` from the client.
        assert_eq!(view.events[0].actor, "client");
        assert!(view.events[1..].iter().all(|e| e.actor == worker.id()));
        for s in &view.steps {
            assert_eq!(s.worker_id.as_deref(), Some(worker.id()), "{what}");
            assert!(s.started_at.is_some() && s.finished_at >= s.started_at);
        }
        let now = t.clock.now();
        match case.run {
            RunStatus::Finished => {
                assert_eq!(view.run.finished_at, Some(now), "{what}");
                assert_eq!(
                    view.run.current_step.as_deref(),
                    Some(view.steps.last().expect("a step").step_name.as_str())
                );
            }
            RunStatus::Paused => {
                assert_eq!(view.paused_at, Some(now));
                assert_eq!(view.run.finished_at, None);
                assert_eq!(view.run.current_step.as_deref(), Some("first"));
            }
            RunStatus::Cancelled => {
                assert_eq!(view.cancelled_at, Some(now));
                assert_eq!(view.run.finished_at, None);
            }
            other => panic!("{what}: unexpected {other}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reattempt_schedules_attempt_plus_one_after_its_wait() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = t.db.worker().register(Verbs).build().expect("worker");
    let run_id = client
        .start::<Verbs>(&Verb::Reattempt)
        .await
        .expect("start")
        .run_id;

    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    let view = t.run(run_id).await;
    let first = step(&view, "first", 1);
    let second = step(&view, "first", 2);
    assert_eq!(first.outcome, Some(StepOutcome::Reattempted));
    assert_eq!(second.status, StepStatus::Scheduled);
    assert_eq!(second.scheduled_at, at_ms(3_000));
    assert_eq!(view.run.status, RunStatus::Ready);

    t.clock.advance(Duration::from_millis(2_999));
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "not due yet"
    );
    t.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
    let view = t.run(run_id).await;
    assert_eq!(step(&view, "first", 2).started_at, Some(at_ms(3_000)));
    assert_eq!(view.run.status, RunStatus::Finished);
}

/// Asks for a reattempt far beyond any due time Postgres can hold.
struct Forever;

#[workflow(name = "engine.forever")]
impl Forever {
    #[step]
    async fn only(&self, cx: &mut StepCx<()>) -> Flow {
        if cx.attempt() == 1 {
            Flow::reattempt(Duration::MAX)
        } else {
            Flow::Complete
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reattempt_wait_beyond_the_longest_duration_is_cut_to_it() {
    let t = TestDb::new().await;
    let worker = t.db.worker().register(Forever).build().expect("worker");
    let run_id = t
        .client()
        .start::<Forever>(&())
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);

    let view = t.run(run_id).await;
    assert_eq!(
        steps(&view),
        ["only#1 failed/reattempted", "only#2 scheduled/-"]
    );
    // `36500d`, the longest duration the option grammar accepts.
    let longest = 36_500 * 86_400_000;
    assert_eq!(step(&view, "only", 2).scheduled_at, at_ms(longest));
    assert_eq!(view.run.status, RunStatus::Ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_cancels_every_open_step_row_of_the_run() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = t.db.worker().register(Verbs).build().expect("worker");
    let run_id = client
        .start::<Verbs>(&Verb::Cancel)
        .await
        .expect("start")
        .run_id;
    // A second open row of the run, due far later (as a stale or parallel row
    // would be): the cancel must close it too.
    t.execute(
        "INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue,
                                     priority, scheduled_at, created_at)
         VALUES ($1, 'engine.verbs', 'second', 1, 'scheduled', 'default', 0,
                 $2::timestamptz + interval '1 day', $2)",
        &[&run_id.0, &t0()],
    )
    .await;

    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(
        steps(&view),
        [
            "first#1 cancelled/cancelled",
            "second#1 cancelled/cancelled"
        ]
    );
    assert_eq!(step(&view, "second", 1).finished_at, Some(t0()));
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.steps WHERE run_id = $1 AND status IN ('scheduled', 'in_progress', 'waiting')",
            &[&run_id.0],
        )
        .await,
        0
    );
}
