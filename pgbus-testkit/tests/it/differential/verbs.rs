//! Verbs, policies, guards, lost claims and operator actions.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_policy_and_guard_leaves_the_same_history() {
    let inputs = [
        script("complete"),
        script("finish"),
        script("pause"),
        script("cancel"),
        script("skip"),
        script("reattempt"),
        script("flaky_once"),
        script("flaky_always"),
        script("fatal"),
        script("other_error"),
        script("guard_error"),
        Script {
            cancel: true,
            ..script("complete")
        },
        Script {
            skip: true,
            ..script("complete")
        },
    ];
    let projections = both(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| {
            let inputs = inputs.clone();
            async move {
                let mut runs = Vec::new();
                for input in &inputs {
                    runs.push(driver.start::<Verbs>(input).await);
                }
                drive(&driver).await;
                (driver, runs)
            }
        },
    )
    .await;

    // The histories are not only equal but right: spot-check the table.
    let status = |i: usize| projections[i].status;
    assert_eq!(status(0), RunStatus::Finished);
    assert_eq!(status(1), RunStatus::Finished);
    assert_eq!(status(2), RunStatus::Paused);
    assert_eq!(status(3), RunStatus::Cancelled);
    assert_eq!(status(4), RunStatus::Finished);
    assert_eq!(projections[5].steps[1].attempt, 2, "reattempted once");
    assert_eq!(
        projections[7]
            .steps
            .iter()
            .filter(|s| s.name == "act")
            .count(),
        3,
        "max_reattempts = 2"
    );
    assert_eq!(
        projections[7].steps[2].outcome,
        Some(StepOutcome::Skipped),
        "terminal_action = skip"
    );
    assert_eq!(
        status(8),
        RunStatus::Cancelled,
        "workflow policy naming Fatal"
    );
    assert_eq!(status(9), RunStatus::Paused, "no policy: pause");
    assert_eq!(
        status(10),
        RunStatus::Cancelled,
        "a guard's Fatal goes to the policies"
    );
    assert_eq!(status(11), RunStatus::Cancelled, "cancel_if");
    assert_eq!(
        projections[12].steps[1].status,
        StepStatus::Skipped,
        "skip_if"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gravestone_is_skipped_and_a_lost_step_pauses_the_same_way() {
    for lost in [false, true] {
        let projections = both(
            |env| env.register(Before),
            |worker| worker.register(Before),
            |driver| async move {
                let run = driver.start::<Before>(&1).await;
                driver.run_until_idle().await; // `a`; `b` is parked a minute out
                let driver = match driver {
                    Driver::Memory(env) => {
                        let env = Arc::try_unwrap(env).expect("the only handle");
                        Driver::Memory(Arc::new(if lost {
                            env.register(AfterLoss)
                        } else {
                            env.register(AfterRemoval)
                        }))
                    }
                    Driver::Postgres {
                        db, clock, client, ..
                    } => {
                        let builder = db.db().worker().notifications(false);
                        let worker = if lost {
                            builder.register(AfterLoss)
                        } else {
                            builder.register(AfterRemoval)
                        };
                        Driver::Postgres {
                            worker: worker.build().expect("worker"),
                            db,
                            clock,
                            client,
                        }
                    }
                };
                drive(&driver).await;
                (driver, vec![run])
            },
        )
        .await;
        let expected = if lost {
            RunStatus::Paused
        } else {
            RunStatus::Finished
        };
        assert_eq!(projections[0].status, expected, "lost = {lost}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_starts_agree() {
    both(
        |env| env.register(Before),
        |worker| worker.register(Before),
        |driver| async move {
            let first = driver.start_keyed::<Before>(&1, "same").await;
            let second = driver.start_keyed::<Before>(&2, "same").await;
            assert_eq!(first, second);
            drive(&driver).await;
            (driver, vec![first])
        },
    )
    .await;
}

/// Lets a test hold a body open and act while it runs.
#[derive(Default)]
pub(super) struct Gate {
    pub(super) entered: tokio::sync::Notify,
    pub(super) release: tokio::sync::Notify,
}

pub(super) struct Gated {
    pub(super) gate: std::sync::Arc<Gate>,
}

#[workflow(name = "diff.gated", input = u8)]
impl Gated {
    #[step]
    async fn hold(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&"held")?;
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u8>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_that_lost_its_claim_is_ignored_the_same_way() {
    use std::sync::Arc;

    // Memory: the claim is taken away while the body runs.
    let gate = Arc::new(Gate::default());
    let env = Arc::new(TestEnv::new().register(Gated {
        gate: Arc::clone(&gate),
    }));
    let memory_run = env.start::<Gated>(&1).expect("start").run_id;
    let running = tokio::spawn({
        let env = Arc::clone(&env);
        async move { env.run_next().await }
    });
    gate.entered.notified().await;
    assert!(env.lose_claim(memory_run));
    gate.release.notify_one();
    let record = running.await.expect("join").expect("an attempt ran");
    assert!(record.late);
    assert!(
        env.run_until_idle().await.is_empty(),
        "nothing follows a lost claim"
    );

    // Postgres: the same, the row re-pointed in SQL.
    let clock = ManualClock::new(default_start());
    let db = TestDatabase::with_clock(Clock::Manual(clock))
        .await
        .expect("schema");
    let gate = Arc::new(Gate::default());
    let worker = db
        .db()
        .worker()
        .notifications(false)
        .register(Gated {
            gate: Arc::clone(&gate),
        })
        .build()
        .expect("worker");
    let client = db.db().client();
    let pg_run = client.start::<Gated>(&1).await.expect("start").run_id;
    let running = tokio::spawn({
        let worker = worker.clone();
        async move { worker.run_once().await }
    });
    gate.entered.notified().await;
    let sql = format!(
        "UPDATE \"{}\".steps SET worker_id = 'elsewhere' WHERE run_id = $1 AND status = 'in_progress'",
        db.db().schema()
    );
    let moved = db
        .db()
        .pool()
        .get()
        .await
        .expect("connection")
        .execute(&sql, &[&pg_run.0])
        .await
        .expect("re-point the claim");
    assert_eq!(moved, 1);
    gate.release.notify_one();
    assert_eq!(running.await.expect("join").expect("run"), 1);
    assert_eq!(worker.run_until_idle().await.expect("run"), 0);

    let memory = project(&env.run(memory_run).expect("run"));
    let postgres = project(&client.run(pg_run).await.expect("run"));
    assert_eq!(
        memory, postgres,
        "memory (left) and Postgres (right) disagree"
    );
    assert_eq!(
        memory.status,
        RunStatus::Performing,
        "the lost attempt changed nothing"
    );
    assert_eq!(
        memory.events.last().map(|e| e.0.as_str()),
        Some("late_completion_ignored")
    );
    assert_eq!(memory.steps[0].output, None, "the late output is discarded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_worker_never_skips_a_step_the_run_has() {
    // The run starts under `Before` (a, b, c); the only worker runs an older
    // version without `b`. The run follows its own step list: `b` is scheduled and
    // pauses the run with StepNotDefined instead of being skipped.
    let projections = both(
        |env| env.register(AfterLoss),
        |worker| worker.register(AfterLoss),
        |driver| async move {
            let run = driver.start::<Before>(&1).await;
            drive(&driver).await;
            (driver, vec![run])
        },
    )
    .await;
    let run = &projections[0];
    assert_eq!(run.status, RunStatus::Paused);
    let names: Vec<&str> = run.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "b"], "b was not skipped");
    assert!(
        run.error
            .0
            .as_deref()
            .unwrap_or_default()
            .ends_with("StepNotDefined")
    );
}

// ---- operator actions, stalls and retention -------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_actions_leave_the_same_history_and_refusals() {
    let projections = both(
        |env| env.register(Verbs),
        |worker| worker.register(Verbs),
        |driver| async move {
            let asked = driver.start::<Verbs>(&script("pause")).await;
            let failed = driver.start::<Verbs>(&script("other_error")).await;
            let early = driver.start::<Verbs>(&script("complete")).await;
            let held = driver.start::<Verbs>(&script("complete")).await;
            let dropped = driver.start::<Verbs>(&script("complete")).await;
            assert_eq!(
                driver.act(early, Action::Pause, "before it starts").await,
                Ok(RunStatus::Paused)
            );
            driver.run_until_idle().await;

            // A `Pause` verb: nothing to skip; resume schedules `follow` 5 min on.
            let refused = driver.act(asked, Action::Skip, "r").await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("nothing to skip")),
                "{refused:?}"
            );
            assert_eq!(
                driver.act(asked, Action::Resume, "go on").await,
                Ok(RunStatus::Ready)
            );
            // An error pause: resume runs a new attempt (which fails again), then
            // skip passes over it.
            driver.advance(Duration::from_secs(7));
            assert_eq!(
                driver.act(failed, Action::Resume, "retry").await,
                Ok(RunStatus::Ready)
            );
            driver.run_until_idle().await;
            assert_eq!(
                driver.act(failed, Action::Skip, "give up").await,
                Ok(RunStatus::Ready)
            );
            // Paused before its first step: resume lets it start.
            assert_eq!(
                driver.act(early, Action::Resume, "r").await,
                Ok(RunStatus::Ready)
            );
            // A held row: skipped; cancel a scheduled one.
            assert_eq!(
                driver.act(held, Action::Pause, "r").await,
                Ok(RunStatus::Paused)
            );
            assert_eq!(
                driver.act(held, Action::Skip, "not this one").await,
                Ok(RunStatus::Finished)
            );
            assert_eq!(
                driver.act(dropped, Action::Cancel, "bye").await,
                Ok(RunStatus::Cancelled)
            );
            let refused = driver.act(dropped, Action::Resume, "r").await;
            assert!(
                refused
                    .as_ref()
                    .is_err_and(|e| e.contains("has ended (cancelled)")),
                "{refused:?}"
            );
            let refused = driver.act(early, Action::Resume, "r").await;
            assert!(
                refused.as_ref().is_err_and(|e| e.contains("not paused")),
                "{refused:?}"
            );
            drive(&driver).await;
            (driver, vec![asked, failed, early, held, dropped])
        },
    )
    .await;
    let status: Vec<RunStatus> = projections.iter().map(|p| p.status).collect();
    assert_eq!(
        status,
        [
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Cancelled
        ]
    );
}
