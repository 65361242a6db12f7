//! Group commit against the real server: outcomes that arrive together are
//! written by one transaction, each as it would be alone; a late member, one
//! the group cannot take, and one whose caller left are each handled as
//! without groups.

use std::pin::pin;
use std::task::{Context, Waker};

use futures_util::future::join_all;

use super::*;
use crate::engine::ErrorRecord;

/// Starts `n` runs of `Once` and claims their first steps for worker `w1`;
/// with `grouped`, the store groups outcomes.
async fn claimed(db: &mut Database, n: usize, grouped: bool) -> Vec<Claim> {
    // Set either way: a store groups outcomes by default.
    db.store.groups = grouped.then(std::sync::Arc::default);
    super::group_edges::claim_n(db, n).await
}

async fn count(db: &Database, sql: &str) -> i64 {
    let client = db.pool().get().await.expect("connection");
    client
        .query_one(
            &sql.replace("{schema}", &format!("\"{}\"", db.schema())),
            &[],
        )
        .await
        .expect("count")
        .get(0)
}

/// How many runs have their second step, and how many `step_completed`
/// events were written.
async fn moved_on(db: &Database) -> (i64, i64) {
    (
        count(
            db,
            "SELECT count(*) FROM {schema}.steps WHERE step_name = 'then'",
        )
        .await,
        count(
            db,
            "SELECT count(*) FROM {schema}.events WHERE event = 'step_completed'",
        )
        .await,
    )
}

/// How many transactions wrote the ended first steps.
async fn ending_transactions(db: &Database) -> i64 {
    count(
        db,
        "SELECT count(DISTINCT xmin::text) FROM {schema}.steps
         WHERE step_name = 'only' AND status <> 'in_progress'",
    )
    .await
}

fn handoff(queues: &[String]) -> Handoff<'_> {
    Handoff {
        queues,
        stall_threshold_ms: 60_000,
    }
}

#[tokio::test]
async fn outcomes_that_arrive_together_share_one_transaction_and_each_is_applied() {
    let mut db = database().await;
    let claims = claimed(&mut db, 6, true).await;
    let ok = AttemptResult::ok(Verb::Complete, None);
    let ended = join_all(claims.iter().map(|c| {
        db.store
            .end_attempt(Once::DEFINITION, c, "w1", &ok, false, None)
    }))
    .await;
    for ended in ended {
        assert!(matches!(ended.expect("end"), Ended::Applied(_)));
    }
    assert_eq!(ending_transactions(&db).await, 1, "one group, one commit");
    assert_eq!(
        moved_on(&db).await,
        (6, 6),
        "each run that ended moved on once"
    );
    drop_schema(&db).await;
}

/// Every row the outcomes wrote, in a form two schemas can be compared in:
/// ids by their order within each run.
async fn written(db: &Database) -> Vec<String> {
    let client = db.pool().get().await.expect("connection");
    let schema = format!("\"{}\"", db.schema());
    let queries = [
        "SELECT r.status, r.current_step, r.error_class, r.error_message, r.updated_at,
                r.paused_at, r.cancelled_at, r.finished_at,
                rank() OVER (ORDER BY r.id)
         FROM {schema}.runs r ORDER BY r.id",
        "SELECT s.step_name, s.attempt, s.reattempts, s.status, s.outcome, s.queue,
                s.priority, s.timeout_ms, s.scheduled_at, s.started_at, s.finished_at,
                s.stall_at, s.waiting_since, s.worker_id, s.output, s.error_class,
                s.error_message, s.error_causes, s.created_at,
                rank() OVER (ORDER BY s.run_id), rank() OVER (PARTITION BY s.run_id ORDER BY s.id)
         FROM {schema}.steps s ORDER BY s.run_id, s.id",
        "SELECT e.step_name, e.attempt, e.event, e.actor, e.reason, e.details, e.created_at,
                (SELECT count(*) FROM {schema}.steps s WHERE s.run_id = e.run_id AND s.id <= e.step_id),
                rank() OVER (ORDER BY e.run_id), rank() OVER (PARTITION BY e.run_id ORDER BY e.id)
         FROM {schema}.events e ORDER BY e.run_id, e.id",
    ];
    let mut rows = Vec::new();
    for query in queries {
        let text = format!(
            "SELECT to_jsonb(t)::text FROM ({}) t",
            query.replace("{schema}", &schema)
        );
        for row in client.query(&text, &[]).await.expect("read") {
            rows.push(row.get::<_, String>(0));
        }
    }
    rows
}

#[tokio::test]
async fn a_group_writes_what_each_outcome_writes_alone() {
    let error = ErrorRecord {
        class: "app::Declined".to_owned(),
        message: "card declined".to_owned(),
        causes: vec!["insufficient funds".to_owned()],
    };
    let results = [
        AttemptResult::ok(Verb::Complete, Some(serde_json::json!({"n": 1}))),
        AttemptResult::ok(Verb::Complete, None),
        AttemptResult::ok(Verb::Finish, Some(serde_json::json!("early"))),
        AttemptResult::ok(
            Verb::Skip {
                reason: "not needed".to_owned(),
            },
            None,
        ),
        AttemptResult::ok(Verb::Reattempt { wait_ms: 2_500 }, None),
        AttemptResult {
            error: Some(error),
            ..AttemptResult::ok(
                Verb::Pause {
                    reason: "declined".to_owned(),
                },
                None,
            )
        },
        // Not taken by the group: it cancels the run, and ends alone.
        AttemptResult::ok(
            Verb::Cancel {
                reason: "by request".to_owned(),
            },
            None,
        ),
    ];
    let queues = ["default".to_owned()];
    let mut states = Vec::new();
    for grouped in [false, true] {
        let mut db = database().await;
        let claims = claimed(&mut db, results.len(), grouped).await;
        // The first two hand their next step on to the worker.
        let ended = join_all(claims.iter().zip(&results).enumerate().map(|(i, (c, r))| {
            let offered = (i < 2).then(|| handoff(&queues));
            db.store
                .end_attempt(Once::DEFINITION, c, "w1", r, false, offered)
        }))
        .await;
        let ended: Vec<Ended> = ended.into_iter().map(|e| e.expect("end")).collect();
        assert!(matches!(ended[0], Ended::Continued(..)), "{:?}", ended[0]);
        assert!(matches!(ended[1], Ended::Continued(..)), "{:?}", ended[1]);
        for e in &ended[2..] {
            assert!(matches!(e, Ended::Applied(_)), "{e:?}");
        }
        if grouped {
            // Six in one transaction; the cancel in one of its own.
            assert_eq!(ending_transactions(&db).await, 2);
            let Ended::Continued(_, next) = &ended[0] else {
                unreachable!()
            };
            assert_eq!(next.outputs.get("only"), Some(&serde_json::json!({"n": 1})));
        }
        states.push(written(&db).await);
        drop_schema(&db).await;
    }
    assert!(!states[0].is_empty());
    for (alone, grouped) in states[0].iter().zip(&states[1]) {
        assert_eq!(alone, grouped);
    }
    assert_eq!(states[0].len(), states[1].len());
}

#[tokio::test]
async fn a_late_member_ends_alone_and_the_others_are_written_together() {
    let mut db = database().await;
    let claims = claimed(&mut db, 3, true).await;
    // The second attempt was taken from this worker meanwhile.
    db.pool()
        .get()
        .await
        .expect("connection")
        .execute(
            &format!(
                "UPDATE \"{}\".steps SET worker_id = 'other' WHERE id = $1",
                db.schema()
            ),
            &[&claims[1].step_id],
        )
        .await
        .expect("take the attempt");
    let ok = AttemptResult::ok(Verb::Complete, None);
    let ended = join_all(claims.iter().map(|c| {
        db.store
            .end_attempt(Once::DEFINITION, c, "w1", &ok, false, None)
    }))
    .await;
    let ended: Vec<Ended> = ended.into_iter().map(|e| e.expect("end")).collect();
    assert!(matches!(ended[0], Ended::Applied(_)));
    assert!(matches!(ended[1], Ended::Late));
    assert!(matches!(ended[2], Ended::Applied(_)));
    assert_eq!(late_events(&db.store, claims[1].run_id).await, 1);
    assert_eq!(late_events(&db.store, claims[0].run_id).await, 0);
    // Nothing of the late one was written; the others once each, together.
    assert_eq!(
        moved_on(&db).await,
        (2, 2),
        "each run that ended moved on once"
    );
    assert_eq!(ending_transactions(&db).await, 1);
    drop_schema(&db).await;
}

#[tokio::test]
async fn an_outcome_whose_caller_left_before_its_group_started_is_not_written() {
    let mut db = database().await;
    let claims = claimed(&mut db, 2, true).await;
    let ok = AttemptResult::ok(Verb::Complete, None);
    let first = db
        .store
        .end_attempt(Once::DEFINITION, &claims[0], "w1", &ok, false, None);
    let second = db
        .store
        .end_attempt(Once::DEFINITION, &claims[1], "w1", &ok, false, None);
    let mut second = pin!(second);
    {
        // Each polled once: both handed to the next group, which has not
        // run yet (this test's runtime has one thread); then the first's
        // caller gives up.
        let mut first = pin!(first);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
    }
    assert!(matches!(second.await.expect("end"), Ended::Applied(_)));
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM {schema}.steps WHERE status = 'in_progress'"
        )
        .await,
        1
    );
    let again = db
        .store
        .end_attempt(Once::DEFINITION, &claims[0], "w1", &ok, false, None)
        .await
        .expect("end");
    assert!(matches!(again, Ended::Applied(_)));
    assert_eq!(moved_on(&db).await, (2, 2));
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_step_handed_to_a_caller_that_left_is_put_back_in_its_queue() {
    let mut db = database().await;
    let claims = claimed(&mut db, 2, true).await;
    let ok = AttemptResult::ok(Verb::Complete, None);
    let queues = ["default".to_owned()];
    let first = db.store.end_attempt(
        Once::DEFINITION,
        &claims[0],
        "w1",
        &ok,
        false,
        Some(handoff(&queues)),
    );
    let second = db.store.end_attempt(
        Once::DEFINITION,
        &claims[1],
        "w1",
        &ok,
        false,
        Some(handoff(&queues)),
    );
    let mut second = pin!(second);
    {
        let mut first = pin!(first);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
        // The group task runs until it waits on the server: it has taken
        // both. Then the first's caller gives up.
        tokio::task::yield_now().await;
    }
    assert!(matches!(second.await.expect("end"), Ended::Continued(..)));
    // The first's step is put back once every reply went out.
    db.store.groups.as_ref().expect("groups").settled().await;
    assert_eq!(ending_transactions(&db).await, 1, "both in one group");
    let rows = count(
        &db,
        &format!(
            "SELECT count(*) FROM {{schema}}.steps s JOIN {{schema}}.runs r ON r.id = s.run_id
             WHERE s.step_name = 'then' AND s.status = 'scheduled' AND s.worker_id IS NULL
               AND r.status = 'ready' AND r.id = {}",
            claims[0].run_id.0
        ),
    )
    .await;
    assert_eq!(rows, 1, "the first run's next step is back in the queue");
    assert_eq!(
        count(
            &db,
            &format!(
                "SELECT count(*) FROM {{schema}}.steps
                 WHERE step_name = 'then' AND status = 'in_progress' AND run_id = {}",
                claims[1].run_id.0
            ),
        )
        .await,
        1,
        "the second's is its worker's"
    );
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_count_that_does_not_match_stops_the_statement() {
    let db = database().await;
    let client = db.pool().get().await.expect("connection");
    let schema = format!("\"{}\"", db.schema());
    let matched: i64 = client
        .query_one(&format!("SELECT {schema}.expect_rows('x', 2, 2)"), &[])
        .await
        .expect("a match")
        .get(0);
    assert_eq!(matched, 2);
    let error = client
        .query_one(&format!("SELECT {schema}.expect_rows('x', 2, 1)"), &[])
        .await
        .expect_err("a mismatch");
    assert!(
        error
            .as_db_error()
            .is_some_and(|e| e.message() == "pgbus: x changed 1 rows, expected 2"),
        "{error:?}"
    );
    drop(client);
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_group_writes_what_each_last_step_writes_alone() {
    let error = ErrorRecord {
        class: "app::Flaky".to_owned(),
        message: "timed out".to_owned(),
        causes: vec!["upstream".to_owned(), "socket".to_owned()],
    };
    let results = [
        AttemptResult::ok(Verb::Complete, Some(serde_json::json!([1, 2]))),
        AttemptResult::ok(Verb::Complete, None),
        AttemptResult {
            error: Some(error.clone()),
            ..AttemptResult::ok(Verb::Reattempt { wait_ms: 0 }, None)
        },
        AttemptResult {
            error: Some(error),
            ..AttemptResult::ok(Verb::Finish, Some(serde_json::Value::Null))
        },
    ];
    let queues = ["default".to_owned()];
    let mut states = Vec::new();
    for grouped in [false, true] {
        let mut db = database().await;
        let firsts = claimed(&mut db, results.len(), false).await;
        for c in &firsts {
            let ok = AttemptResult::ok(Verb::Complete, Some(serde_json::json!({"first": 1})));
            db.store
                .end_attempt(Once::DEFINITION, c, "w1", &ok, false, None)
                .await
                .expect("end");
        }
        db.store.groups = grouped.then(std::sync::Arc::default);
        let claims = db
            .store
            .claim(
                &queues,
                &Registered::of([Once::DEFINITION]),
                10,
                "w1",
                60_000,
            )
            .await
            .expect("claim");
        assert_eq!(claims.len(), results.len());
        let ended = join_all(claims.iter().zip(&results).map(|(c, r)| {
            db.store
                .end_attempt(Once::DEFINITION, c, "w1", r, false, Some(handoff(&queues)))
        }))
        .await;
        for e in ended {
            e.expect("end");
        }
        if grouped {
            assert_eq!(
                count(
                    &db,
                    "SELECT count(DISTINCT xmin::text) FROM {schema}.steps
                     WHERE step_name = 'then' AND attempt = 1"
                )
                .await,
                1
            );
        }
        states.push(written(&db).await);
        drop_schema(&db).await;
    }
    assert_eq!(states[0].len(), states[1].len());
    for (alone, grouped) in states[0].iter().zip(&states[1]) {
        assert_eq!(alone, grouped);
    }
}
