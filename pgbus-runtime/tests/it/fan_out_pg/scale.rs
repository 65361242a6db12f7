//! 1,000 children ending at once on three workers, and a parent cancelled while
//! its tree runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, IllegalMove, RunStatus, Worker};

use super::{Numbered, collect, named, polling};
use crate::pg::{MANY_CONNECTIONS, TestDb, deadlocks, events, eventually, steps};

/// Fans out `input` numbered children, then counts how often its next step ran.
struct Wide {
    afters: Arc<AtomicU32>,
}

#[workflow(name = "fan.wide", input = u32)]
impl Wide {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for i in 0..*cx.input() {
            fan.start::<Numbered>(&i)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u32>) {
        self.afters.fetch_add(1, Ordering::SeqCst);
    }
}

/// Three workers, until `stopped` says stop. They share one pool apart from
/// the test's (each has its own upkeep connections): three pools of sixteen
/// would take most of the server's `max_connections` from the tests running
/// beside this one.
async fn three_workers(
    t: &TestDb,
    stopped: &tokio::sync::watch::Receiver<bool>,
    build: impl Fn(pgbus_runtime::WorkerBuilder) -> Worker,
) -> tokio::task::JoinSet<()> {
    let mut workers = tokio::task::JoinSet::new();
    let shared = t.second_connection().await;
    for _ in 0..3 {
        let db = shared.clone();
        let worker = build(
            db.worker()
                .concurrency(32)
                .poll_interval(Duration::from_millis(100)),
        );
        let mut stopped = stopped.clone();
        workers.spawn(async move {
            worker
                .run_until(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await
                .expect("worker loop");
            drop(worker);
            // Closing the pool ends its backends, which report their
            // statistics (the deadlock count) as they exit.
            drop(db);
        });
    }
    workers
}

const WIDE: u32 = 1_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(clippy::too_many_lines)] // setup, the race and its checks
async fn a_thousand_children_ending_at_once_on_three_workers_resume_the_parent_once() {
    let _many = MANY_CONNECTIONS.lock().await;
    let t = TestDb::new().await;
    let client = t.client();
    let deadlocks_before = deadlocks(&t).await;
    let afters = Arc::new(AtomicU32::new(0));
    let reports = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let began = Instant::now();
    let mut workers = three_workers(&t, &stopped, |builder| {
        builder
            .register(Wide {
                afters: Arc::clone(&afters),
            })
            .register(Numbered)
            .on_error(collect(&reports))
            .build()
            .expect("worker")
    })
    .await;
    let run = client.start::<Wide>(&WIDE).await.expect("start").run_id;
    let finished = eventually(Duration::from_mins(2), || async {
        t.run(run).await.run.status == RunStatus::Finished
    })
    .await;
    let took = began.elapsed();
    stop.send(true).expect("stop");
    while let Some(joined) = workers.join_next().await {
        joined.expect("join");
    }
    eprintln!("{WIDE} children on three workers: the parent finished after {took:?}");
    assert!(finished, "the parent did not finish in time");

    let view = t.run(run).await;
    assert_eq!(
        steps(&view),
        [
            "spread#1 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(afters.load(Ordering::SeqCst), 1, "the next step ran once");
    assert_eq!(named(&view, "batch_resolved").len(), 1);
    assert_eq!(
        events(&view)
            .iter()
            .filter(|e| *e == "step_started:spread#1")
            .count(),
        2,
        "claimed to start the batch and once more to complete"
    );
    assert_eq!(named(&view, "step_completed").len(), 2);
    let batch = &view.batches[0];
    let total = i32::try_from(WIDE).expect("fits");
    assert_eq!(
        (
            batch.status.as_str(),
            batch.total,
            batch.finished,
            batch.cancelled
        ),
        ("succeeded", total, total, 0)
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE parent_batch_id = $1 AND status = 'finished'",
            &[&batch.id]
        )
        .await,
        i64::from(WIDE)
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'late_completion_ignored'",
            &[]
        )
        .await,
        0
    );
    assert!(reports.lock().unwrap().is_empty());
    assert_eq!(
        deadlocks(&t).await,
        deadlocks_before,
        "deadlocks in the database while the children ended"
    );
}

/// Three trivial steps: a leaf that commits a transition after every step.
struct Three;

#[workflow(name = "fan.three")]
impl Three {
    #[step]
    async fn one(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn two(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn three(&self, _cx: &mut StepCx<()>) {}
}

/// Fans out `input` `Three` leaves.
struct Branch;

#[workflow(name = "fan.branch", input = u32)]
impl Branch {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<u32>, fan: &mut FanOut) -> StepResult {
        for _ in 0..*cx.input() {
            fan.start::<Three>(&())?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<u32>) {}
}

/// Fans out `input.0` branches of `input.1` leaves each.
struct Tree;

#[workflow(name = "fan.tree", input = "(u32, u32)")]
impl Tree {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<(u32, u32)>, fan: &mut FanOut) -> StepResult {
        let (branches, leaves) = *cx.input();
        for _ in 0..branches {
            fan.start::<Branch>(&leaves)?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<(u32, u32)>) {}
}

const ROUNDS: u32 = 12;
const LEAF_STEPS: i64 = 4 * 10 * 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(clippy::too_many_lines)] // the rounds and the checks of the whole schema
async fn cancelling_a_parent_while_its_tree_runs_leaves_every_batch_consistent() {
    let _many = MANY_CONNECTIONS.lock().await;
    let t = TestDb::new().await;
    let client = t.client();
    let deadlocks_before = deadlocks(&t).await;
    let reports = Arc::default();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let began = Instant::now();
    let mut workers = three_workers(&t, &stopped, |builder| {
        builder
            .register(Tree)
            .register(Branch)
            .register(Three)
            .on_error(collect(&reports))
            .build()
            .expect("worker")
    })
    .await;
    let leaf_steps_done =
        "SELECT count(*) FROM {schema}.steps WHERE workflow = 'fan.three' AND status = 'completed'";
    let moving = "SELECT (SELECT count(*) FROM {schema}.runs
                          WHERE status NOT IN ('finished', 'cancelled'))
                       + (SELECT count(*) FROM {schema}.steps WHERE status = 'in_progress')";
    let open_steps_of_ended_runs = "SELECT count(*) FROM {schema}.steps s
                                    JOIN {schema}.runs r ON r.id = s.run_id
                                    WHERE r.status IN ('finished', 'cancelled')
                                      AND s.status IN ('scheduled', 'in_progress', 'waiting')";
    let (mut cancelled, mut too_late) = (0, 0);
    for round in 0..ROUNDS {
        let before = t.count(leaf_steps_done, &[]).await;
        let top = client.start::<Tree>(&(4, 10)).await.expect("start").run_id;
        // Cancel once this many leaf steps of the round completed.
        let at = i64::from(round) * LEAF_STEPS / i64::from(ROUNDS);
        let deadline = Instant::now() + Duration::from_secs(30);
        while t.count(leaf_steps_done, &[]).await - before < at && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        match client.cancel(top, "ops", "race").await {
            Ok(RunStatus::Cancelled) => cancelled += 1,
            Err(Error::IllegalMove {
                why: IllegalMove::Ended { .. },
                ..
            }) => too_late += 1,
            other => panic!("round {round}: {other:?}"),
        }
        // The cancel closed every open step of the tree with its runs, in its
        // own transaction: none is left for a worker to finish afterwards.
        let open_under_cancelled = t.count(open_steps_of_ended_runs, &[]).await;
        assert_eq!(
            open_under_cancelled, 0,
            "round {round}: cancelled runs with steps still open right after the cancel"
        );
        // Until the tree stands still: every run ended, no body running.
        let settled = eventually(Duration::from_secs(30), || async {
            t.count(moving, &[]).await == 0
        })
        .await;
        assert!(settled, "round {round}: the tree did not settle");
    }
    let took = began.elapsed();
    stop.send(true).expect("stop");
    while let Some(joined) = workers.join_next().await {
        joined.expect("join");
    }
    eprintln!(
        "{ROUNDS} trees cancelled while running: {cancelled} cancelled, {too_late} had \
         finished first, in {took:?}"
    );
    assert!(cancelled > ROUNDS / 2, "the cancels raced nothing");

    assert_eq!(
        t.count(open_steps_of_ended_runs, &[]).await,
        0,
        "an ended run with a step still open"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events e
             WHERE e.event = 'finished'
               AND EXISTS (SELECT 1 FROM {schema}.events c
                           WHERE c.run_id = e.run_id AND c.event = 'cancelled')",
            &[]
        )
        .await,
        0,
        "a cancelled run that finished afterwards"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.batches WHERE status = 'open'",
            &[]
        )
        .await,
        0
    );
    let disagreeing: Vec<String> = t
        .query(
            "SELECT format('batch %s of run %s (%s, %s): %s/%s/%s of %s, children %s',
                           b.id, b.run_id, p.workflow, p.status, b.status, b.succeeded,
                           b.failed, b.total,
                           (SELECT string_agg(c.status, ',' ORDER BY c.id)
                            FROM {schema}.runs c WHERE c.parent_batch_id = b.id))
             FROM {schema}.batches b JOIN {schema}.runs p ON p.id = b.run_id
             WHERE b.succeeded <> (SELECT count(*) FROM {schema}.runs c
                                   WHERE c.parent_batch_id = b.id AND c.status = 'finished')
                OR b.failed <> 0
                OR (b.status = 'succeeded') <> (b.succeeded = b.total)",
            &[],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(
        disagreeing.is_empty(),
        "batches whose counts disagree with their children: {disagreeing:#?}"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs p
             JOIN {schema}.batches b ON b.run_id = p.id
             WHERE p.status = 'cancelled' AND b.status = 'succeeded'
               AND EXISTS (SELECT 1 FROM {schema}.runs c
                           WHERE c.parent_batch_id = b.id AND c.status = 'cancelled')",
            &[]
        )
        .await,
        0
    );
    let sweeper = polling(&t.db).register(Tree).build().expect("worker");
    assert_eq!(sweeper.sweep().await.expect("sweep").batches_resolved, 0);
    let reports = reports.lock().unwrap().clone();
    assert!(reports.is_empty(), "{reports:?}");
    assert_eq!(
        deadlocks(&t).await,
        deadlocks_before,
        "deadlocks in the database during the races"
    );
}
