//! The worker on a real server: what it claims, how it is built, workers racing
//! on the same due steps, and the long-running loop that wakes on `NOTIFY`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunFilter, RunStatus, StepStatus, Worker};

use crate::pg::{TestDb, eventually, steps};

struct Alpha;

#[workflow(name = "worker.alpha")]
impl Alpha {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<()>) {}
}

/// On Alpha's queue: only the workflow filter keeps Alpha's worker off it.
struct Beta;

#[workflow(name = "worker.beta")]
impl Beta {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}
}

/// On a queue of its own, and one step on yet another.
struct Gamma;

#[workflow(name = "worker.gamma", queue = "gamma")]
impl Gamma {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}

    #[step(queue = "gamma.slow")]
    async fn two(&self, _cx: &mut StepCx<()>) {}
}

/// Another type under Alpha's durable name.
struct AlphaAgain;

#[workflow(name = "worker.alpha")]
impl AlphaAgain {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_claims_only_steps_of_workflows_it_registered() {
    let t = TestDb::new().await;
    let client = t.client();
    let alpha = client.start::<Alpha>(&()).await.expect("start").run_id;
    let beta = client.start::<Beta>(&()).await.expect("start").run_id;

    let alpha_worker = t.db.worker().register(Alpha).build().expect("worker");
    assert_eq!(alpha_worker.queues(), ["default"]);
    assert_eq!(alpha_worker.run_until_idle().await.expect("run"), 2);
    assert_eq!(t.run(alpha).await.run.status, RunStatus::Finished);

    // Beta's run waits for a worker that knows it.
    let view = t.run(beta).await;
    assert_eq!(view.run.status, RunStatus::Ready);
    assert_eq!(steps(&view), ["one#1 scheduled/-"]);
    assert_eq!(view.steps[0].started_at, None);

    // A worker of Beta's workflow limited to another queue does not take it either.
    let elsewhere =
        t.db.worker()
            .register(Beta)
            .queue("elsewhere")
            .build()
            .expect("worker");
    assert_eq!(elsewhere.run_until_idle().await.expect("run"), 0);
    assert_eq!(t.run(beta).await.steps[0].status, StepStatus::Scheduled);

    let beta_worker = t.db.worker().register(Beta).build().expect("worker");
    assert_eq!(beta_worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(t.run(beta).await.run.status, RunStatus::Finished);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn building_a_worker_refuses_duplicates_and_empty_registries() {
    let t = TestDb::new().await;
    let error = t.db.worker().build().expect_err("nothing registered");
    assert!(matches!(error, Error::NothingToRun), "{error:?}");

    for builder in [
        t.db.worker().register(Alpha).register(Alpha),
        t.db.worker()
            .register(Alpha)
            .register(Beta)
            .register(AlphaAgain),
    ] {
        let error = builder.build().expect_err("a duplicate name");
        assert!(
            matches!(&error, Error::DuplicateWorkflow { workflow } if workflow == "worker.alpha"),
            "{error:?}"
        );
    }

    // Without `queue(..)`, every queue its workflows and their steps use.
    let worker =
        t.db.worker()
            .register(Alpha)
            .register(Gamma)
            .build()
            .expect("two workflows");
    assert_eq!(worker.queues(), ["default", "gamma", "gamma.slow"]);
}

/// Counts how often each (run, step, attempt) body runs, across workers.
type Calls = Arc<Mutex<HashMap<(i64, String, u32), u32>>>;

struct Counted {
    calls: Calls,
}

impl Counted {
    fn count(&self, cx: &StepCx<u32>) {
        let key = (cx.run_id().0, cx.step().to_owned(), cx.attempt());
        *self
            .calls
            .lock()
            .expect("not poisoned")
            .entry(key)
            .or_default() += 1;
    }
}

#[workflow(name = "worker.counted", input = u32)]
impl Counted {
    #[step]
    async fn first(&self, cx: &mut StepCx<u32>) -> Flow {
        self.count(cx);
        // Every other run takes a second attempt.
        if cx.input().is_multiple_of(2) && cx.attempt() == 1 {
            Flow::reattempt(Duration::ZERO)
        } else {
            Flow::Complete
        }
    }

    #[step]
    async fn second(&self, cx: &mut StepCx<u32>) {
        self.count(cx);
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_racing_on_the_same_due_steps_run_each_attempt_once() {
    const RUNS: u32 = 200;
    let t = TestDb::new().await;
    let calls: Calls = Arc::default();
    let mut workers: Vec<Worker> = Vec::new();
    for _ in 0..4 {
        // Each with its own pool, as separate processes would be.
        let db = t.second_connection().await;
        let worker = db
            .worker()
            .register(Counted {
                calls: Arc::clone(&calls),
            })
            .concurrency(4)
            .build()
            .expect("worker");
        workers.push(worker);
    }
    let client = t.client();
    for i in 0..RUNS {
        client.start::<Counted>(&i).await.expect("start");
    }

    let expected_attempts = usize::try_from(RUNS * 2 + RUNS / 2).expect("small");
    let mut ran = 0;
    for _round in 0..20 {
        let mut racing = tokio::task::JoinSet::new();
        for worker in &workers {
            let worker = worker.clone();
            racing.spawn(async move { worker.run_until_idle().await });
        }
        while let Some(result) = racing.join_next().await {
            ran += result.expect("no panic").expect("no database error");
        }
        let unfinished = t
            .count(
                "SELECT count(*) FROM {schema}.runs WHERE status <> 'finished'",
                &[],
            )
            .await;
        if unfinished == 0 {
            break;
        }
    }

    let calls = calls.lock().expect("not poisoned").clone();
    assert_eq!(calls.len(), expected_attempts, "every attempt ran");
    let twice: Vec<_> = calls.iter().filter(|(_, n)| **n != 1).collect();
    assert!(twice.is_empty(), "ran more than once: {twice:?}");
    assert_eq!(ran, expected_attempts, "claims add up to the attempts");

    let finished = t
        .count(
            "SELECT count(*) FROM {schema}.runs WHERE status = 'finished'",
            &[],
        )
        .await;
    assert_eq!(finished, i64::from(RUNS));
    let started = t
        .count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'step_started'",
            &[],
        )
        .await;
    assert_eq!(started, i64::try_from(expected_attempts).expect("small"));
    let open = t
        .count(
            "SELECT count(*) FROM {schema}.steps WHERE status IN ('scheduled', 'in_progress')",
            &[],
        )
        .await;
    assert_eq!(open, 0);
    let late = t
        .count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'late_completion_ignored'",
            &[],
        )
        .await;
    assert_eq!(late, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_until_wakes_on_notify_and_stops_on_shutdown() {
    let t = TestDb::on_database_clock().await;
    let worker =
        t.db.worker()
            .register(Alpha)
            .poll_interval(Duration::from_mins(1))
            .build()
            .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = worker.clone();
    let handle = tokio::spawn(async move {
        running
            .run_until(async {
                let _ = stopped.await;
            })
            .await
    });

    // Wait until the worker listens, so what follows can only be a wake-up by
    // NOTIFY: the poll interval is a minute.
    assert!(t.worker_listens().await, "the worker listens");
    let registered = t.query("SELECT id, pid FROM {schema}.workers", &[]).await;
    assert_eq!(registered.len(), 1);
    assert_eq!(registered[0].get::<_, String>(0), worker.id());

    let client = t.client();
    for _ in 0..2 {
        // Started while the worker sleeps: the start's NOTIFY wakes it.
        let run_id = client.start::<Alpha>(&()).await.expect("start").run_id;
        let finished = eventually(Duration::from_secs(5), || async {
            t.run(run_id).await.run.status == RunStatus::Finished
        })
        .await;
        assert!(finished, "finished well before the 60 s poll");
    }

    stop.send(()).expect("the worker is running");
    let result = tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the worker stops")
        .expect("no panic");
    assert!(result.is_ok(), "{result:?}");
    let listen = format!("LISTEN \"pgbus_{}\"", t.schema());
    let gone = eventually(Duration::from_secs(5), || async {
        t.count(
            "SELECT count(*) FROM pg_stat_activity WHERE query = $1",
            &[&listen],
        )
        .await
            == 0
    })
    .await;
    assert!(gone, "the LISTEN connection is closed");

    // Stopped: a new run stays where it is.
    let after = client.start::<Alpha>(&()).await.expect("start").run_id;
    assert_eq!(t.run(after).await.run.status, RunStatus::Ready);
    let runs = client
        .list_runs(&RunFilter::new().status(RunStatus::Finished))
        .await
        .expect("list");
    assert_eq!(runs.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_notifications_a_worker_still_makes_progress_by_polling() {
    let t = TestDb::on_database_clock().await;
    let worker =
        t.db.worker()
            .register(Alpha)
            .notifications(false)
            .poll_interval(Duration::from_millis(20))
            .build()
            .expect("worker");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = worker.clone();
    let handle = tokio::spawn(async move {
        running
            .run_until(async {
                let _ = stopped.await;
            })
            .await
    });
    let run_id = t.client().start::<Alpha>(&()).await.expect("start").run_id;
    let finished = eventually(Duration::from_secs(5), || async {
        t.run(run_id).await.run.status == RunStatus::Finished
    })
    .await;
    assert!(finished);
    stop.send(()).expect("running");
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("the worker stops")
        .expect("no panic")
        .expect("no error");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stall_horizon_is_the_workers_threshold_cut_to_the_longest_duration() {
    let t = TestDb::new().await;
    let client = t.client();
    let cases = [
        (None, 5 * 60_000),
        (Some(Duration::from_secs(90)), 90_000),
        // Beyond any time Postgres holds: cut to `36500d`, not a claim that fails.
        (Some(Duration::MAX), 36_500 * 86_400_000),
    ];
    for (threshold, stall_ms) in cases {
        let mut builder = t.db.worker().register(Beta);
        if let Some(threshold) = threshold {
            builder = builder.stall_threshold(threshold);
        }
        let worker = builder.build().expect("worker");
        let run_id = client.start::<Beta>(&()).await.expect("start").run_id;
        assert_eq!(
            worker.run_until_idle().await.expect("run"),
            1,
            "{threshold:?}"
        );
        let view = t.run(run_id).await;
        assert_eq!(view.run.status, RunStatus::Finished, "{threshold:?}");
        let row = &view.steps[0];
        assert_eq!(
            row.stall_at,
            row.started_at
                .map(|started| started + chrono::Duration::milliseconds(stall_ms)),
            "{threshold:?}"
        );
    }
}

struct Routine;

#[workflow(name = "worker.routine", priority = 5)]
impl Routine {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}
}

struct Urgent;

#[workflow(name = "worker.urgent", priority = -1)]
impl Urgent {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_takes_at_most_the_free_slots_lowest_priority_number_first() {
    let t = TestDb::new().await;
    let client = t.client();
    let mut routine = Vec::new();
    for _ in 0..4 {
        routine.push(client.start::<Routine>(&()).await.expect("start").run_id);
    }
    // Started last, due last, but urgent.
    let urgent = client.start::<Urgent>(&()).await.expect("start").run_id;
    t.clock.advance(Duration::from_secs(1));
    let worker =
        t.db.worker()
            .register(Routine)
            .register(Urgent)
            .concurrency(3)
            .build()
            .expect("worker");

    assert_eq!(worker.run_once().await.expect("run"), 3, "three slots");
    assert_eq!(t.run(urgent).await.run.status, RunStatus::Finished);
    let mut statuses = Vec::new();
    for run_id in &routine {
        statuses.push(t.run(*run_id).await.run.status);
    }
    assert_eq!(
        statuses,
        [
            RunStatus::Finished,
            RunStatus::Finished,
            RunStatus::Ready,
            RunStatus::Ready
        ],
        "then the oldest due"
    );
    assert_eq!(worker.run_until_idle().await.expect("run"), 2);
}

/// Five plain steps, each recording one more than the step before it did.
struct Chain;

impl Chain {
    fn next(cx: &mut StepCx<()>, before: &str) -> StepResult {
        let seen: u32 = cx
            .output_of(before)?
            .expect("the step before recorded its output");
        cx.output(&(seen + 1))?;
        Ok(Flow::Complete)
    }
}

#[workflow(name = "worker.chain")]
impl Chain {
    #[step]
    async fn s1(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&1_u32)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn s2(&self, cx: &mut StepCx<()>) -> StepResult {
        Self::next(cx, "s1")
    }

    #[step]
    async fn s3(&self, cx: &mut StepCx<()>) -> StepResult {
        Self::next(cx, "s2")
    }

    #[step]
    async fn s4(&self, cx: &mut StepCx<()>) -> StepResult {
        Self::next(cx, "s3")
    }

    #[step]
    async fn s5(&self, cx: &mut StepCx<()>) -> StepResult {
        Self::next(cx, "s4")
    }
}

/// Runs one `Chain` run to its end under `run_until` with `eager_steps`, on
/// the database clock; returns which steps started in the transaction that
/// scheduled them (an eager step's `started_at` is its `scheduled_at`; a
/// claim's is a later transaction's clock).
async fn eager_steps_taken(eager_steps: usize) -> Vec<String> {
    let t = TestDb::on_database_clock().await;
    let client = t.client();
    let worker =
        t.db.worker()
            .register(Chain)
            .concurrency(2)
            .eager_steps(eager_steps)
            .build()
            .expect("worker");
    let stop = Arc::new(tokio::sync::Notify::new());
    let loop_ = tokio::spawn({
        let stop = Arc::clone(&stop);
        async move { worker.run_until(stop.notified()).await }
    });
    let run = client.start::<Chain>(&()).await.expect("start").run_id;
    assert!(
        eventually(Duration::from_secs(20), || async {
            client.run(run).await.expect("view").run.status == RunStatus::Finished
        })
        .await,
        "the run finished"
    );
    stop.notify_one();
    loop_.await.expect("join").expect("worker loop");
    let view = client.run(run).await.expect("view");
    assert_eq!(
        view.steps.last().and_then(|s| s.output.clone()),
        Some(5.into())
    );
    view.steps
        .iter()
        .filter(|s| s.started_at == Some(s.scheduled_at))
        .map(|s| s.step_name.clone())
        .collect()
}

#[tokio::test]
async fn a_slot_runs_a_runs_next_steps_eagerly_up_to_its_limit() {
    // The first step is claimed; every later one follows in its slot.
    assert_eq!(eager_steps_taken(16).await, ["s2", "s3", "s4", "s5"]);
    // Two in a row, then the queue (s4 is claimed), then two more.
    assert_eq!(eager_steps_taken(2).await, ["s2", "s3", "s5"]);
    // None: every step goes through the queue.
    assert!(eager_steps_taken(0).await.is_empty());
}

/// A first step that tells when it started and waits to be let go; then a
/// plain one.
struct Held {
    started: tokio::sync::mpsc::UnboundedSender<()>,
    release: Arc<tokio::sync::Notify>,
}

#[workflow(name = "worker.held")]
impl Held {
    #[step]
    async fn s1(&self, _cx: &mut StepCx<()>) {
        let _ = self.started.send(());
        self.release.notified().await;
    }

    #[step]
    async fn s2(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test(flavor = "current_thread")]
async fn a_worker_that_began_stopping_takes_no_new_step_eagerly() {
    let logs = crate::connection_pg::Logs::capture();
    let _capturing = tracing::subscriber::set_default(logs.clone());
    let t = TestDb::new().await;
    let (started, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let worker =
        t.db.worker()
            .register(Held {
                started,
                release: Arc::clone(&release),
            })
            .build()
            .expect("worker");
    let stop = Arc::new(tokio::sync::Notify::new());
    let loop_ = tokio::spawn({
        let stop = Arc::clone(&stop);
        async move { worker.run_until(stop.notified()).await }
    });
    let run = t.client().start::<Held>(&()).await.expect("start").run_id;
    started_rx.recv().await.expect("s1 started");
    // Shutdown begins while s1 runs; s1 ends after that.
    stop.notify_one();
    assert!(
        eventually(Duration::from_secs(10), || async {
            logs.count("worker stopping") == 1
        })
        .await,
        "the worker began stopping"
    );
    release.notify_one();
    loop_.await.expect("join").expect("worker loop");
    // s2 was scheduled for any worker, not started here.
    let view = t.client().run(run).await.expect("view");
    assert_eq!(
        steps(&view),
        ["s1#1 completed/completed", "s2#1 scheduled/-"]
    );
    assert_eq!(view.run.status, RunStatus::Ready);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_group_commit_or_without_every_run_finishes_and_each_step_runs_once() {
    for group_commit in [true, false] {
        let t = TestDb::new().await;
        let db = pgbus_runtime::Database::builder(&crate::pg::database_url())
            .schema(t.db.schema().clone())
            .clock(t.db.clock().clone())
            .group_commit(group_commit)
            .connect()
            .await
            .expect("connect");
        let client = db.client();
        let mut runs = Vec::new();
        for _ in 0..16 {
            runs.push(client.start::<Chain>(&()).await.expect("start").run_id);
        }
        let worker = db
            .worker()
            .register(Chain)
            .concurrency(8)
            .notifications(false)
            .build()
            .expect("worker");
        worker.run_until_idle().await.expect("run");
        for run in runs {
            let view = client.run(run).await.expect("view");
            assert_eq!(view.run.status, RunStatus::Finished, "{group_commit}");
            assert_eq!(
                view.steps
                    .iter()
                    .map(|s| (s.step_name.as_str(), s.attempt))
                    .collect::<Vec<_>>(),
                [("s1", 1), ("s2", 1), ("s3", 1), ("s4", 1), ("s5", 1)],
                "each step once ({group_commit})"
            );
            assert_eq!(
                view.steps.last().and_then(|s| s.output.clone()),
                Some(5.into())
            );
        }
    }
}
