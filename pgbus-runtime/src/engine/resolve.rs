//! Resolving a step's error against the exception policies.

use super::Verb;
use crate::definition::{Entry, ExceptionPolicy, PolicyAction, Report, WorkflowDefinition};
use crate::error::StepError;

/// What the exception policies decided for an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Apply this verb.
    Verb {
        /// The verb.
        verb: Verb,
        /// Whether the error is reported.
        report: bool,
    },
    /// Ask this handler; its answer is the verb (no answer pauses).
    Handler {
        /// The handler.
        handler: crate::definition::HandlerRef,
        /// Whether the error is reported.
        report: bool,
    },
}

/// Resolves an error against the policies: the step's in order, then the
/// workflow's that name types, then its blanket ones, then the default pause.
/// `reattempts` is how many reattempts of this step ran in a row before this
/// attempt; a reattempt policy whose `max_reattempts` is used up applies its
/// `terminal_action` instead.
#[must_use]
pub fn resolve_error(
    definition: &WorkflowDefinition,
    entry: Option<&Entry>,
    error: &StepError,
    reattempts: i32,
) -> Resolution {
    let step_policies = entry.map_or(&[][..], |e| e.options.on_exception);
    let policy = step_policies
        .iter()
        .find(|p| p.matches(error))
        .or_else(|| {
            definition
                .on_exception
                .iter()
                .filter(|p| p.names_types())
                .find(|p| p.matches(error))
        })
        .or_else(|| definition.on_exception.iter().find(|p| !p.names_types()));
    let Some(policy) = policy else {
        return Resolution::Verb {
            verb: Verb::Pause {
                reason: format!("step failed: {}", error.message()),
            },
            report: true,
        };
    };
    apply_policy(policy, error, reattempts)
}

fn apply_policy(policy: &ExceptionPolicy, error: &StepError, reattempts: i32) -> Resolution {
    let reason = || format!("step failed: {}", error.message());
    let report_terminal = !matches!(policy.report, Report::Never);
    match policy.action {
        PolicyAction::Pause => Resolution::Verb {
            verb: Verb::Pause { reason: reason() },
            report: report_terminal,
        },
        PolicyAction::Cancel => Resolution::Verb {
            verb: Verb::Cancel { reason: reason() },
            report: report_terminal,
        },
        PolicyAction::Skip => Resolution::Verb {
            verb: Verb::Skip { reason: reason() },
            report: report_terminal,
        },
        PolicyAction::Reattempt {
            wait_ms,
            max_reattempts,
            terminal_action,
        } => {
            let used = u32::try_from(reattempts).unwrap_or(0);
            if used >= max_reattempts {
                Resolution::Verb {
                    verb: Verb::from_failure_action(
                        terminal_action,
                        format!(
                            "step failed after {} attempts in a row: {}",
                            used + 1,
                            error.message()
                        ),
                    ),
                    report: report_terminal,
                }
            } else {
                Resolution::Verb {
                    verb: Verb::Reattempt { wait_ms },
                    report: matches!(policy.report, Report::Always),
                }
            }
        }
        PolicyAction::Handler(handler) => Resolution::Handler {
            handler,
            report: report_terminal,
        },
    }
}
