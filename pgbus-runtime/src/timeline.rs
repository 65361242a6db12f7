//! A run's timeline: what each step attempt spent its time on, and the periods
//! the run was paused. Pure: computed from a [`RunView`] and a time for "now",
//! so the command-line tool, a dashboard and tests draw the same picture.
//!
//! For each attempt (one step row), from the row and its `step_started` and
//! `step_waiting` events:
//!
//! - **waited**: from the row's creation until it was due (`created_at` to
//!   `scheduled_at`): a step's `wait`, a reattempt's delay;
//! - **queued**: from due until a worker started it;
//! - **ran**: from a start until the attempt ended, parked, or until now while
//!   it runs;
//! - **waiting**: from a park until the row was woken (a signal, its wait
//!   timeout, its batch), or until now while it waits.
//!
//! An attempt parks and is claimed again with the same row, so it can have
//! several ran and waiting pieces. The row keeps its latest due time only:
//! for an attempt that parked, the last wait is split at the row's due time
//! (its latest wake-up, or its wait timeout): waiting, then queued, whether a
//! worker has claimed it since or not; earlier waits count as waiting up to
//! the next start; and its first due time is gone, so the time from creation
//! to its first start counts as queued. Every piece is clipped to the
//! attempt's `finished_at` and to now; pieces of no length are dropped; the
//! last piece of an attempt that ended carries its outcome.
//!
//! **paused**: from each `paused` event of the run until the next `resumed`,
//! `cancelled` or `finished` one, or until now while the run is still paused.
//!
//! Beside the pieces, a timeline's marks: each [`DefinitionChange`], the
//! moment a worker with another definition of the workflow took the run over
//! (a deploy, as the run saw it).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::engine::{EventKind, RunStatus, StepOutcome};
use crate::view::{EventView, RunView, StepView};

/// What a piece of time was spent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Piece {
    /// Created, not yet due.
    Waited,
    /// Due, not yet started.
    Queued,
    /// A worker ran the body.
    Ran,
    /// Parked for a signal or a fan_out batch.
    Waiting,
    /// The run was paused.
    Paused,
}

impl Piece {
    /// The lowercase name used in listings and charts.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Waited => "waited",
            Self::Queued => "queued",
            Self::Ran => "ran",
            Self::Waiting => "waiting",
            Self::Paused => "paused",
        }
    }
}

/// One piece of a timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Segment {
    /// What the time was spent on.
    pub piece: Piece,
    /// The step row it belongs to (`None` for a paused period).
    pub step_id: Option<i64>,
    /// The step's name (`None` for a paused period).
    pub step: Option<String>,
    /// The attempt number (`None` for a paused period).
    pub attempt: Option<i32>,
    /// Start of the piece.
    pub from: DateTime<Utc>,
    /// End of the piece (now, for an open one).
    pub to: DateTime<Utc>,
    /// Still going on at `now`.
    pub open: bool,
    /// For the last piece of an attempt that ended (a `ran` piece, or the
    /// `waiting` or `queued` piece of one cancelled or skipped before it ran
    /// again): how it ended.
    pub outcome: Option<StepOutcome>,
}

impl Segment {
    /// `to - from`.
    #[must_use]
    pub fn duration(&self) -> chrono::Duration {
        self.to - self.from
    }
}

/// The timeline of `view` at `now`: each attempt's pieces in row order, then
/// the run's paused periods.
#[must_use]
///
/// Linear in the run's attempts and events: the events are indexed by
/// attempt once, so a run of 20,000 attempts costs no more per attempt than
/// one of two.
pub fn timeline(view: &RunView, now: DateTime<Utc>) -> Vec<Segment> {
    let marks = Marks::of(&view.events, None);
    let mut segments = Vec::new();
    for step in &view.steps {
        segments.extend(segments_of(step, marks.of_step(step.id), now));
    }
    segments.extend(paused_periods(view, now));
    segments
}

/// The start and park times of each attempt, sorted, by step row id.
struct Marks(HashMap<i64, AttemptMarks>);

#[derive(Default)]
struct AttemptMarks {
    starts: Vec<DateTime<Utc>>,
    parks: Vec<DateTime<Utc>>,
}

impl Marks {
    /// One pass over `events` (only those of step row `only`, when given).
    fn of(events: &[EventView], only: Option<i64>) -> Self {
        let mut marks: HashMap<i64, AttemptMarks> = HashMap::new();
        for event in events {
            let Some(step_id) = event.step_id else {
                continue;
            };
            if only.is_some_and(|only| only != step_id) {
                continue;
            }
            let list = match EventKind::parse(&event.event) {
                Some(EventKind::StepStarted) => &mut marks.entry(step_id).or_default().starts,
                Some(EventKind::StepWaiting) => &mut marks.entry(step_id).or_default().parks,
                _ => continue,
            };
            list.push(event.created_at);
        }
        for attempt in marks.values_mut() {
            attempt.starts.sort_unstable();
            attempt.parks.sort_unstable();
        }
        Self(marks)
    }

    fn of_step(&self, step_id: i64) -> &AttemptMarks {
        static NONE: AttemptMarks = AttemptMarks {
            starts: Vec::new(),
            parks: Vec::new(),
        };
        self.0.get(&step_id).unwrap_or(&NONE)
    }
}

/// The pieces of one attempt (see the module docs), from `events` of its run.
#[must_use]
pub fn attempt_segments(step: &StepView, events: &[EventView], now: DateTime<Utc>) -> Vec<Segment> {
    let marks = Marks::of(events, Some(step.id));
    segments_of(step, marks.of_step(step.id), now)
}

/// The pieces of one attempt from its start and park times.
fn segments_of(step: &StepView, marks: &AttemptMarks, now: DateTime<Utc>) -> Vec<Segment> {
    let (starts, parks) = (&marks.starts, &marks.parks);
    // Nothing after the attempt ended, nothing after now.
    let end = step.finished_at.map_or(now, |f| f.min(now));
    let mut pieces = Pieces {
        step,
        end,
        closed: step.finished_at.is_some_and(|f| f <= now),
        out: Vec::new(),
    };

    if starts.is_empty() {
        pieces.push(Piece::Waited, step.created_at, step.scheduled_at, None);
        pieces.push(Piece::Queued, step.scheduled_at, end, None);
        return pieces.finish();
    }
    let first_due = if parks.is_empty() {
        pieces.push(Piece::Waited, step.created_at, step.scheduled_at, None);
        step.scheduled_at
    } else {
        step.created_at
    };
    let mut queued_from = first_due;
    // Both lists are sorted: one cursor walks the parks as the starts go on,
    // so an attempt that parked ten thousand times costs ten thousand steps.
    let mut next_park = 0;
    for (i, &start) in starts.iter().enumerate() {
        let next_start = starts.get(i + 1).copied();
        pieces.push(Piece::Queued, queued_from, start, None);
        // The park of this start: the first one after it, before the next.
        while parks.get(next_park).is_some_and(|&p| p < start) {
            next_park += 1;
        }
        let park = parks
            .get(next_park)
            .copied()
            .filter(|&p| next_start.is_none_or(|n| p <= n));
        match park {
            None => {
                pieces.push(Piece::Ran, start, next_start.unwrap_or(end), None);
                queued_from = next_start.unwrap_or(end);
            }
            Some(parked) => {
                pieces.push(Piece::Ran, start, parked, None);
                match next_start {
                    // The wake-up before the last start is the row's due time.
                    Some(next) if i + 2 == starts.len() => {
                        let woken = step.scheduled_at.max(parked).min(next);
                        pieces.push(Piece::Waiting, parked, woken, None);
                        queued_from = woken;
                    }
                    Some(next) => {
                        pieces.push(Piece::Waiting, parked, next, None);
                        queued_from = next;
                    }
                    // Still parked, or woken and not yet claimed again: the
                    // row's due time is its wake-up (or its wait timeout).
                    None => {
                        // Not `clamp`: `end` (now, or the attempt's end) can
                        // lie before the park when clocks disagree.
                        let woken = step.scheduled_at.max(parked).min(end);
                        pieces.push(Piece::Waiting, parked, woken, None);
                        pieces.push(Piece::Queued, woken, end, None);
                    }
                }
            }
        }
    }
    pieces.finish()
}

/// An attempt's pieces as they are made: clipped to its end, empty ones
/// dropped.
struct Pieces<'a> {
    step: &'a StepView,
    end: DateTime<Utc>,
    /// The attempt ended (by `now`): no piece of it is open.
    closed: bool,
    out: Vec<Segment>,
}

impl Pieces<'_> {
    /// The pieces, the last one of an ended attempt carrying its outcome.
    fn finish(mut self) -> Vec<Segment> {
        if self.closed
            && let Some(last) = self.out.last_mut()
        {
            last.outcome = self.step.outcome;
        }
        self.out
    }

    fn push(
        &mut self,
        piece: Piece,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        outcome: Option<StepOutcome>,
    ) {
        let to = to.min(self.end);
        if to <= from {
            return;
        }
        self.out.push(Segment {
            piece,
            step_id: Some(self.step.id),
            step: Some(self.step.step_name.clone()),
            attempt: Some(self.step.attempt),
            from,
            to,
            open: !self.closed && to == self.end,
            outcome,
        });
    }
}

/// The run's paused periods: each `paused` event to the next `resumed`,
/// `cancelled` or `finished` event, or to now while the run is paused (to the
/// run's last change, should its events and status disagree).
#[must_use]
pub fn paused_periods(view: &RunView, now: DateTime<Utc>) -> Vec<Segment> {
    let mut periods = Vec::new();
    let mut events: Vec<&EventView> = view.events.iter().collect();
    events.sort_by_key(|e| (e.created_at, e.id));
    let mut paused_at: Option<DateTime<Utc>> = None;
    let mut close = |from: DateTime<Utc>, to: DateTime<Utc>, open: bool| {
        let to = to.min(now);
        if to > from {
            periods.push(Segment {
                piece: Piece::Paused,
                step_id: None,
                step: None,
                attempt: None,
                from,
                to,
                open,
                outcome: None,
            });
        }
    };
    for event in events {
        match EventKind::parse(&event.event) {
            Some(EventKind::Paused) if paused_at.is_none() => paused_at = Some(event.created_at),
            Some(EventKind::Resumed | EventKind::Cancelled | EventKind::Finished) => {
                if let Some(from) = paused_at.take() {
                    close(from, event.created_at, false);
                }
            }
            _ => {}
        }
    }
    if let Some(from) = paused_at {
        if view.run.status == RunStatus::Paused {
            close(from, now, true);
        } else {
            close(from, view.run.updated_at, false);
        }
    }
    periods
}

/// A mark on a run's timeline: a worker whose definition of the workflow has
/// another digest claimed the run's step, from a `definition_changed` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DefinitionChange {
    /// When the claim took the run over.
    pub at: DateTime<Utc>,
    /// The step claimed.
    pub step: Option<String>,
    /// Its attempt number.
    pub attempt: Option<i32>,
    /// The digest the run had.
    pub old_digest: String,
    /// The claiming worker's digest, which the run has since.
    pub new_digest: String,
}

/// The run's definition changes, oldest first: one per `definition_changed`
/// event of `view` whose details name both digests (an event without them
/// is left out). Only the events `view` holds count (a bounded read may have
/// cut older ones).
#[must_use]
pub fn definition_changes(view: &RunView) -> Vec<DefinitionChange> {
    let mut events: Vec<&EventView> = view
        .events
        .iter()
        .filter(|e| EventKind::parse(&e.event) == Some(EventKind::DefinitionChanged))
        .collect();
    events.sort_by_key(|e| (e.created_at, e.id));
    events
        .into_iter()
        .filter_map(|event| {
            let details = event.details.as_ref()?;
            let digest = |key: &str| details.get(key)?.as_str().map(str::to_owned);
            Some(DefinitionChange {
                at: event.created_at,
                step: event.step_name.clone(),
                attempt: event.attempt,
                old_digest: digest("old_digest")?,
                new_digest: digest("new_digest")?,
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests;
