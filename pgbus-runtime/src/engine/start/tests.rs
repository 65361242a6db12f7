//! Start decisions: where a run's rows go with its own queue and priority,
//! when its first row is due, and which starts of a bulk call share a run.

use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};
use serde_json::json;

use super::*;
use crate::engine::{AttemptResult, AttemptState, RunState, RunStatus, Verb, plan_outcome};
use crate::prelude::*;
use crate::start_options::NewRun;
use crate::{Limits, Workflow};

struct Ship;

/// `label` names its own queue, `notify` its own priority; the rest take the
/// workflow's (or the run's).
#[workflow(name = "start.ship", queue = "ship", priority = 3)]
impl Ship {
    #[step(wait = "5s")]
    async fn pack(&self, _cx: &mut StepCx<()>) {}

    removed_step!(weigh);

    #[step(queue = "labels")]
    async fn label(&self, _cx: &mut StepCx<()>) {}

    #[step(priority = -7)]
    async fn notify(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn close(&self, _cx: &mut StepCx<()>) {}
}

const DEF: &WorkflowDefinition = <Ship as Workflow>::DEFINITION;

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 6, 1, 12, 0, 0).unwrap()
}

fn bulk() -> StartOptions {
    StartOptions::new().queue("bulk").priority(40)
}

fn run_with(overrides: RunOverrides) -> RunState {
    RunState {
        status: RunStatus::Performing,
        step_names: None,
        step_plan: None,
        overrides,
    }
}

/// Where the row after `step` goes, in a run with `overrides`.
fn next_after(step: &str, overrides: RunOverrides) -> (String, String, i16) {
    let plan = plan_outcome(
        DEF,
        &run_with(overrides),
        &AttemptState {
            step_name: step.to_owned(),
            attempt: 1,
            reattempts: 0,
        },
        &AttemptResult::ok(Verb::Complete, None),
    );
    let next = plan.next.expect("a next step");
    (next.step_name, next.queue, next.priority)
}

#[test]
fn a_plain_start_is_the_workflows_placement_due_after_the_wait() {
    let plan = plan_start(DEF, &StartOptions::new(), now()).unwrap();
    assert_eq!(
        (
            plan.first.step_name.as_str(),
            plan.first.queue.as_str(),
            plan.first.priority
        ),
        ("pack", "ship", 3)
    );
    assert_eq!(
        plan.due,
        FirstDue {
            not_before: None,
            delay_ms: 5_000
        }
    );
    assert_eq!(plan.due.at(now()), now() + chrono::Duration::seconds(5));
    assert_eq!(plan.overrides, RunOverrides::default());
    assert_eq!(plan.step_plan, crate::engine::step_plan(DEF));
    assert_eq!(plan.step_names, ["pack", "label", "notify", "close"]);
}

#[test]
fn the_runs_queue_and_priority_replace_the_workflows_but_not_a_steps_own() {
    let plan = plan_start(DEF, &bulk(), now()).unwrap();
    assert_eq!(
        (plan.first.queue.as_str(), plan.first.priority),
        ("bulk", 40)
    );
    let placed: Vec<(&str, &str, i16)> = plan
        .step_plan
        .iter()
        .map(|s| (s.name.as_str(), s.queue.as_str(), s.priority))
        .collect();
    assert_eq!(
        placed,
        [
            ("pack", "bulk", 40),
            ("label", "labels", 40),
            ("notify", "bulk", -7),
            ("close", "bulk", 40),
        ]
    );
    // Only a queue: the priority stays the workflow's.
    let queue_only = plan_start(DEF, &StartOptions::new().queue("bulk"), now()).unwrap();
    assert_eq!(
        (queue_only.first.queue.as_str(), queue_only.first.priority),
        ("bulk", 3)
    );
}

#[test]
fn later_steps_and_reattempts_keep_the_runs_placement() {
    let overrides = RunOverrides::of(&bulk());
    assert_eq!(
        next_after("pack", overrides.clone()),
        ("label".to_owned(), "labels".to_owned(), 40)
    );
    assert_eq!(
        next_after("label", overrides.clone()),
        ("notify".to_owned(), "bulk".to_owned(), -7)
    );
    assert_eq!(
        next_after("notify", overrides.clone()),
        ("close".to_owned(), "bulk".to_owned(), 40)
    );
    assert_eq!(
        next_after("pack", RunOverrides::default()),
        ("label".to_owned(), "labels".to_owned(), 3)
    );
    let reattempt = plan_outcome(
        DEF,
        &run_with(overrides),
        &AttemptState {
            step_name: "close".to_owned(),
            attempt: 1,
            reattempts: 0,
        },
        &AttemptResult::ok(Verb::Reattempt { wait_ms: 1_000 }, None),
    )
    .next
    .expect("a reattempt");
    assert_eq!((reattempt.queue.as_str(), reattempt.priority), ("bulk", 40));
}

#[test]
fn a_step_the_definition_lacks_goes_where_the_runs_plan_says_else_to_the_runs_queue() {
    // The run started under a version with `audit` after `close`, on `bulk`.
    let mut run = run_with(RunOverrides::of(&bulk()));
    run.step_names = Some(vec!["close".to_owned(), "audit".to_owned()]);
    let next = |run: &RunState| {
        plan_outcome(
            DEF,
            run,
            &AttemptState {
                step_name: "close".to_owned(),
                attempt: 1,
                reattempts: 0,
            },
            &AttemptResult::ok(Verb::Complete, None),
        )
        .next
        .expect("audit")
    };
    let unplanned = next(&run);
    assert_eq!((unplanned.queue.as_str(), unplanned.priority), ("bulk", 40));
    run.step_plan = Some(vec![crate::engine::PlannedStep {
        name: "audit".to_owned(),
        queue: "audits".to_owned(),
        priority: 1,
        timeout_ms: None,
        wait_ms: 0,
        wait_for: None,
    }]);
    let planned = next(&run);
    assert_eq!((planned.queue.as_str(), planned.priority), ("audits", 1));
}

#[test]
fn a_delay_counts_from_now_before_the_wait() {
    let plan = plan_start(
        DEF,
        &StartOptions::new().delay(Duration::from_mins(1)),
        now(),
    )
    .unwrap();
    assert_eq!(
        plan.due,
        FirstDue {
            not_before: None,
            delay_ms: 65_000
        }
    );
    assert_eq!(plan.due.at(now()), now() + chrono::Duration::seconds(65));
}

#[test]
fn a_start_time_is_due_at_it_plus_the_wait_and_never_before_now() {
    let at = now() + chrono::Duration::hours(2);
    let plan = plan_start(DEF, &StartOptions::new().at(at), now()).unwrap();
    assert_eq!(plan.due.not_before, Some(at));
    assert_eq!(plan.due.at(now()), at + chrono::Duration::seconds(5));
    // Later, on a clock past it (a Postgres store computes with its own).
    let later = at + chrono::Duration::hours(1);
    assert_eq!(plan.due.at(later), later);

    // Past by more than the wait: due at once, no past time kept.
    let past = plan_start(
        DEF,
        &StartOptions::new().at(now() - chrono::Duration::days(3)),
        now(),
    )
    .unwrap();
    assert_eq!(
        past.due,
        FirstDue {
            not_before: None,
            delay_ms: 0
        }
    );
    // Past by less than the wait: due at `at` + the wait, still ahead.
    let recent = plan_start(
        DEF,
        &StartOptions::new().at(now() - chrono::Duration::seconds(2)),
        now(),
    )
    .unwrap();
    assert_eq!(recent.due.at(now()), now() + chrono::Duration::seconds(3));
    assert_eq!(recent.due.delay_from(now()), 3_000);
}

#[test]
fn a_start_is_refused_before_anything_is_planned() {
    let error = plan_start(DEF, &StartOptions::new().queue("a b"), now()).unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidStartOption {
                option: "queue",
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn repeated_keys_share_the_first_starts_run() {
    let slots = bulk_slots([
        Some("a"),
        None,
        Some("b"),
        Some("a"),
        None,
        Some("b"),
        Some("a"),
    ]);
    assert_eq!(
        slots,
        [
            BulkSlot::Own,
            BulkSlot::Own,
            BulkSlot::Own,
            BulkSlot::SameAs(0),
            BulkSlot::Own,
            BulkSlot::SameAs(2),
            BulkSlot::SameAs(0),
        ]
    );
    assert!(bulk_slots(std::iter::empty()).is_empty());
}

#[test]
fn a_bulk_start_is_refused_whole_naming_the_first_bad_start() {
    let runs = vec![
        NewRun::new(json!(1), StartOptions::new()),
        NewRun::new(json!(2), StartOptions::new().key("k")),
        NewRun::new(json!("x".repeat(64)), StartOptions::new()),
        NewRun::new(json!(4), StartOptions::new().queue("")),
    ];
    let small = Limits::default().input_bytes(16);
    match plan_bulk(DEF, &runs, &small, now()) {
        Err(Error::StartRefused { index: 2, source }) => {
            assert!(matches!(*source, Error::InvalidInput { .. }), "{source:?}");
        }
        other => panic!("{other:?}"),
    }
    match plan_bulk(DEF, &runs, &Limits::default(), now()) {
        Err(Error::StartRefused { index: 3, source }) => assert!(
            matches!(
                *source,
                Error::InvalidStartOption {
                    option: "queue",
                    ..
                }
            ),
            "{source:?}"
        ),
        other => panic!("{other:?}"),
    }
    let planned = plan_bulk(DEF, &runs[..3], &Limits::default(), now()).unwrap();
    assert_eq!(planned.len(), 3);
    assert!(planned.iter().all(|p| matches!(p, BulkStart::Own(_))));
}

#[test]
fn a_bulk_start_is_bounded_in_runs_and_bytes() {
    let max = crate::start_options::MAX_STARTS_PER_CALL;
    assert!(check_bulk_count(max).is_ok());
    assert!(matches!(
        check_bulk_count(max + 1),
        Err(Error::TooManyStarts { runs, input_bytes: None, .. }) if runs == max + 1
    ));
    let bytes = crate::start_options::MAX_START_MANY_INPUT_BYTES;
    assert!(check_bulk(1, Some(bytes)).is_ok());
    let error = check_bulk(1, Some(bytes + 1)).unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "a start_many call starts at most {max} runs and {bytes} bytes of input JSON; \
             this one has 1 runs and {} bytes: split it",
            bytes + 1
        )
    );
    let too_many: Vec<NewRun> = (0..=max)
        .map(|i| NewRun::new(json!(i), StartOptions::new()))
        .collect();
    assert!(matches!(
        plan_bulk(DEF, &too_many, &Limits::default(), now()),
        Err(Error::TooManyStarts { .. })
    ));
}
