//! The verb an ended attempt applies: a [`Flow`] made storable.

use pgbus_core::MAX_DURATION_MS;

use crate::definition::FailureAction;
use crate::error::cap_message;
use crate::flow::Flow;

/// What to do next, once a step attempt has ended: a [`Flow`] verb with its wait
/// normalized to milliseconds (at most [`MAX_DURATION_MS`], the longest duration
/// the option grammar accepts, so a due time always fits a `timestamptz`) and its
/// reason storable (NUL characters become `U+FFFD`, at most 10,000 characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verb {
    /// Advance to the next step, or finish.
    Complete,
    /// Finish the run now.
    Finish,
    /// Pause the run.
    Pause {
        /// Why.
        reason: String,
    },
    /// Cancel the run.
    Cancel {
        /// Why.
        reason: String,
    },
    /// Skip the step and advance.
    Skip {
        /// Why.
        reason: String,
    },
    /// Run the step again after `wait_ms` milliseconds.
    Reattempt {
        /// Delay before the new attempt, in milliseconds.
        wait_ms: u64,
    },
}

impl Verb {
    /// The verb's word, as a log field carries it: `complete`, `finish`,
    /// `pause`, `cancel`, `skip` or `reattempt`.
    #[must_use]
    pub const fn name(&self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::Finish => "finish",
            Self::Pause { .. } => "pause",
            Self::Cancel { .. } => "cancel",
            Self::Skip { .. } => "skip",
            Self::Reattempt { .. } => "reattempt",
        }
    }

    /// The verb as `events.details.verb` and [`ErrorReport::verb`] store it:
    /// its variant and fields as Rust's `Debug` writes them, `Complete`,
    /// `Pause { reason: "out of stock" }` or `Reattempt { wait_ms: 500 }`
    /// (a reason escaped and quoted as `{:?}` does). Spelt out here rather
    /// than derived, so the text stored since the first release cannot
    /// change with the type (see `docs/decisions.md`).
    ///
    /// [`ErrorReport::verb`]: crate::ErrorReport::verb
    #[must_use]
    pub fn stored(&self) -> String {
        match self {
            Self::Complete => "Complete".to_owned(),
            Self::Finish => "Finish".to_owned(),
            Self::Pause { reason } => format!("Pause {{ reason: {reason:?} }}"),
            Self::Cancel { reason } => format!("Cancel {{ reason: {reason:?} }}"),
            Self::Skip { reason } => format!("Skip {{ reason: {reason:?} }}"),
            Self::Reattempt { wait_ms } => format!("Reattempt {{ wait_ms: {wait_ms} }}"),
        }
    }
}

impl From<Flow> for Verb {
    fn from(flow: Flow) -> Self {
        match flow {
            Flow::Complete => Self::Complete,
            Flow::Finish => Self::Finish,
            Flow::Pause { reason } => Self::Pause {
                reason: cap_message(&reason),
            },
            Flow::Cancel { reason } => Self::Cancel {
                reason: cap_message(&reason),
            },
            Flow::Skip { reason } => Self::Skip {
                reason: cap_message(&reason),
            },
            Flow::Reattempt { wait } => Self::Reattempt {
                wait_ms: u64::try_from(wait.as_millis())
                    .unwrap_or(u64::MAX)
                    .min(MAX_DURATION_MS),
            },
        }
    }
}

impl Verb {
    pub(crate) fn from_failure_action(action: FailureAction, reason: String) -> Self {
        match action {
            FailureAction::Pause => Self::Pause { reason },
            FailureAction::Cancel => Self::Cancel { reason },
            FailureAction::Skip => Self::Skip { reason },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Verb;

    /// The stored text of each verb, pinned: rows and error reports written
    /// so far hold exactly these, and it is what `{:?}` gives today.
    #[test]
    fn each_verb_has_its_stored_text() {
        let reason = "out of \"stock\"\n\u{0}".to_owned();
        let cases = [
            (Verb::Complete, "Complete"),
            (Verb::Finish, "Finish"),
            (
                Verb::Pause {
                    reason: reason.clone(),
                },
                r#"Pause { reason: "out of \"stock\"\n\0" }"#,
            ),
            (
                Verb::Cancel {
                    reason: reason.clone(),
                },
                r#"Cancel { reason: "out of \"stock\"\n\0" }"#,
            ),
            (
                Verb::Skip { reason },
                r#"Skip { reason: "out of \"stock\"\n\0" }"#,
            ),
            (Verb::Reattempt { wait_ms: 0 }, "Reattempt { wait_ms: 0 }"),
            (
                Verb::Reattempt { wait_ms: 1_500 },
                "Reattempt { wait_ms: 1500 }",
            ),
        ];
        for (verb, text) in cases {
            assert_eq!(verb.stored(), text);
            assert_eq!(
                verb.stored(),
                format!("{verb:?}"),
                "the Debug text it keeps"
            );
        }
    }
}
