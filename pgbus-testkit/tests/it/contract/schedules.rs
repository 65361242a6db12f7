//! Schedules' contract scenarios (issue 20): each tick starts one run whose
//! claims carry the tick, a stale fire changes nothing, catch-up after an
//! outage, and the managed verbs' errors, against both stores.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_runtime::Error;
use pgbus_runtime::prelude::*;
use pgbus_runtime::schedule::{
    CatchUp, Fired, Schedule, ScheduleChange, ScheduleOrigin, ScheduleSpec, ScheduleUpdate, Tick,
};
use pgbus_runtime::store::{FireSettings, Runner, Store, fire_schedules};
use pgbus_runtime::{Limits, RunFilter};
use pgbus_testkit::default_start;

use super::{Clocked, Pair, Pinned, WORKER, memory, queues};

fn spec(name: &str, schedule: &Schedule) -> ScheduleSpec {
    ScheduleSpec::new(
        name,
        Pair::DEFINITION.name,
        schedule,
        serde_json::json!(7),
        &Limits::default(),
    )
    .expect("a valid schedule")
}

fn workflows() -> Vec<String> {
    vec![Pair::DEFINITION.name.to_owned()]
}

/// One fire pass over `store`, as a worker of `Pair` runs it.
async fn fire<S: Store>(store: &S) -> pgbus_runtime::store::FireReport {
    fire_schedules(
        store,
        &workflows(),
        |w| (w == Pair::DEFINITION.name).then_some(Pair::DEFINITION),
        &FireSettings::default(),
    )
    .await
    .expect("a fire pass")
}

/// The ticks of the runs due now, claimed, oldest run first.
async fn claimed_ticks<S: Store + Clone>(store: &S) -> Vec<Option<Tick>> {
    let runner = Runner::new(store.clone(), WORKER).register(Pair);
    let mut claims = runner.claim(&queues(), 10_000).await.expect("claims");
    claims.sort_by_key(|claim| claim.run_id);
    claims.into_iter().map(|claim| claim.tick).collect()
}

fn at(seconds: i64) -> DateTime<Utc> {
    default_start() + chrono::Duration::seconds(seconds)
}

#[allow(clippy::unnecessary_wraps)] // compared with claims' `Option<Tick>`
fn tick(name: &str, seconds: i64) -> Option<Tick> {
    Some(Tick {
        schedule: name.to_owned(),
        at: at(seconds),
    })
}

async fn run_count<S: Store>(store: &S) -> usize {
    store
        .list_runs(&RunFilter::new().workflow(Pair::DEFINITION.name).limit(1000))
        .await
        .expect("the runs")
        .len()
}

/// A per-second schedule over ten seconds: one run per tick, each claim
/// carrying its tick, however often the pass runs.
async fn each_tick_starts_one_run<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let created = store
        .create_schedule(&spec("every-second", &Schedule::cron("* * * * * *")))
        .await
        .expect("created");
    assert_eq!(created.origin, ScheduleOrigin::Client);
    assert_eq!(created.next_tick_at, Some(at(1)));
    assert_eq!(fire(store).await.runs_started, 0, "nothing due yet");
    for _ in 0..10 {
        clocked.advance(Duration::from_secs(1));
        assert_eq!(fire(store).await.runs_started, 1);
        assert_eq!(fire(store).await.runs_started, 0, "a tick fires once");
    }
    assert_eq!(run_count(store).await, 10);
    let ticks = claimed_ticks(store).await;
    let expected: Vec<_> = (1..=10).map(|s| tick("every-second", s)).collect();
    assert_eq!(ticks, expected);
    let row = &store
        .list_schedules(None, Some("every-second"), 1)
        .await
        .expect("the row")[0];
    assert_eq!(row.last_tick_at, Some(at(10)));
    assert_eq!(row.next_tick_at, Some(at(11)));
    assert_eq!(row.last_fired_at, Some(at(10)));
}

/// A fire of a row read before another worker fired it, or before it was
/// paused, is lost and writes nothing; a run the tick's key holds already is
/// not started again.
async fn a_stale_fire_changes_nothing<C: Clocked>(clocked: C) {
    let store = clocked.store();
    store
        .create_schedule(&spec("race", &Schedule::cron("* * * * * *")))
        .await
        .expect("created");
    clocked.advance(Duration::from_secs(1));
    let first = store.due_schedules(&workflows(), 10).await.expect("due");
    let second = store.due_schedules(&workflows(), 10).await.expect("due");
    assert_eq!(first.len(), 1);
    let fired = store
        .fire_schedule(Pair::DEFINITION, &first[0], 100)
        .await
        .expect("fired");
    assert!(
        matches!(&fired, Fired::Applied { runs, .. } if runs.len() == 1),
        "{fired:?}"
    );
    let again = store
        .fire_schedule(Pair::DEFINITION, &second[0], 100)
        .await
        .expect("fenced");
    assert_eq!(again, Fired::Lost);
    assert_eq!(run_count(store).await, 1);

    // A start that committed the next tick's run under its key (a fire
    // whose reply was lost, say): the fire finds it, starts nothing.
    let key = Tick {
        schedule: "race".to_owned(),
        at: at(2),
    }
    .idempotency_key();
    let (existing, _) = store
        .start_run(
            Pair::DEFINITION,
            &serde_json::json!(7),
            &pgbus_runtime::StartOptions::new().key(key),
        )
        .await
        .expect("a start");
    clocked.advance(Duration::from_secs(1));
    let due = store.due_schedules(&workflows(), 10).await.expect("due");
    let Fired::Applied { runs, .. } = store
        .fire_schedule(Pair::DEFINITION, &due[0], 100)
        .await
        .expect("fired")
    else {
        panic!("applied");
    };
    assert_eq!(runs, [(at(2), existing, false)]);
    assert_eq!(run_count(store).await, 2);

    // Paused after the pass read it: lost.
    clocked.advance(Duration::from_secs(1));
    let due = store.due_schedules(&workflows(), 10).await.expect("due");
    store
        .change_schedule(
            "race",
            &ScheduleChange::Pause {
                actor: "ops".to_owned(),
                reason: "stop".to_owned(),
            },
        )
        .await
        .expect("paused");
    let lost = store
        .fire_schedule(Pair::DEFINITION, &due[0], 100)
        .await
        .expect("fenced");
    assert_eq!(lost, Fired::Lost);
    assert!(
        store
            .due_schedules(&workflows(), 10)
            .await
            .expect("due")
            .is_empty()
    );
}

/// Ten minutes without a worker: `skip` starts nothing, `one` a run for the
/// latest tick, `all(5)` runs for the latest five; then each fires on time.
async fn an_outage_is_caught_up_as_each_policy_says<C: Clocked>(clocked: C) {
    let store = clocked.store();
    for (name, catch_up) in [
        ("skip", CatchUp::Skip),
        ("one", CatchUp::One),
        ("all", CatchUp::All(5)),
    ] {
        store
            .create_schedule(&spec(
                name,
                &Schedule::cron("* * * * * *").catch_up(catch_up),
            ))
            .await
            .expect("created");
    }
    clocked.advance(Duration::from_mins(10));
    let report = fire(store).await;
    assert_eq!(report.runs_started, 6);
    assert_eq!(report.ticks_skipped, 600 + 599 + 595);
    let mut ticks = claimed_ticks(store).await;
    ticks.sort_by_key(|t| t.as_ref().map(|t| (t.schedule.clone(), t.at)));
    let mut expected = vec![tick("one", 600)];
    expected.extend((596..=600).map(|s| tick("all", s)));
    expected.sort_by_key(|t| t.as_ref().map(|t| (t.schedule.clone(), t.at)));
    assert_eq!(ticks, expected);
    for name in ["skip", "one", "all"] {
        let row = &store
            .list_schedules(None, Some(name), 1)
            .await
            .expect("the row")[0];
        assert_eq!(row.next_tick_at, Some(at(601)), "{name}");
    }
    clocked.advance(Duration::from_secs(1));
    assert_eq!(fire(store).await.runs_started, 3, "on time again: one each");
}

/// Pause, resume (from the next tick after now), update, delete, and their
/// typed errors; a code declaration never overwrites the client's schedule.
async fn managed_verbs_and_their_errors<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let hourly = spec("hourly", &Schedule::cron("0 0 * * * *"));
    store.create_schedule(&hourly).await.expect("created");
    assert!(matches!(
        store.create_schedule(&hourly).await,
        Err(Error::ScheduleExists { .. })
    ));
    let pause = ScheduleChange::Pause {
        actor: "ops".to_owned(),
        reason: "maintenance".to_owned(),
    };
    let paused = store
        .change_schedule("hourly", &pause)
        .await
        .expect("paused");
    assert_eq!(paused.paused_by.as_deref(), Some("ops"));
    assert!(matches!(
        store.change_schedule("hourly", &pause).await,
        Err(Error::IllegalScheduleChange { .. })
    ));
    clocked.advance(Duration::from_mins(181));
    assert_eq!(fire(store).await.runs_started, 0, "paused: nothing fires");
    let resumed = store
        .change_schedule("hourly", &ScheduleChange::Resume)
        .await
        .expect("resumed");
    assert_eq!(
        resumed.next_tick_at,
        Some(at(4 * 3600)),
        "no catch-up of a pause"
    );
    assert_eq!(fire(store).await.runs_started, 0);

    let bad = ScheduleChange::Update(ScheduleUpdate::new().expression("0 0 0 31 2 *"));
    let error = store.change_schedule("hourly", &bad).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidSchedule {
                field: "schedule",
                ..
            }
        ),
        "{error}"
    );
    let update = ScheduleChange::Update(ScheduleUpdate::new().expression("0 30 * * * *"));
    let updated = store
        .change_schedule("hourly", &update)
        .await
        .expect("updated");
    assert_eq!(updated.next_tick_at, Some(at(3 * 3600 + 1800)));
    assert!(matches!(
        store.change_schedule("nope", &ScheduleChange::Resume).await,
        Err(Error::ScheduleNotFound { .. })
    ));

    // A declaration in code under the client's name leaves it alone...
    let declared = spec("hourly", &Schedule::cron("0 5 * * * *"));
    let left = store
        .declare_schedules(std::slice::from_ref(&declared))
        .await
        .expect("declared");
    assert_eq!(left, ["hourly"]);
    // ...and one of its own is written, and refuses updates.
    let code = spec("code", &Schedule::cron("0 5 * * * *"));
    assert!(
        store
            .declare_schedules(std::slice::from_ref(&code))
            .await
            .expect("declared")
            .is_empty()
    );
    assert!(matches!(
        store.change_schedule("code", &update).await,
        Err(Error::ScheduleDeclaredInCode { .. })
    ));
    // An operator's pause survives the next declaration (a redeploy).
    store.change_schedule("code", &pause).await.expect("paused");
    store
        .declare_schedules(std::slice::from_ref(&code))
        .await
        .expect("declared again");
    let listed = store.list_schedules(None, None, 10).await.expect("listed");
    let names: Vec<_> = listed.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["code", "hourly"]);
    assert!(listed[0].is_paused());
    assert_eq!(listed[0].origin, ScheduleOrigin::Code);

    let deleted = store.delete_schedule("hourly").await.expect("deleted");
    assert_eq!(deleted.name, "hourly");
    assert!(matches!(
        store.delete_schedule("hourly").await,
        Err(Error::ScheduleNotFound { .. })
    ));
    assert_eq!(
        store
            .list_schedules(None, None, 10)
            .await
            .expect("listed")
            .len(),
        1
    );
}

/// A listing leaves inputs out (each may be up to 1 MiB, a page holds up to
/// 1,000 rows); a read by name carries it.
async fn a_listing_leaves_inputs_out<C: Clocked>(clocked: C) {
    let store = clocked.store();
    for name in ["a", "b"] {
        store
            .create_schedule(&spec(name, &Schedule::cron("0 0 * * * *")))
            .await
            .expect("created");
    }
    let listed = store.list_schedules(None, None, 10).await.expect("listed");
    assert_eq!(listed.len(), 2);
    assert!(
        listed
            .iter()
            .all(|s| s.input_omitted && s.input == serde_json::Value::Null)
    );
    let of_workflow = store
        .list_schedules(Some(Pair::DEFINITION.name), None, 10)
        .await
        .expect("listed");
    assert!(of_workflow.iter().all(|s| s.input_omitted));
    let one = store
        .list_schedules(None, Some("b"), 1)
        .await
        .expect("read by name");
    assert_eq!(one.len(), 1);
    assert!(!one[0].input_omitted);
    assert_eq!(one[0].input, serde_json::json!(7));
}

both_stores!(
    a_listing_leaves_inputs_out,
    each_tick_starts_one_run,
    a_stale_fire_changes_nothing,
    an_outage_is_caught_up_as_each_policy_says,
    managed_verbs_and_their_errors,
);
