//! The status and outcome strings stored in Postgres, as enums: a run's, a
//! step attempt's, an attempt's outcome and a fan_out batch's.

use std::fmt;
use std::str::FromStr;

macro_rules! stored_enum {
    ($(#[$meta:meta])* pub enum $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stored string.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownStatus;
            fn from_str(text: &str) -> Result<Self, Self::Err> {
                match text {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(UnknownStatus(text.to_owned())),
                }
            }
        }
    };
}

/// A status string the database holds that this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown status `{0}` in the database")]
pub struct UnknownStatus(pub String);

stored_enum! {
    /// A run's status. A run whose current step waits on a signal or a batch
    /// stays `ready`; the step row says what it waits for.
    pub enum RunStatus {
        /// Its current step is scheduled or waiting.
        Ready => "ready",
        /// A worker runs its current step.
        Performing => "performing",
        /// Stopped until an operator resumes, skips or cancels it.
        Paused => "paused",
        /// Done.
        Finished => "finished",
        /// Stopped for good.
        Cancelled => "cancelled",
    }
}

stored_enum! {
    /// A step attempt's status.
    pub enum StepStatus {
        /// Due at `scheduled_at`.
        Scheduled => "scheduled",
        /// Claimed by a worker.
        InProgress => "in_progress",
        /// Parked on a signal or a batch.
        Waiting => "waiting",
        /// Ended without error.
        Completed => "completed",
        /// Skipped by a verb, a guard or a gravestone.
        Skipped => "skipped",
        /// Ended with an error.
        Failed => "failed",
        /// Cancelled with its run.
        Cancelled => "cancelled",
    }
}

stored_enum! {
    /// What followed a step attempt.
    pub enum StepOutcome {
        /// The run advanced.
        Completed => "completed",
        /// The run finished early.
        FinishedEarly => "finished_early",
        /// The run paused.
        Paused => "paused",
        /// The step was skipped and the run advanced.
        Skipped => "skipped",
        /// The run was cancelled.
        Cancelled => "cancelled",
        /// A new attempt of the step was scheduled.
        Reattempted => "reattempted",
    }
}

stored_enum! {
    /// A fan_out batch's status: `open` until its last child ends (or its
    /// parent is cancelled), then resolved for good.
    pub enum BatchStatus {
        /// Some children are still running.
        Open => "open",
        /// Every child finished.
        Succeeded => "succeeded",
        /// A child was cancelled (or is missing), or the parent was cancelled.
        Failed => "failed",
    }
}

impl RunStatus {
    /// Finished or cancelled: nothing more happens to the run.
    #[must_use]
    pub const fn is_terminal(self) -> bool {
        matches!(self, Self::Finished | Self::Cancelled)
    }
}

#[cfg(test)]
mod tests {
    use super::{BatchStatus, RunStatus, StepOutcome, StepStatus, UnknownStatus};

    /// Each value has one stored string, read back by `FromStr` and written
    /// the same by serde; a string this version does not know is refused.
    fn one_form<T>(all: &[T], texts: &[&str])
    where
        T: Copy + std::fmt::Debug + PartialEq + std::fmt::Display + serde::Serialize,
        T: std::str::FromStr<Err = UnknownStatus>,
    {
        let shown: Vec<String> = all.iter().map(ToString::to_string).collect();
        assert_eq!(shown, texts);
        for (value, text) in all.iter().zip(texts) {
            assert_eq!(text.parse::<T>(), Ok(*value));
            assert_eq!(
                serde_json::to_value(value).ok(),
                Some(serde_json::json!(text))
            );
        }
        assert_eq!(
            "exploded".parse::<T>(),
            Err(UnknownStatus("exploded".to_owned()))
        );
    }

    #[test]
    fn each_value_has_one_stored_string() {
        one_form(
            RunStatus::ALL,
            &["ready", "performing", "paused", "finished", "cancelled"],
        );
        one_form(
            StepStatus::ALL,
            &[
                "scheduled",
                "in_progress",
                "waiting",
                "completed",
                "skipped",
                "failed",
                "cancelled",
            ],
        );
        one_form(
            StepOutcome::ALL,
            &[
                "completed",
                "finished_early",
                "paused",
                "skipped",
                "cancelled",
                "reattempted",
            ],
        );
        // The `batches.status` CHECK of migration 0001.
        one_form(BatchStatus::ALL, &["open", "succeeded", "failed"]);
    }
}
