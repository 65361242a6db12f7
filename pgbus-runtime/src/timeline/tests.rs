use chrono::TimeDelta;

use super::*;
use crate::context::RunId;
use crate::engine::StepStatus;
use crate::view::RunSummary;

pub(crate) fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a valid time")
        + TimeDelta::seconds(seconds)
}

/// A row of step `s`, attempt 1, created at 0 and due at `due`.
pub(crate) fn row(id: i64, due: i64) -> StepView {
    StepView {
        id,
        step_name: "s".to_owned(),
        attempt: 1,
        status: StepStatus::Scheduled,
        outcome: None,
        queue: "default".to_owned(),
        priority: 0,
        scheduled_at: at(due),
        started_at: None,
        finished_at: None,
        stall_at: None,
        worker_id: None,
        output: None,
        error_class: None,
        error_message: None,
        error_causes: Vec::new(),
        waiting_for: None,
        waiting_since: None,
        held_by: None,
        throttled_by: None,
        created_at: at(0),
    }
}

fn ended(mut step: StepView, at_s: i64, outcome: StepOutcome) -> StepView {
    step.finished_at = Some(at(at_s));
    step.outcome = Some(outcome);
    step
}

fn event(id: i64, step_id: Option<i64>, name: &str, at_s: i64) -> EventView {
    EventView {
        id,
        step_id,
        step_name: step_id.map(|_| "s".to_owned()),
        attempt: step_id.map(|_| 1),
        event: name.to_owned(),
        actor: "w".to_owned(),
        reason: None,
        details: None,
        created_at: at(at_s),
    }
}

/// `(piece, from, to, open)` in seconds.
fn shape(segments: &[Segment]) -> Vec<(Piece, i64, i64, bool)> {
    segments
        .iter()
        .map(|s| {
            (
                s.piece,
                (s.from - at(0)).num_seconds(),
                (s.to - at(0)).num_seconds(),
                s.open,
            )
        })
        .collect()
}

#[test]
fn a_plain_attempt_waits_queues_and_runs() {
    let step = ended(row(1, 5), 10, StepOutcome::Completed);
    let events = [
        event(1, Some(1), "step_started", 7),
        event(2, Some(1), "step_completed", 10),
    ];
    let segments = attempt_segments(&step, &events, at(60));
    assert_eq!(
        shape(&segments),
        [
            (Piece::Waited, 0, 5, false),
            (Piece::Queued, 5, 7, false),
            (Piece::Ran, 7, 10, false)
        ]
    );
    assert_eq!(segments[2].outcome, Some(StepOutcome::Completed));
    assert_eq!(segments[0].outcome, None);
    assert_eq!(segments[2].duration(), TimeDelta::seconds(3));
}

#[test]
fn open_pieces_run_to_now_and_stop_there() {
    // Running: its ran piece is open, and ends at now.
    let events = [event(1, Some(1), "step_started", 7)];
    assert_eq!(
        shape(&attempt_segments(&row(1, 5), &events, at(12))),
        [
            (Piece::Waited, 0, 5, false),
            (Piece::Queued, 5, 7, false),
            (Piece::Ran, 7, 12, true)
        ]
    );
    // Never claimed: queued since due; before due, only waited, open.
    assert_eq!(
        shape(&attempt_segments(&row(1, 5), &[], at(8))),
        [(Piece::Waited, 0, 5, false), (Piece::Queued, 5, 8, true)]
    );
    assert_eq!(
        shape(&attempt_segments(&row(1, 5), &[], at(3))),
        [(Piece::Waited, 0, 3, true)]
    );
}

#[test]
fn pieces_of_no_length_are_dropped() {
    // Due at creation and started at once (an eager step): only ran.
    let step = ended(row(1, 0), 4, StepOutcome::Skipped);
    let events = [event(1, Some(1), "step_started", 0)];
    assert_eq!(
        shape(&attempt_segments(&step, &events, at(60))),
        [(Piece::Ran, 0, 4, false)]
    );
    // Started and ended in the same instant: nothing at all.
    let step = ended(row(1, 0), 0, StepOutcome::Completed);
    assert!(attempt_segments(&step, &events, at(60)).is_empty());
}

#[test]
fn a_parked_attempt_runs_waits_and_runs_again() {
    // Parked at 2, woken (due again) at 6, claimed at 7, ended at 9.
    let mut step = ended(row(1, 6), 9, StepOutcome::Completed);
    step.created_at = at(0);
    let events = [
        event(1, Some(1), "step_started", 1),
        event(2, Some(1), "step_waiting", 2),
        event(3, Some(1), "step_started", 7),
        event(4, Some(1), "step_completed", 9),
    ];
    let segments = attempt_segments(&step, &events, at(60));
    assert_eq!(
        shape(&segments),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Waiting, 2, 6, false),
            (Piece::Queued, 6, 7, false),
            (Piece::Ran, 7, 9, false)
        ]
    );
    assert_eq!(segments[1].outcome, None, "a park is not how it ended");
    assert_eq!(segments[4].outcome, Some(StepOutcome::Completed));
}

#[test]
fn a_wait_is_open_until_now_or_clipped_where_the_attempt_ended() {
    let events = [
        event(1, Some(1), "step_started", 1),
        event(2, Some(1), "step_waiting", 2),
    ];
    let waiting = row(1, 3_600);
    assert_eq!(
        shape(&attempt_segments(&waiting, &events, at(10))),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Waiting, 2, 10, true)
        ]
    );
    // Cancelled while it waited: the wait ends there.
    let cancelled = ended(row(1, 3_600), 5, StepOutcome::Cancelled);
    assert_eq!(
        shape(&attempt_segments(&cancelled, &events, at(10))),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Waiting, 2, 5, false)
        ]
    );
    // Cancelled before any claim: queued up to the end, not beyond.
    let unclaimed = ended(row(1, 0), 4, StepOutcome::Cancelled);
    assert_eq!(
        shape(&attempt_segments(&unclaimed, &[], at(10))),
        [(Piece::Queued, 0, 4, false)]
    );
}

#[test]
fn only_the_last_wake_up_is_known() {
    // Parked twice: the first wake-up's time is gone, so that wait runs up to
    // the second start; the last one is split at the row's due time.
    let step = ended(row(1, 8), 12, StepOutcome::Completed);
    let events = [
        event(1, Some(1), "step_started", 1),
        event(2, Some(1), "step_waiting", 2),
        event(3, Some(1), "step_started", 5),
        event(4, Some(1), "step_waiting", 6),
        event(5, Some(1), "step_started", 10),
    ];
    assert_eq!(
        shape(&attempt_segments(&step, &events, at(60))),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Waiting, 2, 5, false),
            (Piece::Ran, 5, 6, false),
            (Piece::Waiting, 6, 8, false),
            (Piece::Queued, 8, 10, false),
            (Piece::Ran, 10, 12, false)
        ]
    );
    // Events of other rows are not this row's.
    let other = [event(9, Some(2), "step_started", 3)];
    assert_eq!(
        shape(&attempt_segments(&row(1, 5), &other, at(6))),
        [(Piece::Waited, 0, 5, false), (Piece::Queued, 5, 6, true)]
    );
}

pub(crate) fn run(status: RunStatus, events: Vec<EventView>, updated: i64) -> RunView {
    RunView {
        run: RunSummary {
            id: RunId(1),
            workflow: "w".to_owned(),
            status,
            current_step: None,
            created_at: at(0),
            updated_at: at(updated),
            finished_at: None,
            unrunnable: None,
            parent_run: None,
            children: 0,
        },
        definition_digest: String::new(),
        step_plan: None,
        options_digest: String::new(),
        input: serde_json::Value::Null,
        idempotency_key: None,
        concurrency_key: None,
        deadline_at: None,
        error_class: None,
        error_message: None,
        paused_at: None,
        cancelled_at: None,
        steps: Vec::new(),
        events,
        parent_batch_id: None,
        parent_run_id: None,
        parent_step: None,
        signals: Vec::new(),
        batches: Vec::new(),
        counts: crate::RunCounts::default(),
        omitted: Vec::new(),
        unrunnable: None,
    }
}

#[test]
fn paused_periods_end_at_resume_cancel_or_finish_or_stay_open() {
    let view = run(
        RunStatus::Paused,
        vec![
            event(1, None, "paused", 3),
            event(2, None, "resumed", 5),
            event(3, Some(1), "step_started", 6),
            event(4, None, "paused", 8),
        ],
        8,
    );
    assert_eq!(
        shape(&paused_periods(&view, at(10))),
        [(Piece::Paused, 3, 5, false), (Piece::Paused, 8, 10, true)]
    );
    let cancelled = run(
        RunStatus::Cancelled,
        vec![event(1, None, "paused", 3), event(2, None, "cancelled", 9)],
        9,
    );
    assert_eq!(
        shape(&paused_periods(&cancelled, at(20))),
        [(Piece::Paused, 3, 9, false)]
    );
    // A second `paused` while paused (a step's pause after an operator's)
    // does not start a new period.
    let twice = run(
        RunStatus::Finished,
        vec![
            event(1, None, "paused", 3),
            event(2, None, "paused", 4),
            event(3, None, "finished", 7),
        ],
        7,
    );
    assert_eq!(
        shape(&paused_periods(&twice, at(20))),
        [(Piece::Paused, 3, 7, false)]
    );
    // Events and status disagree: closed at the run's last change.
    let odd = run(RunStatus::Ready, vec![event(1, None, "paused", 3)], 6);
    assert_eq!(
        shape(&paused_periods(&odd, at(20))),
        [(Piece::Paused, 3, 6, false)]
    );
}

#[test]
fn a_timeline_is_every_attempt_then_the_paused_periods() {
    let mut first = ended(row(1, 0), 2, StepOutcome::Completed);
    first.step_name = "a".to_owned();
    let mut second = row(2, 2);
    second.created_at = at(2);
    second.step_name = "b".to_owned();
    let mut view = run(
        RunStatus::Paused,
        vec![
            event(1, Some(1), "step_started", 1),
            event(2, Some(1), "step_completed", 2),
            event(3, None, "paused", 2),
        ],
        2,
    );
    view.steps = vec![first, second];
    let segments = timeline(&view, at(5));
    assert_eq!(
        shape(&segments),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Queued, 2, 5, true),
            (Piece::Paused, 2, 5, true)
        ]
    );
    assert_eq!(segments[2].step.as_deref(), Some("b"));
    assert_eq!(segments[3].step, None);
}

#[test]
fn a_woken_attempt_not_yet_claimed_again_is_queued_since_its_wake_up() {
    // Parked at 2, a signal made it due at 5; no worker has taken it by 10.
    let events = [
        event(1, Some(1), "step_started", 1),
        event(2, Some(1), "step_waiting", 2),
    ];
    assert_eq!(
        shape(&attempt_segments(&row(1, 5), &events, at(10))),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Waiting, 2, 5, false),
            (Piece::Queued, 5, 10, true)
        ]
    );
    // Woken at 5, then skipped at 7 before any worker took it.
    let skipped = ended(row(1, 5), 7, StepOutcome::Skipped);
    let segments = attempt_segments(&skipped, &events, at(10));
    assert_eq!(
        shape(&segments),
        [
            (Piece::Queued, 0, 1, false),
            (Piece::Ran, 1, 2, false),
            (Piece::Waiting, 2, 5, false),
            (Piece::Queued, 5, 7, false)
        ]
    );
    assert_eq!(segments[3].outcome, Some(StepOutcome::Skipped));
}

#[test]
fn the_last_piece_of_an_ended_attempt_says_how_it_ended() {
    // Cancelled while it waited: the waiting piece carries it.
    let events = [
        event(1, Some(1), "step_started", 1),
        event(2, Some(1), "step_waiting", 2),
    ];
    let cancelled = ended(row(1, 3_600), 5, StepOutcome::Cancelled);
    let segments = attempt_segments(&cancelled, &events, at(10));
    assert_eq!(segments.last().map(|s| s.piece), Some(Piece::Waiting));
    assert_eq!(
        segments.last().and_then(|s| s.outcome),
        Some(StepOutcome::Cancelled)
    );
    assert_eq!(segments[1].outcome, None, "the ran piece before the park");
    // Cancelled before any claim: the queued piece carries it.
    let unclaimed = ended(row(1, 0), 4, StepOutcome::Cancelled);
    let segments = attempt_segments(&unclaimed, &[], at(10));
    assert_eq!(segments[0].outcome, Some(StepOutcome::Cancelled));
    // Still running: no outcome anywhere.
    let running = [event(1, Some(1), "step_started", 1)];
    assert!(
        attempt_segments(&row(1, 0), &running, at(10))
            .iter()
            .all(|s| s.outcome.is_none())
    );
}

#[test]
fn a_now_before_the_last_park_clips_instead_of_failing() {
    // A caller's clock behind the database's: now (9) is before the park (10).
    let events = [
        event(1, Some(1), "step_started", 5),
        event(2, Some(1), "step_waiting", 10),
    ];
    assert_eq!(
        shape(&attempt_segments(&row(1, 3_600), &events, at(9))),
        [(Piece::Queued, 0, 5, false), (Piece::Ran, 5, 9, true)]
    );
}

#[test]
fn definition_changes_are_the_runs_deploys_oldest_first() {
    let change = |id: i64, at_s: i64, old: &str, new: &str| EventView {
        details: Some(serde_json::json!({ "old_digest": old, "new_digest": new })),
        ..event(id, Some(1), "definition_changed", at_s)
    };
    let mut bare = event(4, Some(1), "definition_changed", 3);
    bare.details = None;
    let view = run(
        RunStatus::Ready,
        vec![
            change(3, 20, "b", "a"),
            event(1, Some(1), "step_started", 5),
            change(2, 10, "a", "b"),
            bare,
        ],
        20,
    );
    let changes = definition_changes(&view);
    assert_eq!(
        changes
            .iter()
            .map(|c| (c.at, c.old_digest.as_str(), c.new_digest.as_str()))
            .collect::<Vec<_>>(),
        [(at(10), "a", "b"), (at(20), "b", "a")],
        "sorted by time, other events and a change without digests left out"
    );
    assert_eq!(changes[0].step.as_deref(), Some("s"));
    assert_eq!(changes[0].attempt, Some(1));
}
