//! A parent's claim lost with its worker: a crash after the batch resolved starts
//! no second batch, and a new attempt takes over the batch still open.

use std::any::type_name;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{BatchStatus, MAX_DURATION_MS, RunStatus, StepStalled, Worker};

use super::{Kid, Leaf, children, named, polling};
use crate::pg::{TestDb, steps};

/// What each body of `Recount` ran for: its run and attempt.
type Bodies = Arc<Mutex<Vec<(RunId, u32)>>>;

/// Fans out its input's kids on its first attempt (only finishing ones on a
/// later attempt), recording each time its body runs; then one more step.
struct Recount {
    bodies: Bodies,
}

#[workflow(name = "fan.recount", input = "Vec<Kid>")]
impl Recount {
    #[fan_out]
    async fn spread(&self, cx: &mut StepCx<Vec<Kid>>, fan: &mut FanOut) -> StepResult {
        self.bodies
            .lock()
            .unwrap()
            .push((cx.run_id(), cx.attempt()));
        for kid in cx.input() {
            fan.start::<Leaf>(if cx.attempt() == 1 { kid } else { &Kid::Finish })?;
        }
        Ok(Flow::Complete)
    }

    #[step]
    async fn after(&self, _cx: &mut StepCx<Vec<Kid>>) {}
}

/// The worker id [`claim_and_die`] claims under: it never registered, so it
/// never heartbeats.
const DEAD_WORKER: &str = "dead-worker";

/// What a worker that claims `run`'s due `step` row and dies at once leaves
/// behind, as claim.sql writes it: the row in progress under a worker that
/// never heartbeats, the run performing, a `step_started` event. Returns the
/// row's id.
async fn claim_and_die(t: &TestDb, run: RunId, step: &str) -> i64 {
    let now = t.clock.now();
    let rows = t
        .query(
            "WITH claimed AS (
                 UPDATE {schema}.steps
                 SET status = 'in_progress', started_at = $1, worker_id = $4,
                     stall_at = $1 + interval '5 minutes'
                 WHERE run_id = $2 AND step_name = $3
                   AND status IN ('scheduled', 'waiting') AND scheduled_at <= $1
                 RETURNING id, run_id, step_name, attempt
             ), moved AS (
                 UPDATE {schema}.runs r SET status = 'performing', updated_at = $1
                 FROM claimed c
                 WHERE r.id = c.run_id AND r.status = 'ready'
                 RETURNING r.id
             ), started AS (
                 INSERT INTO {schema}.events
                     (run_id, step_id, step_name, attempt, event, actor, created_at)
                 SELECT run_id, id, step_name, attempt, 'step_started', $4, $1 FROM claimed
                 RETURNING id
             )
             SELECT c.id, (SELECT count(*) FROM moved) FROM claimed c",
            &[&now, &run.0, &step, &DEAD_WORKER],
        )
        .await;
    assert_eq!(rows.len(), 1, "one due row of `{step}` to claim");
    assert_eq!(rows[0].get::<_, i64>(1), 1, "the run was ready");
    rows[0].get(0)
}

/// Past the lost-worker threshold, the sweep takes the dead worker's attempts
/// of `runs` as stalled and pauses those runs (`StepStalled`); then an
/// operator resumes each.
async fn sweep_and_resume(t: &TestDb, sweeper: &Worker, runs: &[RunId]) {
    t.clock.advance(Duration::from_secs(31));
    assert_eq!(sweeper.sweep().await.expect("sweep").repaired, runs.len());
    for run in runs {
        let view = t.run(*run).await;
        assert_eq!(view.run.status, RunStatus::Paused);
        let stalled = named(&view, "stall_detected");
        assert_eq!(stalled.len(), 1);
        assert_eq!(stalled[0].reason.as_deref(), Some("worker_lost"));
        assert_eq!(stalled[0].attempt, Some(1));
        assert_eq!(
            view.error_class.as_deref(),
            Some(type_name::<StepStalled>())
        );
        assert_eq!(
            t.client()
                .resume(*run, "ops", "the worker is gone")
                .await
                .expect("resume"),
            RunStatus::Ready
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // two parents, each through crash, sweep and resume
async fn a_crash_after_the_batch_resolved_starts_no_second_batch_but_a_failed_one_does() {
    let t = TestDb::new().await;
    let client = t.client();
    let bodies: Bodies = Arc::default();
    let parents = polling(&t.db)
        .register(Recount {
            bodies: Arc::clone(&bodies),
        })
        .build()
        .expect("worker");
    let leaves = polling(&t.db).register(Leaf).build().expect("worker");
    let succeeded = client
        .start::<Recount>(&vec![Kid::Finish, Kid::Finish])
        .await
        .expect("start")
        .run_id;
    let failed = client
        .start::<Recount>(&vec![Kid::Finish, Kid::Cancel])
        .await
        .expect("start")
        .run_id;
    assert_eq!(parents.run_until_idle().await.expect("run"), 2, "both park");
    assert_eq!(leaves.run_until_idle().await.expect("run"), 4);
    for (run, status) in [
        (succeeded, BatchStatus::Succeeded),
        (failed, BatchStatus::Failed),
    ] {
        let view = t.run(run).await;
        assert_eq!(steps(&view), ["spread#1 scheduled/-"], "woken by its batch");
        assert_eq!(view.batches[0].status, status);
        // The wake's claim is taken by a worker that dies at once.
        let row = claim_and_die(&t, run, "spread").await;
        assert_eq!(row, view.steps[0].id);
    }
    assert_eq!(parents.run_until_idle().await.expect("run"), 0);
    sweep_and_resume(&t, &parents, &[succeeded, failed]).await;
    t.clock.advance(Duration::from_secs(1));
    // `succeeded`: its batch decides (the step completes) and `after`;
    // `failed`: a fresh batch is started and parks.
    assert_eq!(parents.run_until_idle().await.expect("run"), 3);
    assert_eq!(leaves.run_until_idle().await.expect("run"), 2);
    assert_eq!(parents.run_until_idle().await.expect("run"), 2);

    // The resolved batch is not started again: one batch, its two children,
    // and the body ran once.
    let view = t.run(succeeded).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<StepStalled>())
    );
    assert_eq!(view.batches.len(), 1, "no second batch");
    assert_eq!(
        (
            view.batches[0].parent_step_id,
            view.batches[0].status.as_str()
        ),
        (view.steps[0].id, "succeeded")
    );
    assert_eq!(children(&t, view.batches[0].id).await.len(), 2);
    assert_eq!(named(&view, "batch_resolved").len(), 1);
    assert_eq!(
        bodies
            .lock()
            .unwrap()
            .iter()
            .filter(|(run, _)| *run == succeeded)
            .count(),
        1,
        "the body ran once"
    );

    // The failed batch is not taken over: the resumed attempt starts a fresh one.
    let view = t.run(failed).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    let batches: Vec<(i64, &str)> = view
        .batches
        .iter()
        .map(|b| (b.parent_step_id, b.status.as_str()))
        .collect();
    assert_eq!(
        batches,
        [
            (view.steps[0].id, "failed"),
            (view.steps[1].id, "succeeded")
        ]
    );
    assert_eq!(children(&t, view.batches[1].id).await.len(), 2);
    let ran: Vec<u32> = bodies
        .lock()
        .unwrap()
        .iter()
        .filter(|(run, _)| *run == failed)
        .map(|(_, attempt)| *attempt)
        .collect();
    assert_eq!(ran, [1, 2]);
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE parent_batch_id IS NOT NULL",
            &[]
        )
        .await,
        2 + 2 + 2
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'late_completion_ignored'",
            &[]
        )
        .await,
        0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // the takeover, then the batch resolving into the new row
async fn a_new_attempt_takes_over_the_batch_still_open_and_its_last_child_wakes_it() {
    let t = TestDb::new().await;
    let client = t.client();
    let bodies: Bodies = Arc::default();
    // Finished children are kept however far the clock goes.
    let parents = polling(&t.db)
        .retention(None)
        .register(Recount {
            bodies: Arc::clone(&bodies),
        })
        .build()
        .expect("worker");
    let one_leaf = polling(&t.db)
        .concurrency(1)
        .register(Leaf)
        .build()
        .expect("worker");
    let run = client
        .start::<Recount>(&vec![Kid::Finish, Kid::Finish])
        .await
        .expect("start")
        .run_id;
    assert_eq!(parents.run_until_idle().await.expect("run"), 1, "parks");
    assert_eq!(one_leaf.run_once().await.expect("run"), 1, "one child ends");
    let view = t.run(run).await;
    let first = view.steps[0].id;
    assert_eq!(
        (view.batches[0].finished, view.batches[0].status.as_str()),
        (1, "open")
    );

    // The parked row comes due at the end of its longest wait while a child
    // still runs; a worker claims it and dies.
    t.clock
        .advance(Duration::from_millis(MAX_DURATION_MS) + Duration::from_secs(1));
    assert_eq!(claim_and_die(&t, run, "spread").await, first);
    sweep_and_resume(&t, &parents, &[run]).await;
    let view = t.run(run).await;
    assert_eq!(
        view.batches[0].status,
        BatchStatus::Open,
        "the sweep left the batch be"
    );

    // The resumed attempt does not run the body: it takes the open batch over
    // and waits for it.
    assert_eq!(parents.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(
        steps(&view),
        ["spread#1 failed/paused", "spread#2 waiting/-"]
    );
    let second = view.steps[1].id;
    assert_eq!(view.batches.len(), 1, "no second batch");
    assert_eq!(
        view.batches[0].parent_step_id, second,
        "the batch now wakes the new attempt"
    );
    assert_eq!(view.batches[0].status, BatchStatus::Open);
    assert_eq!(bodies.lock().unwrap().len(), 1, "the body ran once");

    // The last child ends: the batch resolves and wakes the new row.
    assert_eq!(one_leaf.run_until_idle().await.expect("run"), 1);
    let view = t.run(run).await;
    assert_eq!(
        steps(&view),
        ["spread#1 failed/paused", "spread#2 scheduled/-"]
    );
    let resolved = named(&view, "batch_resolved");
    assert_eq!(resolved.len(), 1);
    assert_eq!(resolved[0].step_id, Some(second));
    assert_eq!(resolved[0].attempt, Some(2));
    assert_eq!(parents.run_until_idle().await.expect("run"), 2);

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(
        steps(&view),
        [
            "spread#1 failed/paused",
            "spread#2 completed/completed",
            "after#1 completed/completed"
        ]
    );
    assert_eq!(view.batches.len(), 1);
    assert_eq!(
        (
            view.batches[0].parent_step_id,
            view.batches[0].status.as_str(),
            view.batches[0].finished
        ),
        (second, "succeeded", 2)
    );
    assert_eq!(children(&t, view.batches[0].id).await.len(), 2);
    assert_eq!(bodies.lock().unwrap().len(), 1, "the body ran once");
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.runs", &[]).await,
        1 + 2
    );
}
