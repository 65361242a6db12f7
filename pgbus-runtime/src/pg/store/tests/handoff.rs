//! An outcome that hands its worker the run's next step, and a retried
//! outcome whose lost try had handed one on.

use super::*;

/// A handoff to a worker of `queues`, stall threshold one minute (as
/// `end_attempt` takes it).
#[allow(clippy::unnecessary_wraps)]
fn eager_on(queues: &[String]) -> Option<Handoff<'_>> {
    Some(Handoff {
        queues,
        stall_threshold_ms: 60_000,
    })
}

/// Claims the first due step for `worker`.
async fn claim_one(
    store: &PgStore,
    queues: &[String],
    workflows: &Registered,
    worker: &str,
) -> Claim {
    store
        .claim(queues, workflows, 1, worker, 60_000)
        .await
        .expect("claim")
        .remove(0)
}

/// Ends `claim` (worker `w1`) as completed with no output, offering `handoff`.
async fn end_plain(store: &PgStore, claim: &Claim, handoff: Option<Handoff<'_>>) -> Ended {
    store
        .end_attempt(
            Eager::DEFINITION,
            claim,
            "w1",
            &AttemptResult::ok(Verb::Complete, None),
            false,
            handoff,
        )
        .await
        .expect("end")
}

struct Eager;

#[workflow(name = "store.eager")]
impl Eager {
    #[step]
    async fn first(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn second(&self, _cx: &mut StepCx<()>) {}

    #[step(wait = "5s")]
    async fn third(&self, _cx: &mut StepCx<()>) {}

    #[step(queue = "other")]
    async fn fourth(&self, _cx: &mut StepCx<()>) {}

    #[step(wait_for(name = "go"))]
    async fn fifth(&self, _cx: &mut StepCx<()>) {}
}

/// Status, worker and stall horizon of a run's attempt at `step`.
async fn step_row(
    db: &Database,
    run: RunId,
    step: &str,
) -> (String, Option<String>, Option<DateTime<Utc>>) {
    let client = db.pool().get().await.expect("connection");
    let row = client
        .query_one(
            &format!(
                "SELECT status, worker_id, stall_at FROM \"{}\".steps
                 WHERE run_id = $1 AND step_name = $2 ORDER BY attempt DESC LIMIT 1",
                db.schema()
            ),
            &[&run.0, &step],
        )
        .await
        .expect("the step row");
    (row.get(0), row.get(1), row.get(2))
}

#[tokio::test]
#[allow(clippy::too_many_lines)] // one run, step by step
async fn an_outcome_hands_its_worker_the_next_step_only_when_it_is_plainly_due_now() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let Clock::Manual(clock) = db.clock().clone() else {
        panic!("a pinned clock");
    };
    let now = clock.now();
    let default = ["default".to_owned()];
    let both = ["default".to_owned(), "other".to_owned()];
    let workflows = Registered::of([Eager::DEFINITION]);
    let run = client.start::<Eager>(&()).await.expect("start").run_id;
    let first = claim_one(store, &default, &workflows, "w1").await;

    // `first` ends with an output, and `second` is due at once on a queue of
    // the worker: claimed for it in the same transaction, seeing the output.
    let output = serde_json::json!({"made": 1});
    let ended = store
        .end_attempt(
            Eager::DEFINITION,
            &first,
            "w1",
            &AttemptResult::ok(Verb::Complete, Some(output.clone())),
            false,
            eager_on(&default),
        )
        .await
        .expect("end first");
    let Ended::Continued(_, second) = ended else {
        panic!("second handed on: {ended:?}");
    };
    assert_eq!(second.step_name, "second");
    assert_eq!((second.attempt, second.reattempts), (1, 0));
    assert_eq!(second.outputs.get("first"), Some(&output));
    assert_eq!((second.scheduled_at, second.claimed_at), (now, now));
    assert_eq!(
        step_row(&db, run, "second").await,
        (
            "in_progress".to_owned(),
            Some("w1".to_owned()),
            Some(now + chrono::TimeDelta::seconds(60))
        )
    );
    let view = client.run(run).await.expect("view");
    assert_eq!(view.run.status, RunStatus::Performing);
    let started: Vec<_> = view
        .events
        .iter()
        .filter(|e| e.event == "step_started")
        .map(|e| (e.step_name.clone(), e.actor.clone()))
        .collect();
    assert_eq!(
        started,
        [
            (Some("first".to_owned()), "w1".to_owned()),
            (Some("second".to_owned()), "w1".to_owned())
        ]
    );
    // A claimed row like any other: with no worker row behind it, the sweep
    // would repair it as lost.
    let stalled = store.stalled(1, 10).await.expect("stalled");
    assert_eq!(
        stalled
            .iter()
            .map(|(c, _, _)| c.step_id)
            .collect::<Vec<_>>(),
        [second.step_id]
    );

    // `third` waits five seconds: scheduled, not handed on.
    let ended = end_plain(store, &second, eager_on(&default)).await;
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    assert_eq!(step_row(&db, run, "third").await.0, "scheduled");
    clock.advance(std::time::Duration::from_secs(5));
    let third = claim_one(store, &default, &workflows, "w1").await;

    // `fourth` runs on a queue this worker does not serve: scheduled.
    let ended = end_plain(store, &third, eager_on(&default)).await;
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    assert_eq!(step_row(&db, run, "fourth").await.0, "scheduled");
    let fourth = claim_one(store, &both, &workflows, "w1").await;

    // `fifth` waits for a signal, whose gate reads what a claim brings:
    // scheduled, even for a worker of both queues.
    let ended = end_plain(store, &fourth, eager_on(&both)).await;
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    assert_eq!(step_row(&db, run, "fifth").await.0, "scheduled");

    // A run paused while its step ran holds its next step: not handed on.
    client
        .cancel(run, "ops", "done here")
        .await
        .expect("cancel");
    let held = client.start::<Eager>(&()).await.expect("start").run_id;
    let first = claim_one(store, &default, &workflows, "w1").await;
    assert_eq!(first.run_id, held);
    client.pause(held, "ops", "hold").await.expect("pause");
    let ended = end_plain(store, &first, eager_on(&default)).await;
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    assert_eq!(step_row(&db, held, "second").await.0, "scheduled");
    assert_eq!(
        client.run(held).await.expect("view").run.status,
        RunStatus::Paused
    );
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_retried_outcome_puts_back_the_step_its_lost_try_handed_on() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let default = ["default".to_owned()];
    let workflows = Registered::of([Eager::DEFINITION]);
    let handoff = eager_on(&default);
    let ok = AttemptResult::ok(Verb::Complete, None);
    let run = client.start::<Eager>(&()).await.expect("start").run_id;
    let first = claim_one(store, &default, &workflows, "w1").await;
    // The first try commits and hands `second` on; its reply is lost, so the
    // worker never learns of `second`.
    let lost = store
        .end_attempt(Eager::DEFINITION, &first, "w1", &ok, false, handoff)
        .await
        .expect("end");
    let Ended::Continued(_, handed) = lost else {
        panic!("second handed on: {lost:?}");
    };
    // Two heartbeats later the worker marks it as an orphan (a new row
    // version), before the retry gets through.
    assert_eq!(
        store
            .release_orphans("w1", &[handed.step_id])
            .await
            .expect("release"),
        1
    );
    // The retry finds the outcome recorded, hands nothing on, and puts
    // `second` back in the queue for any worker.
    let retried = store
        .end_attempt(Eager::DEFINITION, &first, "w1", &ok, true, handoff)
        .await
        .expect("end again");
    assert!(matches!(retried, Ended::Applied(_)), "{retried:?}");
    assert_eq!(late_events(store, run).await, 0);
    assert_eq!(
        step_row(&db, run, "second").await,
        ("scheduled".to_owned(), None, None)
    );
    let view = client.run(run).await.expect("view");
    assert_eq!(view.run.status, RunStatus::Ready);
    let second = claim_one(store, &default, &workflows, "w2").await;
    assert_eq!((second.run_id, second.step_name.as_str()), (run, "second"));
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_retry_never_puts_back_a_step_claimed_after_its_lost_try() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let Clock::Manual(clock) = db.clock().clone() else {
        panic!("a pinned clock");
    };
    let both = ["default".to_owned(), "other".to_owned()];
    let workflows = Registered::of([Eager::DEFINITION]);
    let handoff = eager_on(&both);
    let ok = AttemptResult::ok(Verb::Complete, None);
    let run = client.start::<Eager>(&()).await.expect("start").run_id;
    // Up to `fourth`, through the queue.
    for _ in 0..3 {
        let claim = claim_one(store, &both, &workflows, "w1").await;
        store
            .end_attempt(Eager::DEFINITION, &claim, "w1", &ok, false, None)
            .await
            .expect("end");
        clock.advance(std::time::Duration::from_secs(5));
    }
    let fourth = claim_one(store, &both, &workflows, "w1").await;
    assert_eq!(fourth.step_name, "fourth");
    // `fourth` ends; `fifth` waits for a signal, so it is scheduled, not handed
    // on. The reply is lost, and the same worker's loop claims `fifth`.
    let lost = store
        .end_attempt(Eager::DEFINITION, &fourth, "w1", &ok, false, handoff)
        .await
        .expect("end");
    assert!(matches!(lost, Ended::Applied(_)), "{lost:?}");
    let fifth = claim_one(store, &both, &workflows, "w1").await;
    assert_eq!(fifth.step_name, "fifth");
    // The retry finds the outcome recorded and leaves the claimed `fifth` be.
    let retried = store
        .end_attempt(Eager::DEFINITION, &fourth, "w1", &ok, true, handoff)
        .await
        .expect("end again");
    assert!(matches!(retried, Ended::Applied(_)), "{retried:?}");
    assert_eq!(
        step_row(&db, run, "fifth").await.0,
        "in_progress",
        "still the worker's claim"
    );
    assert_eq!(
        client.run(run).await.expect("view").run.status,
        RunStatus::Performing
    );
    drop_schema(&db).await;
}

#[tokio::test]
async fn what_a_claim_could_not_read_is_never_carried_over_from_memory() {
    let db = database().await;
    let store = &db.store;
    let client = db.client();
    let default = ["default".to_owned()];
    let workflows = Registered::of([Eager::DEFINITION]);
    let handoff = eager_on(&default);

    // The claim could not read the run's input: `second` goes through the
    // queue, whose claim fails it as it failed this one.
    let unread = client.start::<Eager>(&()).await.expect("start").run_id;
    let mut first = claim_one(store, &default, &workflows, "w1").await;
    first.unreadable = Some("nested too deep".to_owned());
    let ended = store
        .end_attempt(
            Eager::DEFINITION,
            &first,
            "w1",
            &AttemptResult::ok(
                Verb::Skip {
                    reason: "skipped".to_owned(),
                },
                None,
            ),
            false,
            handoff,
        )
        .await
        .expect("end");
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    assert_eq!(step_row(&db, unread, "second").await.0, "scheduled");

    // An output deeper than a claim reads back: through the queue too.
    let deep = client.start::<Eager>(&()).await.expect("start").run_id;
    let first = store
        .claim(&default, &workflows, 5, "w1", 60_000)
        .await
        .expect("claim")
        .into_iter()
        .find(|c| c.run_id == deep)
        .expect("the deep run's first step");
    let mut output = serde_json::json!(1);
    for _ in 0..150 {
        output = serde_json::json!([output]);
    }
    let ended = store
        .end_attempt(
            Eager::DEFINITION,
            &first,
            "w1",
            &AttemptResult::ok(Verb::Complete, Some(output)),
            false,
            handoff,
        )
        .await
        .expect("end");
    assert!(matches!(ended, Ended::Applied(_)), "{ended:?}");
    assert_eq!(step_row(&db, deep, "second").await.0, "scheduled");
    drop_schema(&db).await;
}
