//! Schedules on a real server (issue 20): workers racing for the same ticks on
//! the pinned clock, a fire that dies midway, a row this version cannot read,
//! and the client's verbs with their typed errors.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_runtime::prelude::*;
use pgbus_runtime::schedule::{CatchUp, Schedule, ScheduleOrigin, ScheduleUpdate, Tick};
use pgbus_runtime::{Error, RunFilter, Worker};

use crate::pg::{MANY_CONNECTIONS, TestDb, at_ms};

/// Records the tick its step sees.
struct Ticked {
    seen: Arc<Mutex<Vec<Option<Tick>>>>,
}

#[workflow(name = "schedules.ticked", input = u8)]
impl Ticked {
    #[step]
    async fn note(&self, cx: &mut StepCx<u8>) {
        self.seen.lock().expect("the list").push(cx.tick().cloned());
    }
}

fn ticked() -> (Ticked, Arc<Mutex<Vec<Option<Tick>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    (
        Ticked {
            seen: Arc::clone(&seen),
        },
        seen,
    )
}

fn at(seconds: i64) -> DateTime<Utc> {
    at_ms(seconds * 1000)
}

async fn scheduled_runs(t: &TestDb) -> Vec<(String, DateTime<Utc>)> {
    t.query(
        "SELECT schedule_name, tick_at FROM {schema}.runs
         WHERE schedule_name IS NOT NULL ORDER BY tick_at, id",
        &[],
    )
    .await
    .iter()
    .map(|row| (row.get(0), row.get(1)))
    .collect()
}

/// A worker of `Ticked` on a connection of its own, declaring the one-second
/// schedule `every-second`.
async fn racer(t: &TestDb) -> Worker {
    let (workflow, _) = ticked();
    t.second_connection()
        .await
        .worker()
        .register(workflow)
        .schedule::<Ticked>("every-second", Schedule::cron("* * * * * *"), &3)
        .build()
        .expect("a worker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_and_a_one_second_schedule_start_one_run_per_tick() {
    let _many = MANY_CONNECTIONS.lock().await;
    let t = TestDb::new().await;
    let workers = [racer(&t).await, racer(&t).await, racer(&t).await];
    for worker in &workers {
        worker
            .fire_schedules()
            .await
            .expect("registered, nothing due");
    }
    // A minute of pinned time, each second all three fire at once.
    for _ in 0..60 {
        t.clock.advance(Duration::from_secs(1));
        let (a, b, c) = tokio::join!(
            workers[0].fire_schedules(),
            workers[1].fire_schedules(),
            workers[2].fire_schedules(),
        );
        let started: usize = [a, b, c]
            .into_iter()
            .map(|report| report.expect("a fire pass").runs_started)
            .sum();
        assert_eq!(started, 1, "one run per tick, whoever fires it");
    }
    let runs = scheduled_runs(&t).await;
    let expected: Vec<_> = (1..=60)
        .map(|s| ("every-second".to_owned(), at(s)))
        .collect();
    assert_eq!(runs, expected);
    // Each run's step sees its own tick.
    let (workflow, seen) = ticked();
    let runner = t.db.worker().register(workflow).build().expect("a worker");
    assert_eq!(runner.run_until_idle().await.expect("ran"), 60);
    let seen: BTreeSet<_> = seen
        .lock()
        .expect("the list")
        .iter()
        .map(|tick| tick.as_ref().map(|tick| tick.at))
        .collect();
    assert_eq!(seen, (1..=60).map(|s| Some(at(s))).collect());
    let row = t.client().schedule("every-second").await.expect("the row");
    assert_eq!(row.origin, ScheduleOrigin::Code);
    assert_eq!(row.last_tick_at, Some(at(60)));
    assert_eq!(row.next_tick_at, Some(at(61)));
}

/// A fire that holds the row when its worker dies (its transaction rolls
/// back), and a run of a tick committed apart from the row's move: neither
/// makes a tick start twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_fire_does_not_double_start() {
    let t = TestDb::new().await;
    let worker = racer(&t).await;
    worker.fire_schedules().await.expect("registered");
    t.clock.advance(Duration::from_secs(1));

    // A worker mid-fire: the row locked, its run inserted, not committed.
    let raw = t.second_connection().await;
    let mut dying = raw.pool().get().await.expect("a connection");
    let tx = dying.transaction().await.expect("a transaction");
    tx.query(
        &t.sql("SELECT * FROM {schema}.schedules WHERE name = 'every-second' FOR UPDATE"),
        &[],
    )
    .await
    .expect("the lock");
    tx.query(
        &t.sql("SELECT {schema}.start_run('schedules.ticked', '3', $1)"),
        &[&"schedule:every-second:2031-03-01T12:00:01Z"],
    )
    .await
    .expect("a start in the dying fire");
    // The other worker passes over the locked row.
    assert_eq!(worker.fire_schedules().await.expect("a pass").lost, 1);
    // The dying worker's transaction ends (as the server ends it when the
    // connection drops; rolled back here so the test need not wait for that).
    tx.rollback().await.expect("the rollback");
    drop(dying);
    drop(raw);
    let report = worker.fire_schedules().await.expect("a pass");
    assert_eq!(report.runs_started, 1);
    assert_eq!(
        scheduled_runs(&t).await,
        [("every-second".to_owned(), at(1))]
    );

    // A start of the next tick committed by itself, the row not moved (as a
    // fire in two transactions would leave it): the key finds that run.
    t.execute(
        "SELECT {schema}.start_run('schedules.ticked', '3', 'schedule:every-second:2031-03-01T12:00:02Z')",
        &[],
    )
    .await;
    t.clock.advance(Duration::from_secs(1));
    let report = worker.fire_schedules().await.expect("a pass");
    assert_eq!((report.schedules_fired, report.runs_started), (1, 0));
    let runs = t
        .client()
        .list_runs(&RunFilter::new().workflow("schedules.ticked"))
        .await
        .expect("runs");
    assert_eq!(runs.len(), 2, "one run per tick");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_this_version_cannot_read_is_paused_not_retried() {
    let t = TestDb::new().await;
    let (workflow, _) = ticked();
    let worker = t.db.worker().register(workflow).build().expect("a worker");
    let client = t.client();
    client
        .create_schedule::<Ticked>("hand-edited", &Schedule::cron("* * * * * *"), &1)
        .await
        .expect("created");
    t.execute(
        "UPDATE {schema}.schedules SET expression = 'every full moon' WHERE name = 'hand-edited'",
        &[],
    )
    .await;
    t.clock.advance(Duration::from_secs(5));
    let report = worker.fire_schedules().await.expect("a pass");
    assert_eq!((report.paused, report.runs_started), (1, 0));
    let row = client.schedule("hand-edited").await.expect("the row");
    assert_eq!(row.paused_by.as_deref(), Some("pgbus"));
    assert!(
        row.paused_reason
            .as_deref()
            .is_some_and(|reason| reason.contains("every full moon")),
        "{row:?}"
    );
    assert_eq!(worker.fire_schedules().await.expect("a pass").paused, 0);
}

#[tokio::test]
async fn the_clients_verbs_refuse_bad_input_naming_the_field() {
    let t = TestDb::new().await;
    let client = t.client();
    let cases = [
        (Schedule::cron("61 * * * * *"), "schedule"),
        (Schedule::cron("0 0 0 31 2 *"), "schedule"),
        (
            Schedule::cron("* * * * * *").timezone("Europe/Berlín"),
            "timezone",
        ),
        (
            Schedule::cron("* * * * * *").catch_up(CatchUp::All(0)),
            "catch_up",
        ),
    ];
    for (schedule, field) in cases {
        let error = client
            .create_schedule::<Ticked>("bad", &schedule, &1)
            .await
            .unwrap_err();
        assert!(
            matches!(&error, Error::InvalidSchedule { field: f, .. } if *f == field),
            "{error}"
        );
        assert!(error.to_string().contains(&format!("`{field}`")), "{error}");
    }
    let error = client
        .create_schedule::<Ticked>(" padded", &Schedule::cron("* * * * * *"), &1)
        .await
        .unwrap_err();
    assert!(
        matches!(error, Error::InvalidSchedule { field: "name", .. }),
        "{error}"
    );
    assert!(
        client
            .list_schedules(None, 10)
            .await
            .expect("listed")
            .is_empty()
    );

    let created = client
        .create_schedule::<Ticked>(
            "berlin",
            &Schedule::cron("0 30 2 * * *").timezone("Europe/Berlin"),
            &1,
        )
        .await
        .expect("created");
    // 2031-03-01 is winter in Berlin: 02:30 CET is 01:30 UTC the next day.
    assert_eq!(
        created.next_tick_at,
        Some(at(-12 * 3600 + 24 * 3600 + 3600 + 1800))
    );
    let updated = client
        .update_schedule("berlin", ScheduleUpdate::new().timezone("UTC"))
        .await
        .expect("updated");
    assert_eq!(
        updated.next_tick_at,
        Some(at(-12 * 3600 + 24 * 3600 + 2 * 3600 + 1800))
    );
    assert!(matches!(
        client
            .update_schedule("berlin", ScheduleUpdate::new().timezone("Nowhere/Land"))
            .await,
        Err(Error::InvalidSchedule {
            field: "timezone",
            ..
        })
    ));
    let paused = client
        .pause_schedule("berlin", "alice", "quiet night")
        .await
        .expect("paused");
    assert_eq!(paused.paused_reason.as_deref(), Some("quiet night"));
    assert!(matches!(
        client.pause_schedule("berlin", "alice", "").await,
        Err(Error::InvalidReason)
    ));
    client.resume_schedule("berlin").await.expect("resumed");
    assert!(matches!(
        client.resume_schedule("nope").await,
        Err(Error::ScheduleNotFound { .. })
    ));
    client.delete_schedule("berlin").await.expect("deleted");
    assert!(matches!(
        client.schedule("berlin").await,
        Err(Error::ScheduleNotFound { .. })
    ));
}
