//! What a new version does to runs in flight, one verdict at a time, on a
//! run of five steps (`reserve`, `charge`, `await_payment` waiting for
//! `paid`, the fan_out `notify`, `ship`), all on queue `orders`.

use super::{InFlight, LatestRow, NewVersion, Stop, Verdict, VerdictKind, deploy_verdict};
use crate::definition::EntryKind;
use crate::engine::{PlanEntry, PlannedStep, RunStatus, StepStatus};

const OLD: [&str; 5] = ["reserve", "charge", "await_payment", "notify", "ship"];

fn entry(name: &str, kind: EntryKind) -> PlanEntry {
    PlanEntry {
        name: name.to_owned(),
        kind,
        queue: "orders".to_owned(),
        wait_for: (name == "await_payment" && kind != EntryKind::Removed)
            .then(|| "paid".to_owned()),
    }
}

/// The old version, with `change` applied to its entries.
fn version(change: impl FnOnce(&mut Vec<PlanEntry>)) -> Vec<PlanEntry> {
    let mut plan: Vec<PlanEntry> = OLD
        .iter()
        .map(|name| {
            let kind = if *name == "notify" {
                EntryKind::FanOut
            } else {
                EntryKind::Step
            };
            entry(name, kind)
        })
        .collect();
    change(&mut plan);
    plan
}

fn remove(plan: &mut Vec<PlanEntry>, name: &str) {
    plan.retain(|e| e.name != name);
}

fn gravestone(plan: &mut [PlanEntry], name: &str) {
    for e in plan.iter_mut().filter(|e| e.name == name) {
        e.kind = EntryKind::Removed;
        e.wait_for = None;
    }
}

fn insert_after(plan: &mut Vec<PlanEntry>, after: &str, name: &str) {
    let at = plan
        .iter()
        .position(|e| e.name == after)
        .map_or(0, |i| i + 1);
    plan.insert(at, entry(name, EntryKind::Step));
}

/// A run of the old version whose current step's latest row is `step` in
/// `status`, on queue `orders`.
fn at(step: &str, status: StepStatus) -> InFlight {
    let run_status = match status {
        StepStatus::InProgress => RunStatus::Performing,
        StepStatus::Failed | StepStatus::Completed => RunStatus::Paused,
        _ => RunStatus::Ready,
    };
    InFlight {
        status: run_status,
        current_step: Some(step.to_owned()),
        step_names: Some(OLD.iter().map(|s| (*s).to_owned()).collect()),
        step_plan: Some(
            OLD.iter()
                .map(|name| PlannedStep {
                    name: (*name).to_owned(),
                    queue: "orders".to_owned(),
                    priority: 0,
                    timeout_ms: None,
                    wait_ms: 0,
                    wait_for: (*name == "await_payment").then(|| "paid".to_owned()),
                })
                .collect(),
        ),
        version_plan: None,
        latest: Some(LatestRow {
            step_name: step.to_owned(),
            status,
            queue: "orders".to_owned(),
            waiting_for: None,
        }),
    }
}

/// `run` parked (or woken) on signal `signal`.
fn on_signal(mut run: InFlight, signal: &str) -> InFlight {
    if let Some(latest) = &mut run.latest {
        latest.waiting_for = Some(signal.to_owned());
    }
    run
}

fn judge(run: &InFlight, plan: &[PlanEntry]) -> Verdict {
    judge_on(run, plan, &["orders"])
}

fn judge_on(run: &InFlight, plan: &[PlanEntry], queues: &[&str]) -> Verdict {
    let queues: Vec<String> = queues.iter().map(|q| (*q).to_owned()).collect();
    deploy_verdict(
        run,
        &NewVersion {
            plan,
            queues: &queues,
        },
    )
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn the_same_version_advances_every_run_wherever_it_is() {
    let same = version(|_| {});
    for step in OLD {
        for status in [
            StepStatus::Scheduled,
            StepStatus::InProgress,
            StepStatus::Failed,
            StepStatus::Completed,
        ] {
            let verdict = judge(&at(step, status), &same);
            assert_eq!(verdict.verdict, VerdictKind::Advances, "{step} {status}");
            assert_eq!(verdict.to_string(), "advances");
        }
    }
    let parked = judge(
        &on_signal(at("await_payment", StepStatus::Waiting), "paid"),
        &same,
    );
    assert_eq!(parked.verdict, VerdictKind::Advances);
}

#[test]
fn a_gravestone_is_skipped_by_runs_before_it_and_by_its_own_due_row() {
    let new = version(|p| gravestone(p, "charge"));
    for run in [
        at("reserve", StepStatus::Scheduled),
        at("reserve", StepStatus::InProgress),
        at("charge", StepStatus::Scheduled),
        // Paused by a `Pause` verb in `reserve`: a resume writes `charge`'s
        // row, which the new workers skip.
        at("reserve", StepStatus::Completed),
    ] {
        let verdict = judge(&run, &new);
        assert_eq!(verdict.verdict, VerdictKind::SkipsGravestone, "{run:?}");
        assert_eq!(verdict.skipped, names(&["charge"]));
        assert_eq!(verdict.stop, None);
    }
    let past = judge(&at("ship", StepStatus::Scheduled), &new);
    assert_eq!(
        past.verdict,
        VerdictKind::Advances,
        "past it: nothing changes"
    );
}

#[test]
fn a_step_added_anywhere_is_missed_by_every_run_that_started_before() {
    // Runs go along the list they started with: an added step is never run
    // by them, before or after their position.
    let new = version(|p| insert_after(p, "charge", "audit"));
    for step in ["reserve", "charge", "ship"] {
        let verdict = judge(&at(step, StepStatus::Scheduled), &new);
        assert_eq!(verdict.verdict, VerdictKind::MissesInserted, "at {step}");
        assert_eq!(verdict.missed, names(&["audit"]));
        assert_eq!(verdict.to_string(), "never runs `audit`");
    }
}

#[test]
fn a_step_removed_without_a_gravestone_pauses_the_runs_that_still_have_it_ahead() {
    let new = version(|p| remove(p, "charge"));
    for run in [
        at("reserve", StepStatus::Scheduled),
        at("reserve", StepStatus::InProgress),
        at("charge", StepStatus::Scheduled),
        // Paused earlier at `charge` (a failure): a resume runs it again.
        at("charge", StepStatus::Failed),
        at("reserve", StepStatus::Completed),
    ] {
        let verdict = judge(&run, &new);
        assert_eq!(
            verdict.verdict,
            VerdictKind::PausesStepNotDefined,
            "{run:?}"
        );
        assert_eq!(
            verdict.stop,
            Some(Stop::NotDefined {
                step: "charge".to_owned()
            })
        );
        assert!(verdict.verdict.stops());
    }
    assert_eq!(
        judge(&at("await_payment", StepStatus::Scheduled), &new).verdict,
        VerdictKind::Advances,
        "a run past it never needs it"
    );
}

#[test]
fn a_rename_pauses_runs_before_the_old_name_and_is_missed_by_runs_past_it() {
    // A rename is a removal and an addition.
    let renamed = version(|p| {
        for e in p.iter_mut().filter(|e| e.name == "charge") {
            e.name = "charge_card".to_owned();
        }
    });
    let before = judge(&at("reserve", StepStatus::Scheduled), &renamed);
    assert_eq!(before.verdict, VerdictKind::PausesStepNotDefined);
    assert_eq!(before.stop.as_ref().map(Stop::step), Some("charge"));
    assert_eq!(before.missed, names(&["charge_card"]));
    assert_eq!(
        judge(&at("charge", StepStatus::Scheduled), &renamed).verdict,
        VerdictKind::PausesStepNotDefined
    );
    let past = judge(&at("ship", StepStatus::Scheduled), &renamed);
    assert_eq!(past.verdict, VerdictKind::MissesInserted);
    assert_eq!(past.missed, names(&["charge_card"]));

    // With a gravestone for the old name, no run pauses; each skips the old
    // step and misses the new one.
    let with_gravestone = version(|p| {
        gravestone(p, "charge");
        insert_after(p, "charge", "charge_card");
    });
    for step in ["reserve", "charge"] {
        let verdict = judge(&at(step, StepStatus::Scheduled), &with_gravestone);
        assert_eq!(verdict.verdict, VerdictKind::MissesInserted, "at {step}");
        assert_eq!(verdict.skipped, names(&["charge"]));
        assert_eq!(verdict.missed, names(&["charge_card"]));
        assert_eq!(
            verdict.to_string(),
            "never runs `charge_card`; skips `charge`"
        );
    }
}

#[test]
fn a_row_on_a_queue_no_new_worker_claims_from_waits() {
    let moved = version(|p| {
        for e in p.iter_mut() {
            e.queue = "orders-v2".to_owned();
        }
    });
    let due = judge_on(&at("charge", StepStatus::Scheduled), &moved, &["orders-v2"]);
    assert_eq!(due.verdict, VerdictKind::Waits);
    assert_eq!(
        due.stop,
        Some(Stop::QueueNotServed {
            step: "charge".to_owned(),
            queue: "orders".to_owned()
        })
    );
    // Its next step is placed by the worker that ends this attempt (assumed
    // new), on the new version's queue.
    let running = judge_on(
        &at("charge", StepStatus::InProgress),
        &moved,
        &["orders-v2"],
    );
    assert_eq!(running.verdict, VerdictKind::Advances);
    // A resume after a `Pause` verb places the next step where the run's own
    // plan does: on the old queue.
    let paused = judge_on(
        &at("reserve", StepStatus::Completed),
        &moved,
        &["orders-v2"],
    );
    assert_eq!(paused.verdict, VerdictKind::Waits);
    assert_eq!(paused.stop.as_ref().map(Stop::step), Some("charge"));

    // A worker whose queues leave out one the new version places a step on.
    let split = version(|p| {
        for e in p.iter_mut().filter(|e| e.name == "ship") {
            e.queue = "shipping".to_owned();
        }
    });
    let verdict = judge_on(&at("reserve", StepStatus::Scheduled), &split, &["orders"]);
    assert_eq!(
        verdict.stop,
        Some(Stop::QueueNotServed {
            step: "ship".to_owned(),
            queue: "shipping".to_owned()
        })
    );
    assert_eq!(
        judge_on(
            &at("reserve", StepStatus::Scheduled),
            &split,
            &["orders", "shipping"]
        )
        .verdict,
        VerdictKind::Advances
    );
}

#[test]
fn a_row_parked_for_a_signal_the_new_step_does_not_wait_for_waits() {
    let renamed_signal = version(|p| {
        for e in p.iter_mut().filter(|e| e.name == "await_payment") {
            e.wait_for = Some("payment.settled".to_owned());
        }
    });
    let parked = on_signal(at("await_payment", StepStatus::Waiting), "paid");
    let verdict = judge(&parked, &renamed_signal);
    assert_eq!(verdict.verdict, VerdictKind::Waits);
    assert_eq!(
        verdict.stop,
        Some(Stop::SignalNotAwaited {
            step: "await_payment".to_owned(),
            signal: "paid".to_owned()
        })
    );
    // Woken by `paid` but not yet claimed: the new gate looks for the new
    // signal and parks again.
    let woken = on_signal(at("await_payment", StepStatus::Scheduled), "paid");
    assert_eq!(judge(&woken, &renamed_signal).verdict, VerdictKind::Waits);
    // Not parked yet: the new gate waits for the new signal, as new senders send it.
    assert_eq!(
        judge(&at("charge", StepStatus::Scheduled), &renamed_signal).verdict,
        VerdictKind::Advances
    );

    // A step that no longer waits: a woken row runs its body; a parked one
    // waits for a signal nothing sends any more.
    let no_wait = version(|p| {
        for e in p.iter_mut().filter(|e| e.name == "await_payment") {
            e.wait_for = None;
        }
    });
    assert_eq!(judge(&woken, &no_wait).verdict, VerdictKind::Advances);
    assert_eq!(judge(&parked, &no_wait).verdict, VerdictKind::Waits);

    // A gravestone for the parked step: the signal it waits for is in no new
    // definition, so the row is never woken to be skipped.
    let buried = version(|p| gravestone(p, "await_payment"));
    assert_eq!(judge(&parked, &buried).verdict, VerdictKind::Waits);
}

#[test]
fn a_fan_out_waiting_on_its_batch_goes_on_with_the_new_version() {
    let waiting = at("notify", StepStatus::Waiting);
    let buried = version(|p| gravestone(p, "notify"));
    let verdict = judge(&waiting, &buried);
    assert_eq!(verdict.verdict, VerdictKind::SkipsGravestone);
    assert_eq!(verdict.skipped, names(&["notify"]));
    let removed = version(|p| remove(p, "notify"));
    assert_eq!(
        judge(&waiting, &removed).verdict,
        VerdictKind::PausesStepNotDefined,
        "woken when its children end, then claimed by no one"
    );
}

#[test]
fn a_run_stops_at_the_first_step_that_stops_it() {
    let new = version(|p| {
        gravestone(p, "charge");
        remove(p, "notify");
        insert_after(p, "ship", "review");
        for e in p.iter_mut().filter(|e| e.name == "ship") {
            e.queue = "shipping".to_owned();
        }
    });
    let verdict = judge(&at("reserve", StepStatus::Scheduled), &new);
    assert_eq!(verdict.verdict, VerdictKind::PausesStepNotDefined);
    assert_eq!(verdict.stop.as_ref().map(Stop::step), Some("notify"));
    assert_eq!(verdict.skipped, names(&["charge"]));
    assert_eq!(verdict.missed, names(&["review"]));
    assert_eq!(
        verdict.to_string(),
        "pauses with StepNotDefined at `notify`: the new version has no such step (a renamed method keeps it with `#[step(name = \"notify\")]`; `removed_step!(notify)` skips it); never runs `review`; skips `charge`"
    );
}

#[test]
fn a_run_without_a_step_list_follows_the_new_version_from_its_position() {
    let new = version(|p| {
        insert_after(p, "reserve", "early");
        insert_after(p, "ship", "late");
    });
    let mut legacy = at("charge", StepStatus::Scheduled);
    legacy.step_names = None;
    legacy.step_plan = None;
    // Without the registry's plan of its version, what it had is unknown.
    assert_eq!(judge(&legacy, &new).verdict, VerdictKind::Advances);
    legacy.version_plan = Some(version(|_| {}));
    let verdict = judge(&legacy, &new);
    assert_eq!(verdict.verdict, VerdictKind::MissesInserted);
    assert_eq!(
        verdict.missed,
        names(&["early"]),
        "`late` is after it: it runs"
    );

    let removed = version(|p| remove(p, "ship"));
    assert_eq!(
        judge(&legacy, &removed).verdict,
        VerdictKind::Advances,
        "a step the new version lacks is not in its way"
    );
    let buried = version(|p| gravestone(p, "ship"));
    assert_eq!(judge(&legacy, &buried).skipped, names(&["ship"]));
}

#[test]
fn verdicts_have_their_words_and_rank_from_harmless_to_worst() {
    let words: Vec<&str> = VerdictKind::ALL.iter().map(|v| v.as_str()).collect();
    assert_eq!(
        words,
        [
            "advances",
            "skips_gravestone",
            "misses_inserted",
            "pauses_step_not_defined",
            "waits"
        ]
    );
    for kind in VerdictKind::ALL {
        assert_eq!(
            serde_json::to_value(kind).ok(),
            Some(serde_json::Value::from(kind.as_str()))
        );
    }
    assert!(VerdictKind::ALL.windows(2).all(|w| w[0] < w[1]));
    let stop = Stop::QueueNotServed {
        step: "ship".to_owned(),
        queue: "shipping".to_owned(),
    };
    assert_eq!(
        serde_json::to_value(&stop).ok(),
        Some(serde_json::json!({"cause": "queue_not_served", "step": "ship", "queue": "shipping"}))
    );
}
