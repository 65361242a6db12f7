use chrono::{DateTime, Duration, TimeZone, Utc};
use serde_json::json;

use super::*;
use crate::schedule::{ScheduleUpdate, Tick};

fn at(h: u32, m: u32, s: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, h, m, s).unwrap()
}

fn spec(expression: &str, catch_up: CatchUp) -> ScheduleSpec {
    ScheduleSpec::new(
        "nightly",
        "reports",
        &Schedule::cron(expression).catch_up(catch_up),
        json!({"n": 1}),
        &Limits::default(),
    )
    .unwrap()
}

fn row(expression: &str, catch_up: CatchUp, created: DateTime<Utc>) -> ScheduleView {
    ScheduleView::new(&spec(expression, catch_up), ScheduleOrigin::Client, created)
}

#[test]
fn a_due_tick_found_in_time_fires_once_and_moves_on() {
    let schedule = row("* * * * * *", CatchUp::Skip, at(0, 0, 0));
    assert_eq!(schedule.next_tick_at, Some(at(0, 0, 1)));
    assert_eq!(fire_plan(&schedule, at(0, 0, 0), 100), Ok(None));
    let plan = fire_plan(&schedule, at(0, 0, 1), 100).unwrap().unwrap();
    assert_eq!(plan.ticks, [at(0, 0, 1)]);
    assert_eq!(plan.next_tick_at, Some(at(0, 0, 2)));
    assert!(!plan.missed);
    // 30 seconds late is not missed: every tick runs, whatever the policy.
    let plan = fire_plan(&schedule, at(0, 0, 30), 100).unwrap().unwrap();
    assert_eq!(plan.ticks.len(), 30);
    assert_eq!(plan.next_tick_at, Some(at(0, 0, 31)));
    // ...at most `max_ticks` a pass; the rest next time.
    let plan = fire_plan(&schedule, at(0, 0, 30), 10).unwrap().unwrap();
    assert_eq!(plan.ticks.len(), 10);
    assert_eq!(plan.next_tick_at, Some(at(0, 0, 11)));
}

#[test]
fn paused_or_unreadable_schedules_do_not_fire() {
    let mut schedule = row("* * * * * *", CatchUp::One, at(0, 0, 0));
    schedule.paused_at = Some(at(0, 0, 0));
    assert_eq!(fire_plan(&schedule, at(1, 0, 0), 100), Ok(None));
    let mut schedule = row("* * * * * *", CatchUp::One, at(0, 0, 0));
    schedule.expression = "nonsense".to_owned();
    let reason = fire_plan(&schedule, at(1, 0, 0), 100).unwrap_err();
    assert!(reason.contains("`schedule`"), "{reason}");
    pause_unreadable(&mut schedule, &reason, at(1, 0, 0));
    assert_eq!(schedule.paused_by.as_deref(), Some(SCHEDULE_ACTOR));
}

/// A per-second schedule whose workers were away for ten minutes.
#[test]
fn after_an_outage_the_catch_up_policy_decides() {
    let outage_end = at(0, 10, 0);
    let skip = row("* * * * * *", CatchUp::Skip, at(0, 0, 0));
    let plan = fire_plan(&skip, outage_end, 100).unwrap().unwrap();
    assert!(plan.missed);
    assert!(plan.ticks.is_empty());
    assert_eq!(plan.skipped, 600);
    assert_eq!(plan.next_tick_at, Some(at(0, 10, 1)));

    let one = row("* * * * * *", CatchUp::One, at(0, 0, 0));
    let plan = fire_plan(&one, outage_end, 100).unwrap().unwrap();
    assert_eq!(plan.ticks, [outage_end]);
    assert_eq!(plan.skipped, 599);
    assert_eq!(plan.next_tick_at, Some(at(0, 10, 1)));

    let all = row("* * * * * *", CatchUp::All(5), at(0, 0, 0));
    let plan = fire_plan(&all, outage_end, 100).unwrap().unwrap();
    assert_eq!(
        plan.ticks,
        [
            at(0, 9, 56),
            at(0, 9, 57),
            at(0, 9, 58),
            at(0, 9, 59),
            at(0, 10, 0)
        ]
    );
    assert_eq!(plan.skipped, 595);
    assert_eq!(plan.next_tick_at, Some(at(0, 10, 1)));
}

#[test]
fn a_catch_up_window_larger_than_a_pass_is_fired_over_passes_without_repeats() {
    let mut schedule = row("0 * * * * *", CatchUp::All(150), at(0, 0, 0));
    let now = at(4, 0, 0); // 240 minutely ticks missed
    let first = fire_plan(&schedule, now, 100).unwrap().unwrap();
    assert_eq!(first.ticks.len(), 100);
    assert_eq!(first.ticks[0], at(1, 31, 0)); // the latest 150 start at 01:31
    assert_eq!(first.skipped, 90);
    let runs: Vec<_> = first
        .ticks
        .iter()
        .map(|tick| (*tick, RunId(1), true))
        .collect();
    fired(&mut schedule, &first, &runs, now);
    assert_eq!(schedule.next_tick_at, Some(at(3, 11, 0)));
    let second = fire_plan(&schedule, now, 100).unwrap().unwrap();
    assert_eq!(second.ticks.len(), 50);
    assert_eq!(second.ticks[0], at(3, 11, 0));
    assert_eq!(second.ticks.last(), Some(&now));
    assert_eq!(second.skipped, 0);
    assert_eq!(second.next_tick_at, Some(at(4, 1, 0)));
}

#[test]
fn the_latest_missed_tick_of_a_sparse_schedule_is_found() {
    let daily = row("0 0 9 * * *", CatchUp::One, at(0, 0, 0));
    let now = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    let plan = fire_plan(&daily, now, 100).unwrap().unwrap();
    assert_eq!(
        plan.ticks,
        [Utc.with_ymd_and_hms(2026, 3, 1, 9, 0, 0).unwrap()]
    );
    assert_eq!(plan.skipped, 59);
}

#[test]
fn fired_records_the_last_tick_and_run() {
    let mut schedule = row("* * * * * *", CatchUp::One, at(0, 0, 0));
    let plan = fire_plan(&schedule, at(0, 0, 2), 100).unwrap().unwrap();
    fired(
        &mut schedule,
        &plan,
        &[(at(0, 0, 1), RunId(7), true), (at(0, 0, 2), RunId(8), true)],
        at(0, 0, 2),
    );
    assert_eq!(schedule.last_tick_at, Some(at(0, 0, 2)));
    assert_eq!(schedule.last_run_id, Some(RunId(8)));
    assert_eq!(schedule.next_tick_at, Some(at(0, 0, 3)));
    assert_eq!(schedule.last_fired_at, Some(at(0, 0, 2)));
}

#[test]
fn changes_check_their_values_and_moves() {
    let limits = Limits::default();
    let mut schedule = row("0 0 * * * *", CatchUp::One, at(0, 0, 0));
    let bad = ScheduleChange::Update(ScheduleUpdate::new().timezone("Mars/Base"));
    let error = change_schedule(&mut schedule, &bad, at(0, 30, 0), &limits).unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidSchedule {
                field: "timezone",
                ..
            }
        ),
        "{error}"
    );
    let update = ScheduleChange::Update(ScheduleUpdate::new().expression("0 15 * * * *"));
    change_schedule(&mut schedule, &update, at(0, 30, 0), &limits).unwrap();
    assert_eq!(schedule.next_tick_at, Some(at(1, 15, 0)));

    let pause = ScheduleChange::Pause {
        actor: "alice".to_owned(),
        reason: "maintenance".to_owned(),
    };
    change_schedule(&mut schedule, &pause, at(0, 31, 0), &limits).unwrap();
    assert!(matches!(
        change_schedule(&mut schedule, &pause, at(0, 31, 0), &limits),
        Err(Error::IllegalScheduleChange { .. })
    ));
    // Ticks while paused are not caught up: the next is after the resume.
    change_schedule(
        &mut schedule,
        &ScheduleChange::Resume,
        at(3, 20, 0),
        &limits,
    )
    .unwrap();
    assert_eq!(schedule.next_tick_at, Some(at(4, 15, 0)));
    assert!(matches!(
        change_schedule(
            &mut schedule,
            &ScheduleChange::Resume,
            at(3, 20, 0),
            &limits
        ),
        Err(Error::IllegalScheduleChange { .. })
    ));

    let mut code = ScheduleView::new(
        &spec("0 0 * * * *", CatchUp::One),
        ScheduleOrigin::Code,
        at(0, 0, 0),
    );
    assert!(matches!(
        change_schedule(&mut code, &update, at(0, 0, 0), &limits),
        Err(Error::ScheduleDeclaredInCode { .. })
    ));
    change_schedule(&mut code, &pause, at(0, 0, 0), &limits).unwrap();
}

#[test]
fn a_declaration_inserts_updates_or_leaves_an_operators_schedule_alone() {
    let declared = spec("0 0 * * * *", CatchUp::One);
    let Declare::Insert(mut stored) = declare_schedule(None, &declared, at(0, 0, 0)) else {
        panic!("inserted");
    };
    assert_eq!(stored.origin, ScheduleOrigin::Code);
    // An operator paused it; a redeploy with the same values keeps the pause
    // and the next tick.
    stored.paused_at = Some(at(0, 10, 0));
    let Declare::Update(again) = declare_schedule(Some(&stored), &declared, at(2, 0, 0)) else {
        panic!("updated");
    };
    assert_eq!(again.paused_at, Some(at(0, 10, 0)));
    assert_eq!(again.next_tick_at, Some(at(1, 0, 0)));
    assert_eq!(again.declared_at, Some(at(2, 0, 0)));
    // A new expression moves the next tick from now; the pause stays.
    let moved = spec("0 30 * * * *", CatchUp::One);
    let Declare::Update(changed) = declare_schedule(Some(&stored), &moved, at(2, 0, 0)) else {
        panic!("updated");
    };
    assert_eq!(changed.next_tick_at, Some(at(2, 30, 0)));
    assert_eq!(changed.paused_at, Some(at(0, 10, 0)));
    let client = row("0 0 * * * *", CatchUp::One, at(0, 0, 0));
    assert_eq!(
        declare_schedule(Some(&client), &declared, at(0, 0, 0)),
        Declare::Conflict
    );
}

#[test]
fn a_ticks_key_names_schedule_and_time() {
    let tick = Tick {
        schedule: "nightly".to_owned(),
        at: at(1, 2, 3) + Duration::zero(),
    };
    assert_eq!(
        tick.idempotency_key(),
        "schedule:nightly:2026-01-01T01:02:03Z"
    );
}

#[test]
fn a_run_time_workflow_name_is_checked_and_a_huge_name_is_quoted_cut() {
    let check = |name: &str, workflow: &str| {
        ScheduleSpec::new(
            name,
            workflow,
            &Schedule::cron("@daily"),
            json!(null),
            &Limits::default(),
        )
    };
    // No worker registers these: the schedule would never fire, and a huge
    // one would be read by every listing.
    for workflow in ["", "  ", "a\nb", "a\u{200b}b", &"w".repeat(256)] {
        match check("nightly", workflow) {
            Err(Error::InvalidSchedule { field, reason, .. }) => {
                assert_eq!(field, "workflow");
                assert!(reason.starts_with("`workflow`: "), "{reason}");
            }
            other => panic!("{workflow:?}: {other:?}"),
        }
    }
    assert!(check("nightly", &"w".repeat(255)).is_ok());
    assert!(check("nightly", "orders.fulfil").is_ok());
    // A megabyte of name is refused by a short error.
    let error = check(&"n".repeat(1_000_000), "reports").unwrap_err();
    assert!(error.to_string().len() < 400, "{error}");
    assert!(matches!(
        error,
        Error::InvalidSchedule { field: "name", .. }
    ));
}
