//! `schedule`, `timezone` and `catch_up` on `#[workflow]`: checked with the
//! runtime's own reading (`pgbus_core::schedule`), each error at its literal.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::schedule::{CatchUp, Cron, DEFAULT_ZONE, ScheduleError};

use crate::model::ScheduleDef;
use crate::parse::RawWorkflow;
use crate::parse::values::Text;

/// The checked schedule, or `None` (with errors pushed) when it does not check
/// or none is declared.
pub(super) fn schedule(raw: &RawWorkflow, errors: &mut Accumulator) -> Option<ScheduleDef> {
    let Some(expression) = &raw.schedule else {
        for (option, text) in [("timezone", &raw.timezone), ("catch_up", &raw.catch_up)] {
            if let Some(text) = text {
                errors.push(
                    Error::custom(format!(
                        "`{option}` needs `schedule`: it says how the schedule's ticks are read; \
                         add `schedule = \"0 */5 * * * *\"` or remove it"
                    ))
                    .with_span(&text.span),
                );
            }
        }
        return None;
    };
    let catch_up = match &raw.catch_up {
        Some(text) => match text.value.parse::<CatchUp>() {
            Ok(catch_up) => Some(catch_up),
            Err(error) => {
                push(errors, &error, text);
                None
            }
        },
        None => Some(CatchUp::default()),
    };
    let zone = raw
        .timezone
        .as_ref()
        .map_or(DEFAULT_ZONE, |text| text.value.as_str());
    let cron = match Cron::parse(&expression.value, zone) {
        Ok(cron) => Some(cron),
        Err(error @ ScheduleError::Zone { .. }) => {
            push(errors, &error, raw.timezone.as_ref().unwrap_or(expression));
            // The expression is checked on its own too, in UTC.
            if let Err(error) = Cron::parse(&expression.value, DEFAULT_ZONE) {
                push(errors, &error, expression);
            }
            None
        }
        Err(error) => {
            push(errors, &error, expression);
            None
        }
    };
    let cron = cron?;
    Some(ScheduleDef {
        expression: cron.expression().to_owned(),
        timezone: cron.zone().to_owned(),
        catch_up: catch_up?,
        span: expression.span,
    })
}

fn push(errors: &mut Accumulator, error: &ScheduleError, at: &Text) {
    errors.push(Error::custom(error.to_string()).with_span(&at.span));
}

#[cfg(test)]
mod tests;
