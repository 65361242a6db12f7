//! Schedules in the test environment (issue 20): declared in code and fired as
//! the virtual clock moves, caught up after an outage, daylight saving in a
//! real zone, and the managed verbs.

use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};
use pgbus_runtime::prelude::*;
use pgbus_runtime::schedule::{CatchUp, Schedule, ScheduleOrigin};
use pgbus_testkit::{TestEnv, default_start};

/// Every ten minutes; each run's step outputs its tick.
struct Digest;

#[workflow(name = "digest", schedule = "0 */10 * * * *")]
impl Digest {
    #[step]
    async fn send(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&cx.tick().map(|tick| (tick.schedule.clone(), tick.at)))?;
        Ok(Flow::Complete)
    }
}

/// Minutely, catching up at most three missed ticks.
struct Sync;

#[workflow(name = "sync", schedule = "0 * * * * *", catch_up = "all(3)")]
impl Sync {
    #[step]
    async fn pull(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&cx.tick().map(|tick| tick.at))?;
        Ok(Flow::Complete)
    }
}

/// At 02:30 in Berlin, every day; started by the client's schedules.
struct Nightly;

#[workflow(name = "nightly", input = u8)]
impl Nightly {
    #[step]
    async fn run(&self, cx: &mut StepCx<u8>) -> StepResult {
        cx.output(&cx.tick().map(|tick| tick.at))?;
        Ok(Flow::Complete)
    }
}

fn minutes(n: i64) -> DateTime<Utc> {
    default_start() + chrono::Duration::minutes(n)
}

/// The outputs the runs' (only) steps recorded, in run order.
async fn outputs<T: serde::de::DeserializeOwned>(env: &TestEnv) -> Vec<T> {
    env.run_until_idle()
        .await
        .into_iter()
        .map(|record| serde_json::from_value(record.output.expect("an output")).expect("a tick"))
        .collect()
}

#[tokio::test]
async fn a_declared_schedule_fires_each_tick_as_the_clock_moves() {
    let env = TestEnv::new().register(Digest);
    let row = env.schedule("digest").expect("declared at registration");
    assert_eq!(row.origin, ScheduleOrigin::Code);
    assert_eq!(row.next_tick_at, Some(minutes(10)));
    env.advance(Duration::from_hours(1));
    let ticks: Vec<Option<(String, DateTime<Utc>)>> = outputs(&env).await;
    let expected: Vec<_> = (1..=6)
        .map(|n| Some(("digest".to_owned(), minutes(10 * n))))
        .collect();
    assert_eq!(ticks, expected);
    // A run started otherwise has no tick.
    env.start::<Digest>(&()).expect("a start");
    let none: Vec<Option<(String, DateTime<Utc>)>> = outputs(&env).await;
    assert_eq!(none, [None]);
}

#[tokio::test]
async fn after_an_outage_the_policy_catches_up() {
    let env = TestEnv::new().register(Sync);
    env.outage(Duration::from_mins(10));
    // Nothing fired while the workers were away.
    assert!(env.run_until_idle().await.is_empty());
    env.advance(Duration::from_secs(1));
    let ticks: Vec<Option<DateTime<Utc>>> = outputs(&env).await;
    assert_eq!(
        ticks,
        [Some(minutes(8)), Some(minutes(9)), Some(minutes(10))]
    );
    let row = env.schedule("sync").expect("the row");
    assert_eq!(row.ticks_skipped, 7);
    assert_eq!(row.next_tick_at, Some(minutes(11)));
    env.advance(Duration::from_mins(1));
    let ticks: Vec<Option<DateTime<Utc>>> = outputs(&env).await;
    assert_eq!(ticks, [Some(minutes(11))], "on time again");
}

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

#[tokio::test]
async fn a_berlin_night_schedule_through_both_clock_changes() {
    let env = TestEnv::starting_at(utc(2026, 3, 27, 12, 0)).register(Nightly);
    let berlin = Schedule::cron("0 30 2 * * *").timezone("Europe/Berlin");
    env.create_schedule::<Nightly>("nightly", &berlin, &1)
        .expect("created");
    env.advance(Duration::from_hours(96));
    let ticks: Vec<Option<DateTime<Utc>>> = outputs(&env).await;
    assert_eq!(
        ticks,
        [
            Some(utc(2026, 3, 28, 1, 30)), // 02:30 CET
            Some(utc(2026, 3, 29, 1, 0)),  // no 02:30 that night: 03:00 CEST
            Some(utc(2026, 3, 30, 0, 30)), // 02:30 CEST
            Some(utc(2026, 3, 31, 0, 30)),
        ]
    );
    env.pause_schedule("nightly", "ops", "summer")
        .expect("paused");
    let env_now = env.now();
    let until_october = utc(2026, 10, 23, 12, 0) - env_now;
    env.advance(until_october.to_std().expect("ahead"));
    assert!(env.run_until_idle().await.is_empty(), "paused all summer");
    let resumed = env.resume_schedule("nightly").expect("resumed");
    assert_eq!(resumed.next_tick_at, Some(utc(2026, 10, 24, 0, 30)));
    env.advance(Duration::from_hours(96));
    let ticks: Vec<Option<DateTime<Utc>>> = outputs(&env).await;
    assert_eq!(
        ticks,
        [
            Some(utc(2026, 10, 24, 0, 30)), // 02:30 CEST
            Some(utc(2026, 10, 25, 0, 30)), // 02:30 happens twice: the first
            Some(utc(2026, 10, 26, 1, 30)), // 02:30 CET
            Some(utc(2026, 10, 27, 1, 30)),
        ]
    );
}

#[tokio::test]
async fn managed_schedules_start_and_stop() {
    let env = TestEnv::new().register(Nightly);
    let every_minute = Schedule::cron("0 * * * * *").catch_up(CatchUp::Skip);
    env.create_schedule::<Nightly>("minutely", &every_minute, &9)
        .expect("created");
    assert!(matches!(
        env.create_schedule::<Nightly>("minutely", &every_minute, &9),
        Err(pgbus_runtime::Error::ScheduleExists { .. })
    ));
    env.advance(Duration::from_mins(3));
    assert_eq!(env.run_until_idle().await.len(), 3);
    env.delete_schedule("minutely").expect("deleted");
    env.advance(Duration::from_mins(3));
    assert!(env.run_until_idle().await.is_empty());
    assert!(env.list_schedules().is_empty());
}
