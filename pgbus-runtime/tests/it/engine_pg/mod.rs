//! The engine end to end on a real worker: every verb's rows and events, waits on
//! the pinned clock, outputs handed on, definitions that changed under a run, and
//! completions that lost their fence.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{ManualClock, RunStatus, StepOutcome, StepStatus};
use tokio::sync::Notify;

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

/// Its first step takes two seconds on the pinned clock; its second waits five
/// after that.
struct Waits {
    clock: ManualClock,
}

#[workflow(name = "engine.waits")]
impl Waits {
    #[step(wait = "1s")]
    async fn first(&self, _cx: &mut StepCx<()>) {
        self.clock.advance(Duration::from_secs(2));
    }

    #[step(wait = "5s")]
    async fn second(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_counts_from_the_end_of_the_previous_step_on_the_database_clock() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .register(Waits {
                clock: t.clock.clone(),
            })
            .build()
            .expect("worker");
    let run_id = client.start::<Waits>(&()).await.expect("start").run_id;

    // The first step's own wait counts from the start.
    let view = t.run(run_id).await;
    assert_eq!(view.run.created_at, t0());
    assert_eq!(step(&view, "first", 1).scheduled_at, at_ms(1_000));
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    t.clock.advance(Duration::from_millis(999));
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);
    t.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.run_once().await.expect("run"), 1);

    let view = t.run(run_id).await;
    let first = step(&view, "first", 1);
    assert_eq!(first.started_at, Some(at_ms(1_000)));
    assert_eq!(first.finished_at, Some(at_ms(3_000)), "the body took 2 s");
    let second = step(&view, "second", 1);
    assert_eq!(second.status, StepStatus::Scheduled);
    assert_eq!(
        second.scheduled_at,
        at_ms(8_000),
        "5 s after the first ended, not after it started"
    );
    assert_eq!(view.run.status, RunStatus::Ready);
    assert_eq!(view.run.current_step.as_deref(), Some("second"));

    t.clock.advance(Duration::from_millis(4_999));
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "not due yet"
    );
    assert_eq!(
        step(&t.run(run_id).await, "second", 1).status,
        StepStatus::Scheduled
    );
    t.clock.advance(Duration::from_millis(1));
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);

    let view = t.run(run_id).await;
    let second = step(&view, "second", 1);
    assert_eq!(second.started_at, Some(at_ms(8_000)));
    assert_eq!(second.queued(), Some(chrono::Duration::zero()));
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.run.finished_at, Some(at_ms(8_000)));
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Order {
    id: i64,
    items: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Reservation {
    code: String,
    count: usize,
}

struct Outputs;

#[workflow(name = "engine.outputs", input = Order)]
impl Outputs {
    #[step]
    async fn reserve(&self, cx: &mut StepCx<Order>) -> StepResult {
        if cx.attempt() == 1 {
            // The output of an attempt that did not complete is not handed on.
            cx.output(&"stale")?;
            return Ok(Flow::reattempt(Duration::ZERO));
        }
        let reservation = Reservation {
            code: format!("R-{}", cx.input().id),
            count: cx.input().items.len(),
        };
        cx.output(&reservation)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn quiet(&self, _cx: &mut StepCx<Order>) {}

    /// Records an output, then fails; its policy skips it.
    #[step(on_exception(action = "skip"))]
    async fn fragile(&self, cx: &mut StepCx<Order>) -> StepResult {
        cx.output(&"from a failed attempt")?;
        Err(StepError::msg("fragile failed"))
    }

    #[step]
    async fn ship(&self, cx: &mut StepCx<Order>) -> StepResult {
        let reservation: Option<Reservation> = cx.output_of("reserve")?;
        let quiet: Option<String> = cx.output_of("quiet")?;
        let fragile: Option<String> = cx.output_of("fragile")?;
        let missing: Option<String> = cx.output_of("no_such_step")?;
        cx.output(&serde_json::json!({
            "shipped": reservation.map(|r| r.code),
            "quiet": quiet,
            "fragile": fragile,
            "missing": missing,
            "first_item": cx.input().items.first(),
        }))?;
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_step_reads_an_earlier_steps_output() {
    let t = TestDb::new().await;
    let client = t.client();
    let worker = t.db.worker().register(Outputs).build().expect("worker");
    let order = Order {
        id: 42,
        items: vec!["book".into(), "pen".into()],
    };
    let run_id = client.start::<Outputs>(&order).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 5);

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.input, serde_json::to_value(&order).expect("json"));
    assert_eq!(
        step(&view, "reserve", 1).output,
        Some(serde_json::json!("stale"))
    );
    assert_eq!(
        step(&view, "reserve", 2).output,
        Some(serde_json::json!({"code": "R-42", "count": 2}))
    );
    assert_eq!(step(&view, "quiet", 1).output, None);
    let fragile = step(&view, "fragile", 1);
    assert_eq!(fragile.status, StepStatus::Failed);
    assert_eq!(
        fragile.output,
        Some(serde_json::json!("from a failed attempt")),
        "kept on its row"
    );
    assert_eq!(
        step(&view, "ship", 1).output,
        Some(serde_json::json!({
            "shipped": "R-42",
            "quiet": null,
            "fragile": null,
            "missing": null,
            "first_item": "book",
        }))
    );
}

// Two builds of one workflow: the first had a `legacy` step that the second
// removed with a gravestone.
struct EvolvingV1;

#[workflow(name = "engine.evolving")]
impl EvolvingV1 {
    #[step]
    async fn legacy(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {}
}

struct EvolvingV2 {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.evolving")]
impl EvolvingV2 {
    removed_step!(legacy);

    #[step]
    async fn after(&self, _cx: &mut StepCx<()>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_for_a_removed_step_is_skipped_and_the_run_advances() {
    let t = TestDb::new().await;
    let run_id = t
        .client()
        .start::<EvolvingV1>(&())
        .await
        .expect("start")
        .run_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(EvolvingV2 {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        ["legacy#1 skipped/skipped", "after#1 completed/completed"]
    );
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:legacy#1",
            "step_skipped:legacy#1",
            "step_started:after#1",
            "step_completed:after#1",
            "finished"
        ]
    );
    let skipped = &view.events[2];
    assert_eq!(
        skipped.reason.as_deref(),
        Some("step `legacy` was removed from the workflow")
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

// Two builds of one workflow: the second renamed `old_name` without a gravestone.
struct RenamedV1;

#[workflow(name = "engine.renamed")]
impl RenamedV1 {
    #[step]
    async fn old_name(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn tail(&self, _cx: &mut StepCx<()>) {}
}

struct RenamedV2 {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.renamed")]
impl RenamedV2 {
    #[step]
    async fn new_name(&self, _cx: &mut StepCx<()>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }

    #[step]
    async fn tail(&self, _cx: &mut StepCx<()>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_for_a_step_the_definition_lacks_pauses_the_run() {
    let t = TestDb::new().await;
    let run_id = t
        .client()
        .start::<RenamedV1>(&())
        .await
        .expect("start")
        .run_id;
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(RenamedV2 {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "paused, not a crash loop"
    );

    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["old_name#1 failed/paused"]);
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:old_name#1",
            "step_failed:old_name#1",
            "paused"
        ]
    );
    let row = step(&view, "old_name", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::StepNotDefined")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("workflow `engine.renamed` has no step `old_name`")
    );
    assert_eq!(view.error_class, row.error_class);
    assert_eq!(view.error_message, row.error_message);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Typed {
    count: u32,
}

struct BadInputPauses {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.bad_input.pause", input = Typed)]
impl BadInputPauses {
    #[step]
    async fn only(&self, _cx: &mut StepCx<Typed>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

struct BadInputCancels {
    calls: Arc<AtomicU32>,
}

#[workflow(name = "engine.bad_input.cancel", input = Typed)]
#[on_exception(matching(pgbus_runtime::BadInput), action = "cancel")]
impl BadInputCancels {
    #[step]
    async fn only(&self, _cx: &mut StepCx<Typed>) {
        self.calls.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_that_does_not_deserialize_is_a_step_error() {
    let t = TestDb::new().await;
    let client = t.client();
    let calls = Arc::new(AtomicU32::new(0));
    let worker =
        t.db.worker()
            .register(BadInputPauses {
                calls: Arc::clone(&calls),
            })
            .register(BadInputCancels {
                calls: Arc::clone(&calls),
            })
            .build()
            .expect("worker");
    let paused = client
        .start::<BadInputPauses>(&Typed { count: 1 })
        .await
        .expect("start")
        .run_id;
    let cancelled = client
        .start::<BadInputCancels>(&Typed { count: 1 })
        .await
        .expect("start")
        .run_id;
    // What another program (or a hand edit) could leave in the column.
    t.execute(
        r#"UPDATE {schema}.runs SET input = '{"count": "many"}'"#,
        &[],
    )
    .await;

    assert_eq!(worker.run_until_idle().await.expect("run"), 2);

    let view = t.run(paused).await;
    assert_eq!(view.run.status, RunStatus::Paused, "the default policy");
    assert_eq!(steps(&view), ["only#1 failed/paused"]);
    let row = step(&view, "only", 1);
    assert_eq!(
        row.error_class.as_deref(),
        Some("pgbus_runtime::error::BadInput")
    );
    assert_eq!(
        row.error_message.as_deref(),
        Some("the run's input is not a valid `Typed`")
    );
    assert_eq!(row.error_causes.len(), 1);
    assert!(
        row.error_causes[0].contains("invalid type"),
        "{:?}",
        row.error_causes
    );

    let view = t.run(cancelled).await;
    assert_eq!(
        view.run.status,
        RunStatus::Cancelled,
        "the workflow's policy"
    );
    assert_eq!(steps(&view), ["only#1 failed/cancelled"]);
    assert_eq!(
        events(&view),
        [
            "started",
            "step_started:only#1",
            "step_failed:only#1",
            "cancelled:only#1"
        ]
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0, "no body ran");

    // The worker lives on: a good run still runs.
    let good = client
        .start::<BadInputPauses>(&Typed { count: 2 })
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(t.run(good).await.run.status, RunStatus::Finished);
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Its first step records an output, says it has begun, and waits for the test
/// to let it finish.
struct Gated {
    entered: Arc<Notify>,
    release: Arc<Notify>,
}

impl Gated {
    fn new() -> Self {
        Self {
            entered: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
        }
    }

    fn handles(&self) -> (Arc<Notify>, Arc<Notify>) {
        (Arc::clone(&self.entered), Arc::clone(&self.release))
    }
}

#[workflow(name = "engine.gated", input = bool)]
impl Gated {
    #[step]
    async fn hold(&self, cx: &mut StepCx<bool>) -> StepResult {
        cx.output(&"from the held attempt")?;
        self.entered.notify_one();
        self.release.notified().await;
        // Input `true`: this is the last step.
        Ok(if *cx.input() {
            Flow::Finish
        } else {
            Flow::Complete
        })
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<bool>) {}
}

/// Starts a `Gated` run, has the worker claim it in a task, runs `meddle` while the
/// body waits, lets the body finish, and returns the run's id.
async fn interleave(t: &TestDb, last_step: bool, meddle: &str) -> (pgbus_runtime::RunId, String) {
    let gated = Gated::new();
    let (entered, release) = gated.handles();
    let worker = t.db.worker().register(gated).build().expect("worker");
    let run_id = t
        .client()
        .start::<Gated>(&last_step)
        .await
        .expect("start")
        .run_id;

    let running = worker.clone();
    let attempt = tokio::spawn(async move { running.run_once().await });
    tokio::time::timeout(Duration::from_secs(5), entered.notified())
        .await
        .expect("the body starts");
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Performing);
    assert_eq!(step(&view, "hold", 1).status, StepStatus::InProgress);

    t.clock.advance(Duration::from_secs(1));
    t.execute(meddle, &[&run_id.0, &t.clock.now()]).await;
    release.notify_one();
    let ran = tokio::time::timeout(Duration::from_secs(5), attempt)
        .await
        .expect("the attempt ends")
        .expect("no panic")
        .expect("no database error");
    assert_eq!(ran, 1);
    (run_id, worker.id().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_lost_its_fence_is_ignored_and_recorded() {
    let cases = [
        (
            "the step row was cancelled",
            "UPDATE {schema}.steps SET status = 'cancelled', outcome = 'cancelled', finished_at = $2
             WHERE run_id = $1",
            RunStatus::Performing,
            StepStatus::Cancelled,
        ),
        (
            "another worker holds the attempt",
            "UPDATE {schema}.steps SET worker_id = 'worker-elsewhere', started_at = $2
             WHERE run_id = $1",
            RunStatus::Performing,
            StepStatus::InProgress,
        ),
        (
            "the run was cancelled while the step ran",
            "WITH s AS (UPDATE {schema}.steps SET status = 'cancelled', outcome = 'cancelled',
                                                  finished_at = $2
                        WHERE run_id = $1 AND status = 'in_progress')
             UPDATE {schema}.runs SET status = 'cancelled', cancelled_at = $2, updated_at = $2
             WHERE id = $1",
            RunStatus::Cancelled,
            StepStatus::Cancelled,
        ),
    ];
    for (what, meddle, run_status, step_status) in cases {
        let t = TestDb::new().await;
        let (run_id, worker_id) = interleave(&t, false, meddle).await;
        let view = t.run(run_id).await;
        assert_eq!(view.run.status, run_status, "{what}: the run is untouched");
        assert_eq!(
            view.run.updated_at,
            if run_status == RunStatus::Cancelled {
                at_ms(1_000)
            } else {
                t0()
            },
            "{what}"
        );
        assert_eq!(steps(&view).len(), 1, "{what}: nothing scheduled next");
        let row = step(&view, "hold", 1);
        assert_eq!(row.status, step_status, "{what}");
        assert_eq!(row.output, None, "{what}: the late output is discarded");
        assert_eq!(
            events(&view),
            [
                "started",
                "step_started:hold#1",
                "late_completion_ignored:hold#1"
            ],
            "{what}"
        );
        let late = &view.events[2];
        assert_eq!(late.step_id, Some(row.id), "{what}");
        assert_eq!(late.actor, worker_id, "{what}");
        assert_eq!(late.created_at, at_ms(1_000), "{what}");
        let details = late.details.as_ref().expect("details");
        assert_eq!(details["verb"], "Complete", "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_that_lands_while_a_step_runs_holds_the_run() {
    let pause = "UPDATE {schema}.runs SET status = 'paused', paused_at = $2, updated_at = $2
                 WHERE id = $1";

    // Not the last step: the outcome is recorded and the next row scheduled, but
    // the run stays paused, and nothing claims the next row.
    let t = TestDb::new().await;
    let (run_id, _) = interleave(&t, false, pause).await;
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(view.paused_at, Some(at_ms(1_000)));
    assert_eq!(view.run.current_step.as_deref(), Some("after"));
    assert_eq!(
        steps(&view),
        ["hold#1 completed/completed", "after#1 scheduled/-"]
    );
    assert_eq!(
        step(&view, "hold", 1).output,
        Some(serde_json::json!("from the held attempt"))
    );
    let worker =
        t.db.worker()
            .register(Gated::new())
            .build()
            .expect("worker");
    assert_eq!(worker.run_until_idle().await.expect("run"), 0, "held");

    // The last step still finishes the run.
    let t = TestDb::new().await;
    let (run_id, _) = interleave(&t, true, pause).await;
    let view = t.run(run_id).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(view.run.finished_at, Some(at_ms(1_000)));
    assert_eq!(steps(&view), ["hold#1 completed/finished_early"]);
}
