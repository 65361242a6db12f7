//! The sweep: attempts past their stall horizon or held by a worker that stopped
//! heartbeating end with `StepStalled` and the stall action; a healthy attempt is
//! left alone; the first body's completion then loses its fence.

use std::sync::Arc;
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunStatus, StallAction, StepOutcome, StepStatus, SweepReport, Worker};
use tokio::sync::Notify;

use crate::pg::TestDb;

#[derive(Default)]
struct Gate {
    entered: Notify,
    release: Notify,
}

struct Hung {
    gate: Arc<Gate>,
}

#[workflow(name = "sweep.hung")]
impl Hung {
    #[step(timeout = "5s")]
    async fn slow(&self, _cx: &mut StepCx<()>) {
        self.gate.entered.notify_one();
        self.gate.release.notified().await;
    }

    #[step]
    async fn next(&self, _cx: &mut StepCx<()>) {}
}

fn worker(t: &TestDb, gate: &Arc<Gate>, action: StallAction) -> Worker {
    t.db.worker()
        .notifications(false)
        .stall_action(action)
        .register(Hung {
            gate: Arc::clone(gate),
        })
        .build()
        .expect("worker")
}

/// Starts a run and leaves its first attempt hanging in worker `a`'s hands.
async fn hang(t: &TestDb, a: &Worker, gate: &Arc<Gate>) -> (RunId, tokio::task::JoinHandle<usize>) {
    let run = t.client().start::<Hung>(&()).await.expect("start").run_id;
    let a = a.clone();
    let hung = tokio::spawn(async move { a.run_once().await.expect("run") });
    gate.entered.notified().await;
    (run, hung)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_past_its_timeout_is_paused_and_its_late_completion_ignored() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a = worker(&t, &gate, StallAction::Pause);
    let sweeper = worker(&t, &gate, StallAction::Pause);
    let (run, hung) = hang(&t, &a, &gate).await;

    assert_eq!(
        sweeper.sweep().await.expect("sweep"),
        SweepReport::default(),
        "not stalled yet"
    );
    t.clock.advance(Duration::from_secs(5));
    let report = sweeper.sweep().await.expect("sweep");
    assert_eq!(report.repaired, 1);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(view.steps[0].status, StepStatus::Failed);
    assert!(
        view.steps[0]
            .error_class
            .as_deref()
            .unwrap_or_default()
            .ends_with("StepStalled")
    );
    let stall = view
        .events
        .iter()
        .find(|e| e.event == "stall_detected")
        .expect("stall_detected");
    assert_eq!(stall.reason.as_deref(), Some("timeout"));
    assert_eq!(stall.actor, "sweep");

    gate.release.notify_one();
    hung.await.expect("join");
    let after = t.run(run).await;
    assert_eq!(
        after.events.last().map(|e| e.event.as_str()),
        Some("late_completion_ignored")
    );
    assert_eq!(
        t.run(run).await.run.status,
        RunStatus::Paused,
        "the late body changed nothing"
    );
    assert_eq!(
        sweeper.sweep().await.expect("sweep"),
        SweepReport::default(),
        "repaired once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_stopped_heartbeating_loses_its_attempts_which_are_reattempted() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a = worker(&t, &gate, StallAction::Pause);
    let sweeper = worker(&t, &gate, StallAction::reattempt(Duration::from_secs(1)));
    let (run, hung) = hang(&t, &a, &gate).await;

    // Far below the step's 5 s timeout, far above nothing: a fresh heartbeat.
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, 0);
    // The worker's row says it was alive 31 s ago: lost (threshold 30 s).
    t.execute(
        "UPDATE {schema}.workers SET heartbeat_at = heartbeat_at - interval '31 seconds' WHERE id = $1",
        &[&a.id()],
    )
    .await;
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, 1);

    let view = t.run(run).await;
    let stall = view
        .events
        .iter()
        .find(|e| e.event == "stall_detected")
        .expect("stall_detected");
    assert_eq!(stall.reason.as_deref(), Some("worker_lost"));
    assert_eq!(view.steps[0].outcome, Some(StepOutcome::Reattempted));
    assert_eq!(view.steps[1].attempt, 2);

    gate.release.notify_one();
    hung.await.expect("join");
    // The late body's outcome went out with its writes in one pipeline
    // behind a fence that missed: none of them stayed.
    let late = t.run(run).await;
    assert_eq!(
        late.steps
            .iter()
            .map(|s| (s.step_name.as_str(), s.attempt))
            .collect::<Vec<_>>(),
        [("slow", 1), ("slow", 2)],
        "no next step from the late body"
    );
    assert_eq!(late.run.status, RunStatus::Ready);
    assert!(!late.events.iter().any(|e| e.event == "step_completed"));
    // The new attempt runs on the sweeper after its wait; the gate lets it through.
    t.clock.advance(Duration::from_secs(1));
    gate.release.notify_one();
    sweeper.run_until_idle().await.expect("run");
    let done = t.run(run).await;
    assert_eq!(done.run.status, RunStatus::Finished);
    assert!(
        done.events
            .iter()
            .any(|e| e.event == "late_completion_ignored")
    );
    assert_eq!(
        done.steps.iter().filter(|s| s.step_name == "next").count(),
        1,
        "the next step ran once"
    );
}

/// A worker that sweeps with `retention`.
fn retaining(t: &TestDb, retention: Option<Duration>) -> Worker {
    t.db.worker()
        .notifications(false)
        .retention(retention)
        .register(Hung {
            gate: Arc::default(),
        })
        .build()
        .expect("worker")
}

/// Inserts `count` runs of `status` last changed `age` before the pinned clock,
/// each with a step row, an event and a signal, straight in SQL.
async fn seed_runs(t: &TestDb, count: i32, status: &str, age_secs: i64) {
    t.execute(
        "WITH r AS (
             INSERT INTO {schema}.runs (workflow, definition_digest, options_digest, status, input,
                                        created_at, updated_at, finished_at)
             SELECT 'sweep.hung', 'd', 'o', $2, 'null', t, t, t
             FROM generate_series(1, $1) AS g(i),
                  LATERAL (SELECT $3::timestamptz - $4::bigint * interval '1 second') AS at(t)
             RETURNING id, created_at
         ), s AS (
             INSERT INTO {schema}.steps (run_id, workflow, step_name, attempt, status, queue,
                                         priority, scheduled_at, created_at)
             SELECT id, 'sweep.hung', 'slow', 1, 'completed', 'default', 0, created_at, created_at
             FROM r
         ), e AS (
             INSERT INTO {schema}.events (run_id, event, actor, created_at)
             SELECT id, 'started', 'client', created_at FROM r
         )
         INSERT INTO {schema}.signals (run_id, name, created_at)
         SELECT id, 'sig', created_at FROM r",
        &[&count, &status, &t.clock.now(), &age_secs],
    )
    .await;
}

#[tokio::test]
async fn retention_deletes_old_ended_runs_with_their_rows_in_bounded_batches() {
    let t = TestDb::new().await;
    let sweeper = retaining(&t, Some(Duration::from_hours(1)));
    let per_sweep = pgbus_runtime::worker::RETENTION_BATCH
        * i64::try_from(pgbus_runtime::worker::RETENTION_BATCHES).expect("small");
    let old = i32::try_from(per_sweep + 7).expect("small");
    seed_runs(&t, old - 100, "finished", 7200).await;
    seed_runs(&t, 100, "cancelled", 7200).await;
    // Kept: ended too recently, or old but not ended.
    seed_runs(&t, 3, "finished", 1800).await;
    seed_runs(&t, 3, "paused", 7200).await;
    seed_runs(&t, 3, "ready", 7200).await;

    let first = sweeper.sweep().await.expect("sweep");
    assert_eq!(
        first.runs_deleted,
        u64::try_from(per_sweep).expect("positive"),
        "one sweep deletes at most its batches"
    );
    let second = sweeper.sweep().await.expect("sweep");
    assert_eq!(second.runs_deleted, 7);
    assert_eq!(sweeper.sweep().await.expect("sweep").runs_deleted, 0);

    assert_eq!(t.count("SELECT count(*) FROM {schema}.runs", &[]).await, 9);
    for table in ["steps", "events", "signals"] {
        assert_eq!(
            t.count(
                &format!(
                    "SELECT count(*) FROM {{schema}}.{table} x
                     WHERE NOT EXISTS (SELECT 1 FROM {{schema}}.runs r WHERE r.id = x.run_id)"
                ),
                &[]
            )
            .await,
            0,
            "no {table} row outlives its run"
        );
        assert_eq!(
            t.count(&format!("SELECT count(*) FROM {{schema}}.{table}"), &[])
                .await,
            9
        );
    }

    // Without retention nothing goes.
    let keeper = retaining(&t, None);
    t.clock.advance(Duration::from_hours(365 * 24));
    assert_eq!(keeper.sweep().await.expect("sweep").runs_deleted, 0);
    // A retention beyond any date is cut to 36500d, not an SQL range error.
    let forever =
        t.db.worker()
            .notifications(false)
            .retention(Some(Duration::MAX))
            .lost_worker_threshold(Duration::MAX)
            .register(Hung {
                gate: Arc::default(),
            })
            .build()
            .expect("worker");
    assert_eq!(forever.sweep().await.expect("sweep").runs_deleted, 0);
}

#[tokio::test]
async fn worker_rows_are_removed_after_a_long_silence_and_written_again_on_heartbeat() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a = worker(&t, &gate, StallAction::Pause);
    let b = worker(&t, &gate, StallAction::Pause);
    // Claims register the worker rows.
    a.run_once().await.expect("run");
    b.run_once().await.expect("run");
    let rows = "SELECT count(*) FROM {schema}.workers";
    assert_eq!(t.count(rows, &[]).await, 2);

    t.clock.advance(Duration::from_secs(3599));
    assert_eq!(b.sweep().await.expect("sweep").workers_removed, 0);
    b.heartbeat().await.expect("heartbeat");
    t.clock.advance(Duration::from_secs(2));
    assert_eq!(
        b.sweep().await.expect("sweep").workers_removed,
        1,
        "a's row, silent for over an hour"
    );
    a.heartbeat().await.expect("heartbeat");
    assert_eq!(t.count(rows, &[]).await, 2, "a wrote its row again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_removes_its_row_so_what_it_abandoned_is_lost_at_once() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a =
        t.db.worker()
            .notifications(false)
            .shutdown_grace(Duration::ZERO)
            .register(Hung {
                gate: Arc::clone(&gate),
            })
            .build()
            .expect("worker");
    let sweeper = worker(&t, &gate, StallAction::reattempt(Duration::ZERO));
    let run = t.client().start::<Hung>(&()).await.expect("start").run_id;
    let stop = Arc::new(Notify::new());
    let running = tokio::spawn({
        let (a, stop) = (a.clone(), Arc::clone(&stop));
        async move { a.run_until(stop.notified()).await }
    });
    gate.entered.notified().await;
    stop.notify_one();
    running.await.expect("join").expect("stopped");
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.workers WHERE id = $1",
            &[&a.id()]
        )
        .await,
        0
    );
    // No clock movement: the abandoned attempt is lost now, not 30 s later.
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, 1);
    let view = t.run(run).await;
    let stall = view
        .events
        .iter()
        .find(|e| e.event == "stall_detected")
        .expect("stall_detected");
    assert_eq!(stall.reason.as_deref(), Some("worker_lost"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sweepers_at_once_repair_each_stalled_attempt_exactly_once() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let client = t.client();
    let mut runs = Vec::new();
    for _ in 0..40 {
        runs.push(client.start::<Hung>(&()).await.expect("start").run_id);
    }
    // Claimed by a worker that died without ever writing its row.
    t.execute(
        "UPDATE {schema}.steps SET status = 'in_progress', worker_id = 'ghost',
                started_at = $1, stall_at = $1::timestamptz + interval '5 minutes'",
        &[&t.clock.now()],
    )
    .await;
    t.execute("UPDATE {schema}.runs SET status = 'performing'", &[])
        .await;
    let sweepers: Vec<Worker> = (0..4)
        .map(|_| worker(&t, &gate, StallAction::reattempt(Duration::ZERO)))
        .collect();
    let reports = futures_util::future::join_all(sweepers.iter().map(Worker::sweep)).await;
    let repaired: usize = reports
        .into_iter()
        .map(|r| r.expect("sweep").repaired)
        .sum();
    assert_eq!(repaired, 40, "every attempt repaired, none twice");
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'stall_detected'",
            &[]
        )
        .await,
        40
    );
    for run in runs {
        let view = t.run(run).await;
        assert_eq!(
            crate::pg::steps(&view),
            ["slow#1 failed/reattempted", "slow#2 scheduled/-"]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_row_stays_while_a_clone_still_runs_and_comes_back_with_the_next_claim() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let a = worker(&t, &gate, StallAction::Pause);
    let row = "SELECT count(*) FROM {schema}.workers WHERE id = $1";
    let id = a.id().to_owned();

    // Two loops of one worker: the row goes with the last.
    let (stop1, stop2) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let loop1 = tokio::spawn({
        let (a, stop) = (a.clone(), Arc::clone(&stop1));
        async move { a.run_until(stop.notified()).await }
    });
    let loop2 = tokio::spawn({
        let (a, stop) = (a.clone(), Arc::clone(&stop2));
        async move { a.run_until(stop.notified()).await }
    });
    assert!(
        crate::pg::eventually(Duration::from_secs(10), || async {
            t.count(row, &[&id]).await == 1
        })
        .await
    );
    stop1.notify_one();
    loop1.await.expect("join").expect("stopped");
    assert_eq!(t.count(row, &[&id]).await, 1, "the other loop still runs");
    stop2.notify_one();
    loop2.await.expect("join").expect("stopped");
    assert_eq!(t.count(row, &[&id]).await, 0);

    // A body running through `run_once` on a clone keeps the row when a loop
    // stops (were it removed, the sweep would take the body's attempt for
    // lost); and the claim wrote the row again after it was removed.
    let run = t.client().start::<Hung>(&()).await.expect("start").run_id;
    let hung = hang_on(&a, &gate).await;
    assert_eq!(
        t.count(row, &[&id]).await,
        1,
        "the claim wrote the row again"
    );
    let stop = Arc::new(Notify::new());
    let idle_loop = tokio::spawn({
        let (a, stop) = (a.clone(), Arc::clone(&stop));
        async move { a.run_until(stop.notified()).await }
    });
    stop.notify_one();
    idle_loop.await.expect("join").expect("stopped");
    assert_eq!(t.count(row, &[&id]).await, 1, "a body still runs here");
    let sweeper = worker(&t, &gate, StallAction::Pause);
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, 0);
    gate.release.notify_one();
    assert_eq!(hung.await.expect("join"), 1);
    assert_eq!(
        t.run(run).await.run.status,
        RunStatus::Ready,
        "not taken for lost"
    );
}

/// Runs `a.run_once()` in the background until its body holds the gate.
async fn hang_on(a: &Worker, gate: &Arc<Gate>) -> tokio::task::JoinHandle<usize> {
    let a = a.clone();
    let hung = tokio::spawn(async move { a.run_once().await.expect("run") });
    gate.entered.notified().await;
    hung
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_whose_reply_was_lost_goes_to_the_sweep_after_two_heartbeats() {
    let t = TestDb::new().await;
    let gate = Arc::new(Gate::default());
    let w = worker(&t, &gate, StallAction::reattempt(Duration::ZERO));
    assert_eq!(w.run_once().await.expect("run"), 0, "writes the worker row");

    // A body really running here is no orphan.
    let running = t.client().start::<Hung>(&()).await.expect("start").run_id;
    let hung = hang_on(&w, &gate).await;
    // A claim the database holds for this worker, whose reply never arrived.
    let lost = t.client().start::<Hung>(&()).await.expect("start").run_id;
    t.execute(
        "UPDATE {schema}.steps SET status = 'in_progress', worker_id = $2, started_at = $3,
                stall_at = $3::timestamptz + interval '5 minutes'
         WHERE run_id = $1",
        &[&lost.0, &w.id(), &t.clock.now()],
    )
    .await;
    t.execute(
        "UPDATE {schema}.runs SET status = 'performing' WHERE id = $1",
        &[&lost.0],
    )
    .await;

    assert_eq!(
        w.sweep().await.expect("sweep").repaired,
        0,
        "a live worker's claims"
    );
    w.heartbeat().await.expect("heartbeat");
    assert_eq!(
        w.sweep().await.expect("sweep").repaired,
        0,
        "one sighting could be a claim on its way back"
    );
    // Busy or not, a second heartbeat that finds it again hands it over.
    let other = t.client().start::<Hung>(&()).await.expect("start").run_id;
    w.heartbeat().await.expect("heartbeat");
    assert_eq!(
        w.sweep().await.expect("sweep").repaired,
        1,
        "only the orphan"
    );
    assert_eq!(t.run(other).await.steps[0].status, StepStatus::Scheduled);
    let view = t.run(lost).await;
    assert_eq!(
        crate::pg::steps(&view),
        ["slow#1 failed/reattempted", "slow#2 scheduled/-"]
    );
    assert_eq!(t.run(running).await.steps[0].status, StepStatus::InProgress);
    gate.release.notify_one();
    assert_eq!(hung.await.expect("join"), 1);
    assert_eq!(t.run(running).await.steps[0].status, StepStatus::Completed);
}

/// Holds a connection of the worker's own pool for as long as the gate says.
struct Hog {
    db: pgbus_runtime::Database,
    entered: Arc<tokio::sync::Semaphore>,
    release: Arc<Notify>,
}

#[workflow(name = "sweep.hog")]
impl Hog {
    #[step]
    async fn hold(&self, _cx: &mut StepCx<()>) -> StepResult {
        let _connection = self.db.pool().get().await?;
        self.entered.add_permits(1);
        self.release.notified().await;
        Ok(Flow::Complete)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_holding_every_pooled_connection_do_not_starve_the_heartbeat() {
    let t = TestDb::new().await;
    let entered = Arc::new(tokio::sync::Semaphore::new(0));
    let release = Arc::new(Notify::new());
    let w =
        t.db.worker()
            .notifications(false)
            .concurrency(16)
            .register(Hog {
                db: t.db.clone(),
                entered: Arc::clone(&entered),
                release: Arc::clone(&release),
            })
            .build()
            .expect("worker");
    for _ in 0..16 {
        t.client().start::<Hog>(&()).await.expect("start");
    }
    let running = tokio::spawn({
        let w = w.clone();
        async move { w.run_once().await.expect("run") }
    });
    // Every one of the pool's 16 connections is now held by a body.
    drop(entered.acquire_many(16).await.expect("all entered"));
    // A bound against a hang, not a timing: the upkeep has connections of its own.
    let beat = tokio::time::timeout(Duration::from_secs(30), w.heartbeat()).await;
    assert!(matches!(beat, Ok(Ok(()))), "{beat:?}");
    let swept = tokio::time::timeout(Duration::from_secs(30), w.sweep()).await;
    assert!(matches!(swept, Ok(Ok(_))), "{swept:?}");
    for _ in 0..16 {
        release.notify_one();
    }
    assert_eq!(running.await.expect("join"), 16);
}

#[tokio::test]
async fn retention_counts_from_when_a_run_ended_and_a_hand_ended_run_from_its_start() {
    let t = TestDb::new().await;
    let sweeper = retaining(&t, Some(Duration::from_hours(1)));
    // Every run started two hours ago.
    seed_runs(&t, 4, "finished", 7200).await;
    let ids: Vec<i64> = t
        .query("SELECT id FROM {schema}.runs ORDER BY id", &[])
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    let now = t.clock.now();
    // Ended ten minutes ago: kept, whatever changed last.
    t.execute(
        "UPDATE {schema}.runs SET finished_at = $2::timestamptz - interval '10 minutes',
                                  updated_at = $2::timestamptz - interval '3 hours'
         WHERE id = $1",
        &[&ids[0], &now],
    )
    .await;
    // Cancelled ten minutes ago: kept.
    t.execute(
        "UPDATE {schema}.runs SET status = 'cancelled', finished_at = NULL,
                                  cancelled_at = $2::timestamptz - interval '10 minutes'
         WHERE id = $1",
        &[&ids[1], &now],
    )
    .await;
    // Ended by hand with no end time: counts from its start, two hours ago.
    t.execute(
        "UPDATE {schema}.runs SET status = 'cancelled', finished_at = NULL WHERE id = $1",
        &[&ids[2]],
    )
    .await;
    // ids[3]: finished two hours ago, as seeded.

    assert_eq!(sweeper.sweep().await.expect("sweep").runs_deleted, 2);
    let left: Vec<i64> = t
        .query("SELECT id FROM {schema}.runs ORDER BY id", &[])
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(left, ids[..2]);
}
