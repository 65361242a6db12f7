//! Group commit against the real server: outcomes that arrive together share
//! one transaction; a late member, or one dropped midway, sends the group
//! back and every outcome ends alone, as without groups.

use std::pin::pin;
use std::task::{Context, Waker};

use futures_util::future::join_all;

use super::*;

/// Starts `n` runs of `Once` and claims their first steps for worker `w1`.
async fn claimed(db: &mut Database, n: usize) -> Vec<Claim> {
    db.store.groups = Some(std::sync::Arc::default());
    let client = db.client();
    for _ in 0..n {
        client.start::<Once>(&()).await.expect("start");
    }
    let claims = db
        .store
        .claim(
            &["default".to_owned()],
            &Registered::of([Once::DEFINITION]),
            i64::try_from(n).expect("small"),
            "w1",
            60_000,
        )
        .await
        .expect("claim");
    assert_eq!(claims.len(), n);
    claims
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
         WHERE step_name = 'only' AND status = 'completed'",
    )
    .await
}

#[tokio::test]
async fn outcomes_that_arrive_together_share_one_transaction_and_each_is_applied() {
    let mut db = database().await;
    let claims = claimed(&mut db, 6).await;
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

#[tokio::test]
async fn a_late_member_sends_its_group_back_and_each_outcome_ends_alone() {
    let mut db = database().await;
    let claims = claimed(&mut db, 3).await;
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
    // Nothing of the late one's writes stayed; the others wrote once each.
    assert_eq!(
        moved_on(&db).await,
        (2, 2),
        "each run that ended moved on once"
    );
    drop_schema(&db).await;
}

#[tokio::test]
async fn a_member_dropped_midway_leaves_nothing_behind() {
    let mut db = database().await;
    let claims = claimed(&mut db, 2).await;
    let ok = AttemptResult::ok(Verb::Complete, None);
    let first = db
        .store
        .end_attempt(Once::DEFINITION, &claims[0], "w1", &ok, false, None);
    let second = db
        .store
        .end_attempt(Once::DEFINITION, &claims[1], "w1", &ok, false, None);
    let mut second = pin!(second);
    {
        // Each polled once: both in one group, the first's run lock sent;
        // then the first's caller gives up.
        let mut first = pin!(first);
        let mut cx = Context::from_waker(Waker::noop());
        assert!(first.as_mut().poll(&mut cx).is_pending());
        assert!(second.as_mut().poll(&mut cx).is_pending());
    }
    assert!(matches!(second.await.expect("end"), Ended::Applied(_)));
    // The first attempt is as it was, its run lock not held by anything
    // left open: ending it again goes through.
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
