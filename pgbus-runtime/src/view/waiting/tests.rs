use chrono::TimeDelta;

use super::*;
use crate::engine::{BatchStatus, RunStatus, StepStatus};
use crate::timeline::tests::{at, row, run};
use crate::view::{BatchView, Missing};

/// A `ready` run with `rows`.
fn ready(rows: Vec<crate::StepView>) -> RunView {
    let mut view = run(RunStatus::Ready, Vec::new(), 0);
    view.steps = rows;
    view
}

fn parked(id: i64, signal: Option<&str>, since: i64, due: DateTime<Utc>) -> crate::StepView {
    let mut step = row(id, 0);
    step.status = StepStatus::Waiting;
    step.waiting_for = signal.map(str::to_owned);
    step.waiting_since = Some(at(since));
    step.scheduled_at = due;
    step
}

#[test]
fn a_parked_row_waits_for_its_signal_with_or_without_a_timeout() {
    let view = ready(vec![parked(1, Some("paid"), 10, at(10 + 3_600))]);
    let waiting = view.waiting_for(at(20)).expect("a wait");
    assert_eq!(
        waiting,
        WaitingFor::Signal {
            step_id: 1,
            step_name: "s".into(),
            name: "paid".into(),
            since: at(10),
            timeout_at: Some(at(3_610)),
        }
    );
    assert_eq!(
        waiting.to_string(),
        "step `s` waits for signal `paid`, since 2030-03-17 17:46:50.000 UTC; its wait times \
         out at 2030-03-17 18:46:50.000 UTC"
    );
    // Without a timeout the row is due 36500 days after it last parked.
    let forever = TimeDelta::milliseconds(i64::try_from(crate::MAX_DURATION_MS).unwrap());
    let view = ready(vec![parked(1, Some("paid"), 10, at(500) + forever)]);
    let waiting = view.waiting_for(at(600)).expect("a wait");
    assert!(
        matches!(
            waiting,
            WaitingFor::Signal {
                timeout_at: None,
                ..
            }
        ),
        "{waiting:?}"
    );
    assert!(waiting.to_string().ends_with("; no timeout"), "{waiting}");
}

#[test]
fn a_parked_fan_out_waits_for_its_batch() {
    let mut view = ready(vec![parked(7, None, 5, at(9_999_999))]);
    let batch = |id, parent_step_id, finished| BatchView {
        id,
        parent_step_id,
        total: 10,
        finished,
        cancelled: 1,
        status: BatchStatus::Open,
        created_at: at(5),
        resolved_at: None,
        unrunnable_child: None,
    };
    view.batches = vec![batch(3, 7, 4), batch(4, 99, 0)];
    let waiting = view.waiting_for(at(6)).expect("a wait");
    assert_eq!(
        waiting,
        WaitingFor::Batch {
            step_id: 7,
            step_name: "s".into(),
            batch_id: Some(3),
            finished: 4,
            cancelled: 1,
            total: 10,
            since: Some(at(5)),
        }
    );
    assert_eq!(
        waiting.to_string(),
        "step `s` waits for its batch 3: 4 of 10 children finished, 1 cancelled"
    );
    // Its batch beyond the read's last batches: still a batch wait.
    view.batches.clear();
    assert_eq!(
        view.waiting_for(at(6)).expect("a wait").to_string(),
        "step `s` waits for its batch of children"
    );
}

#[test]
fn a_row_not_due_waits_for_its_time_and_a_reattempt_for_its_backoff() {
    let view = ready(vec![row(1, 60)]);
    assert_eq!(
        view.waiting_for(at(0)),
        Some(WaitingFor::Time {
            step_id: 1,
            step_name: "s".into(),
            until: at(60),
        })
    );
    assert_eq!(view.waiting_for(at(60)), None, "due: a worker claims it");

    let mut failed = row(1, 0);
    failed.status = StepStatus::Failed;
    let mut again = row(2, 90);
    again.attempt = 2;
    let view = ready(vec![failed, again]);
    let waiting = view.waiting_for(at(30)).expect("a wait");
    assert_eq!(
        waiting,
        WaitingFor::Backoff {
            step_id: 2,
            step_name: "s".into(),
            attempt: 2,
            until: at(90),
        }
    );
    assert!(
        waiting
            .to_string()
            .starts_with("attempt 2 of step `s` waits out its backoff until "),
        "{waiting}"
    );
}

#[test]
fn a_missing_worker_and_a_limit_come_before_the_row_and_other_statuses_wait_for_none() {
    let mut view = ready(vec![row(1, 0)]);
    view.steps[0].held_by = Some("queue:mail".into());
    assert!(matches!(
        view.waiting_for(at(1)),
        Some(WaitingFor::Limit(HeldBack::Concurrency { .. }))
    ));
    view.unrunnable = Some(Unrunnable::new(
        1,
        "w",
        "s",
        "default",
        Missing::Workflow,
        at(0),
    ));
    let waiting = view.waiting_for(at(1)).expect("a wait");
    assert!(matches!(waiting, WaitingFor::Worker(_)), "{waiting:?}");
    assert_eq!(
        waiting.to_string(),
        "no live worker registered workflow `w`"
    );

    for status in [
        RunStatus::Performing,
        RunStatus::Paused,
        RunStatus::Finished,
        RunStatus::Cancelled,
    ] {
        view.run.status = status;
        assert_eq!(view.waiting_for(at(1)), None, "{status}");
    }
    assert_eq!(ready(Vec::new()).waiting_for(at(1)), None, "no rows");
}
