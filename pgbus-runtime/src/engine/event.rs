//! The kinds of event a run's audit trail holds, each with its one stored
//! name: the engine plans them, both stores write them, the views and the
//! timeline read them. A name is written in the `events.event` column as
//! [`EventKind::as_str`] gives it; the SQL statements that write events
//! themselves (a claim's `step_started`, a signal's `signal_received`, ...)
//! use the same words, which a test (`pg::vocabulary`) checks against this
//! list.
//!
//! The views keep the stored name as a `String`, so a run written by a later
//! version, with kinds this one does not know, still reads; compare with
//! `event.event == EventKind::Paused`.

use std::fmt;

/// One kind of event (DESIGN §5's names, with `step_waiting`,
/// `signal_consumed` and `batch_resolved` for parks, gates and fan-out, and
/// `definition_changed` for deploys, `deadline_exceeded` for run deadlines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EventKind {
    /// A run was started (by a client, or as a fan-out child).
    Started,
    /// A worker claimed an attempt and began it.
    StepStarted,
    /// An attempt ended with its step complete.
    StepCompleted,
    /// An attempt ended with an error.
    StepFailed,
    /// A step was skipped (by its guard, its policy or an operator).
    StepSkipped,
    /// An attempt ended with another attempt scheduled.
    StepReattempted,
    /// An attempt parked, waiting for a signal or its batch.
    StepWaiting,
    /// The run was paused.
    Paused,
    /// The run was resumed.
    Resumed,
    /// The run was cancelled.
    Cancelled,
    /// The run finished.
    Finished,
    /// An attempt was found stalled by a sweep.
    StallDetected,
    /// A completion that lost its claim was ignored.
    LateCompletionIgnored,
    /// A signal was stored for the run.
    SignalReceived,
    /// A waiting attempt took a signal.
    SignalConsumed,
    /// A waiting attempt's `wait_timeout` passed.
    WaitTimedOut,
    /// A fan-out batch was resolved.
    BatchResolved,
    /// A worker whose definition of the workflow has another digest than the
    /// run's claimed a step of it; details `{"old_digest", "new_digest"}`, and
    /// the run takes the new digest, so each change is recorded once.
    DefinitionChanged,
    /// The run's deadline passed before it ended; details `{"deadline_at"}`.
    /// The sweep writes it (actor `deadline`) just before the cancel or
    /// pause the workflow's `on_deadline` names (see
    /// [`plan_deadline`](super::plan_deadline)).
    DeadlineExceeded,
}

impl EventKind {
    /// Every kind, in declaration order.
    pub const ALL: [Self; 19] = [
        Self::Started,
        Self::StepStarted,
        Self::StepCompleted,
        Self::StepFailed,
        Self::StepSkipped,
        Self::StepReattempted,
        Self::StepWaiting,
        Self::Paused,
        Self::Resumed,
        Self::Cancelled,
        Self::Finished,
        Self::StallDetected,
        Self::LateCompletionIgnored,
        Self::SignalReceived,
        Self::SignalConsumed,
        Self::WaitTimedOut,
        Self::BatchResolved,
        Self::DefinitionChanged,
        Self::DeadlineExceeded,
    ];

    /// The stored name (`step_started`).
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::StepStarted => "step_started",
            Self::StepCompleted => "step_completed",
            Self::StepFailed => "step_failed",
            Self::StepSkipped => "step_skipped",
            Self::StepReattempted => "step_reattempted",
            Self::StepWaiting => "step_waiting",
            Self::Paused => "paused",
            Self::Resumed => "resumed",
            Self::Cancelled => "cancelled",
            Self::Finished => "finished",
            Self::StallDetected => "stall_detected",
            Self::LateCompletionIgnored => "late_completion_ignored",
            Self::SignalReceived => "signal_received",
            Self::SignalConsumed => "signal_consumed",
            Self::WaitTimedOut => "wait_timed_out",
            Self::BatchResolved => "batch_resolved",
            Self::DefinitionChanged => "definition_changed",
            Self::DeadlineExceeded => "deadline_exceeded",
        }
    }

    /// The kind a stored name names, if this version knows it.
    #[must_use]
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.as_str() == name)
    }

    /// Whether this kind opens or closes a paused period of the timeline.
    #[must_use]
    pub const fn bounds_a_pause(self) -> bool {
        matches!(
            self,
            Self::Paused | Self::Resumed | Self::Cancelled | Self::Finished
        )
    }

    /// Whether this kind marks a piece of an attempt's timeline (a start or
    /// a park).
    #[must_use]
    pub const fn marks_an_attempt(self) -> bool {
        matches!(self, Self::StepStarted | Self::StepWaiting)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<EventKind> for String {
    fn eq(&self, kind: &EventKind) -> bool {
        self == kind.as_str()
    }
}

impl PartialEq<EventKind> for str {
    fn eq(&self, kind: &EventKind) -> bool {
        self == kind.as_str()
    }
}

#[cfg(test)]
mod tests {
    use super::EventKind;

    #[test]
    fn each_kind_has_one_name_and_reads_back() {
        let names: std::collections::HashSet<&str> =
            EventKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(names.len(), EventKind::ALL.len());
        for kind in EventKind::ALL {
            assert_eq!(EventKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).ok(),
                Some(serde_json::json!(kind.as_str()))
            );
        }
        assert_eq!(EventKind::parse("step_exploded"), None);
    }
}
