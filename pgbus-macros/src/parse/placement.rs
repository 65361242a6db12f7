//! Where an option written in the wrong place belongs. Every option of every
//! other place gets a message that says where it goes, with the user's own
//! option in the fix (`on_exception(action = "reattempt", max_reattempts = 5)`),
//! written so that applying the fix compiles: a policy the fix creates has the
//! `action` it needs.

use darling::ast::NestedMeta;
use pgbus_core::vocab::options::{FAN_OUT, ON_EXCEPTION, STEP, WAIT_FOR, WORKFLOW};

use super::options::Place;
use crate::render::code;

/// An option as written, without its name: ` = 5`, `(CardDeclined)`, or
/// nothing for a bare word.
pub(crate) struct Written {
    tail: String,
}

impl Written {
    pub(crate) fn of(item: &NestedMeta) -> Self {
        let tail = match item {
            NestedMeta::Meta(syn::Meta::Path(_)) | NestedMeta::Lit(_) => String::new(),
            NestedMeta::Meta(syn::Meta::NameValue(nv)) => format!(" = {}", code(&nv.value)),
            NestedMeta::Meta(syn::Meta::List(list)) => format!("({})", code(&list.tokens)),
            NestedMeta::NameValueInvalidExpr(invalid) => {
                format!(" = {}", code(&invalid.value))
            }
        };
        Self { tail }
    }

    /// The option written under `name`; a bare word gets a placeholder value.
    pub(crate) fn under(&self, name: &str) -> String {
        if self.tail.is_empty() {
            format!("{name} = ...")
        } else {
            format!("{name}{}", self.tail)
        }
    }
}

/// Where `name`, not an option of `place`, belongs, said as a fix that uses
/// what was written; `None` when no place takes it.
pub(crate) fn misplaced(place: Place, name: &str, written: &Written) -> Option<String> {
    let option = written.under(name);
    if let Some(message) = special(place, name, written, &option) {
        return Some(message);
    }
    if place != Place::OnException && ON_EXCEPTION.contains(&name) {
        return Some(policy_option(place, name, &option));
    }
    if place != Place::WaitFor && WAIT_FOR.contains(&name) {
        return Some(wait_for_option(place, &option));
    }
    let on_step = STEP.contains(&name) || FAN_OUT.contains(&name);
    let on_workflow = WORKFLOW.contains(&name);
    match place {
        Place::Workflow if on_step => Some(format!(
            "is a step option; write it on the `#[step]` that needs it, e.g. `#[step({option})]`"
        )),
        Place::Step | Place::FanOut if on_workflow => Some(format!(
            "is a workflow option; write it in `#[workflow(...)]`, e.g. `#[workflow({option})]`"
        )),
        Place::OnException if on_step && on_workflow => Some(format!(
            "is a step or workflow option, not a policy's; write it in the attribute of the step \
             or workflow it is for, e.g. `#[step({option})]`"
        )),
        Place::OnException if on_step => Some(format!(
            "is a step option, not a policy's; write it in the attribute of the step it is for, \
             e.g. `#[step({option})]`"
        )),
        Place::OnException if on_workflow => Some(format!(
            "is a workflow option, not a policy's; write it in `#[workflow(...)]`, e.g. \
             `#[workflow({option})]`"
        )),
        Place::WaitFor if on_step => Some(format!(
            "is a step option, not part of the signal wait; write it in `#[step(...)]` beside \
             `wait_for(...)`: `wait_for(...), {option}`"
        )),
        Place::WaitFor if on_workflow => Some(format!(
            "is a workflow option, not part of the signal wait; write it in `#[workflow(...)]`, \
             e.g. `#[workflow({option})]`"
        )),
        _ => None,
    }
}

/// Options whose place needs more than "it goes there": a near neighbour
/// here that the user probably meant, or a rule of the place.
fn special(place: Place, name: &str, written: &Written, option: &str) -> Option<String> {
    let step_like = matches!(place, Place::Step | Place::FanOut);
    let message = match name {
        "wait_for" | "wait_timeout" | "on_timeout" | "matches" if place == Place::FanOut => {
            "is not allowed on a `#[fan_out]`: a fan_out waits for its child runs, not for a \
             signal; move the signal wait to a `#[step]`"
                .to_owned()
        }
        "on_batch_failure" if place == Place::OnException => format!(
            "only applies to a `#[fan_out]` method: write it there, e.g. `#[fan_out({option})]`; \
             what a policy does when its reattempts run out is `terminal_action`: write `{}` \
             with `action = \"reattempt\"`",
            written.under("terminal_action")
        ),
        "on_batch_failure" if place != Place::FanOut => {
            format!("only applies to a `#[fan_out]` method; write `#[fan_out({option})]`")
        }
        "wait" if place == Place::WaitFor => format!(
            "is a step option: a step waits that long before it runs, not for the signal; write \
             it in `#[step(...)]` beside `wait_for(...)`: `wait_for(...), {option}`; the longest \
             wait for the signal is `{}`",
            written.under("wait_timeout")
        ),
        "deadline" if step_like => format!(
            "is a workflow option: it bounds the whole run, from its start; write it in \
             `#[workflow(...)]`, e.g. `#[workflow({option})]`; a step's own bound is `{}`",
            written.under("timeout")
        ),
        "concurrency" | "key" | "key_concurrency" | "slot" | "key_rate_limit" | "on_deadline"
            if step_like =>
        {
            // `key` and `slot` alone are refused on the workflow too: the fix
            // carries the limit each needs, so that it compiles once applied.
            let fix = match name {
                "key" => format!("{option}, key_concurrency = 1"),
                "slot" => format!("concurrency = 1, {option}"),
                _ => option.to_owned(),
            };
            format!(
                "is a workflow option: flow control is declared for the whole workflow, and a \
                 step takes only its own `rate_limit`; write it in `#[workflow(...)]`, e.g. \
                 `#[workflow({fix})]`"
            )
        }
        "cancel_if" if place != Place::Workflow => {
            let instead = match place {
                Place::Step | Place::FanOut => {
                    format!(
                        "; to skip only this step, write `{}`",
                        written.under("skip_if")
                    )
                }
                Place::OnException => {
                    "; to cancel the run when an error matches, write `action = \"cancel\"`"
                        .to_owned()
                }
                Place::Workflow | Place::WaitFor => String::new(),
            };
            format!(
                "is a workflow option: it cancels the whole run; write it in `#[workflow(...)]`, \
                 e.g. `#[workflow({option})]`{instead}"
            )
        }
        "timeout" if place == Place::Workflow => format!(
            "is a step option: it bounds one step's body; write it on the `#[step]` that needs \
             it, e.g. `#[step({option})]`, or bound the whole run with `{}`",
            written.under("deadline")
        ),
        "wait" if place == Place::Workflow => format!(
            "is a step option: a step waits that long before it runs; write it on the `#[step]` \
             that needs it, e.g. `#[step({option})]`; the wait between reattempts is \
             `on_exception(action = \"reattempt\", {option})`"
        ),
        "on_exception" if place == Place::OnException => {
            "cannot go inside another policy; write each `on_exception(...)` on its own, beside \
             the others"
                .to_owned()
        }
        "wait_for" if place == Place::WaitFor => {
            "cannot go inside another `wait_for(...)`: a step waits for one signal; write one \
             `wait_for(name = \"...\", matches = ...)`"
                .to_owned()
        }
        "name" if place == Place::OnException => format!(
            "is not a policy option: a policy has no name; `name` is the durable name of a step \
             or workflow: write it in the attribute of the one it names, e.g. `#[step({option})]`"
        ),
        _ => return None,
    };
    Some(message)
}

/// An `on_exception(...)` option written outside a policy: the policy it
/// belongs in, with the `action` it needs.
fn policy_option(place: Place, name: &str, option: &str) -> String {
    // A policy needs an `action`: the fix carries one, and says so.
    const PICK: &str = ", with the `action` (or `handler`) you mean: a policy needs one";
    let (policy, why, pick) = match name {
        "matching" => (
            format!("on_exception({option}, action = \"pause\")"),
            "",
            PICK,
        ),
        "wait" | "max_reattempts" | "terminal_action" => (
            format!("on_exception(action = \"reattempt\", {option})"),
            ": it applies to a policy that reattempts",
            "",
        ),
        "report" => (
            format!("on_exception(action = \"pause\", {option})"),
            "",
            PICK,
        ),
        _ => (format!("on_exception({option})"), "", ""),
    };
    let inner = policy
        .strip_prefix("on_exception")
        .unwrap_or(policy.as_str());
    match place {
        Place::Workflow => format!(
            "is an `on_exception(...)` option{why}; write `{policy}` in `#[workflow(...)]`, or \
             `#[on_exception{inner}]` below `#[workflow]`{pick}"
        ),
        Place::WaitFor => format!(
            "is an `on_exception(...)` option, not part of the signal wait{why}; write `{policy}` \
             in the step's attribute, beside `wait_for(...)`{pick}"
        ),
        Place::Step | Place::FanOut | Place::OnException => {
            format!("is an `on_exception(...)` option{why}; write `{policy}`{pick}")
        }
    }
}

/// `matches` outside `wait_for(...)`.
fn wait_for_option(place: Place, option: &str) -> String {
    let snippet = format!("wait_for(name = \"...\", {option})");
    match place {
        Place::Step | Place::FanOut => format!(
            "is a `wait_for(...)` option: it picks which signal ends the wait; write `{snippet}`"
        ),
        Place::OnException => format!(
            "is a `wait_for(...)` option: it picks which signal ends a step's wait; write \
             `#[step({snippet})]` on the step that waits; a policy picks its errors with \
             `matching(...)`"
        ),
        Place::Workflow | Place::WaitFor => format!(
            "is a `wait_for(...)` option: it picks which signal ends a step's wait; write \
             `#[step({snippet})]` on the step that waits"
        ),
    }
}

#[cfg(test)]
mod tests;
