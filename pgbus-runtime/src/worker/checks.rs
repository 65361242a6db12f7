//! What [`WorkerBuilder::build`] checks before a worker exists: the
//! overrides against what it registers, its schedules, its queue limits and
//! its name. Each refusal is a typed error naming what to change.

use std::collections::HashMap;
use std::sync::Arc;

use super::MAX_WORKER_NAME_CHARS;
use super::builder::BuilderSchedule;
#[cfg(doc)]
use crate::WorkerBuilder;
use crate::error::Error;
use crate::executor::ErasedWorkflow;
use crate::overrides::Overrides;

/// The registered workflows under the definitions `overrides` derive, each
/// override of a registered workflow checked against it. Overrides of other
/// workflows are kept for the fan_out children the worker starts, and logged
/// once here, unless the worker runs no steps (a sweeper starts no
/// children).
pub(super) fn overridden(
    registry: HashMap<&'static str, Arc<dyn ErasedWorkflow>>,
    overrides: &Overrides,
    runs_steps: bool,
) -> Result<HashMap<&'static str, Arc<dyn ErasedWorkflow>>, Error> {
    // Every value, those of workflows not registered too: built in code,
    // they were not checked when read.
    overrides.check()?;
    let result: Result<HashMap<_, _>, Error> = registry
        .into_iter()
        .map(|(name, workflow)| {
            let definition = overrides.apply(workflow.declared())?;
            Ok((name, workflow.under(definition)))
        })
        .collect();
    let registry = result?;
    if runs_steps {
        let names: Vec<&str> = registry.keys().copied().collect();
        crate::store::log_unregistered(overrides, &names);
    }
    Ok(registry)
}

/// The schedules the worker declares: its workflows' own
/// (`#[workflow(schedule)]`) and those of [`WorkerBuilder::schedule`], checked.
pub(super) fn declared_schedules(
    registry: &HashMap<&'static str, Arc<dyn ErasedWorkflow>>,
    extra: Vec<BuilderSchedule>,
    limits: crate::context::Limits,
) -> Result<Vec<crate::schedule::ScheduleSpec>, Error> {
    let mut declared = crate::schedule::declared_specs(
        registry
            .values()
            .map(|workflow| (workflow.definition(), workflow.schedule())),
        &limits,
    )?;
    for schedule in extra {
        let invalid = |field: &'static str, reason: String| Error::InvalidSchedule {
            name: schedule.name.clone(),
            field,
            reason,
        };
        if !registry.contains_key(schedule.workflow) {
            return Err(invalid(
                "workflow",
                format!(
                    "`workflow`: `{}` is not registered with this worker; register it first",
                    schedule.workflow
                ),
            ));
        }
        let input = schedule
            .input
            .clone()
            .map_err(|error| invalid("input", format!("`input` does not serialize: {error}")))?;
        declared.push(crate::schedule::ScheduleSpec::new(
            &schedule.name,
            schedule.workflow,
            &schedule.schedule,
            input,
            &limits,
        )?);
    }
    // By name: every worker locks the rows in one order when it declares them.
    declared.sort_by(|a, b| a.name.cmp(&b.name));
    let names: Vec<&str> = declared.iter().map(|spec| spec.name.as_str()).collect();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Error::InvalidSchedule {
            name: pair[0].to_owned(),
            field: "name",
            reason: "`name`: declared twice on this worker; give each schedule its own name"
                .to_owned(),
        });
    }
    Ok(declared)
}

/// The queue limits of [`WorkerBuilder::queue_concurrency`], checked, one per
/// queue (the last declared wins), sorted by queue.
pub(super) fn checked_queue_limits(
    limits: Vec<(String, u32)>,
) -> Result<Vec<(String, u32)>, Error> {
    let mut checked = std::collections::BTreeMap::new();
    for (queue, limit) in limits {
        let invalid = |problem: String| Error::InvalidSetting {
            setting: "WorkerBuilder::queue_concurrency".to_owned(),
            problem,
        };
        crate::start_options::check_queue(&queue)
            .map_err(|problem| invalid(format!("the queue {problem}")))?;
        if limit == 0 || limit > pgbus_core::flow::MAX_CONCURRENCY {
            return Err(invalid(format!(
                "the limit of queue `{queue}` is 1 to {} steps in progress; got {limit}",
                pgbus_core::flow::MAX_CONCURRENCY
            )));
        }
        checked.insert(queue, limit);
    }
    Ok(checked.into_iter().collect())
}

/// Checks a worker name (see [`WorkerBuilder::name`]).
pub(super) fn check_name(name: &str) -> Result<(), Error> {
    let problem = if name.trim().is_empty() {
        Some("cannot be empty or blank".to_owned())
    } else if name.chars().count() > MAX_WORKER_NAME_CHARS {
        Some(format!(
            "is longer than {MAX_WORKER_NAME_CHARS} characters; use a shorter name"
        ))
    } else if name.chars().any(char::is_control) {
        Some("cannot hold control characters (tabs, newlines, escapes)".to_owned())
    } else if name.trim() != name {
        Some("cannot start or end with whitespace".to_owned())
    } else {
        None
    };
    problem.map_or(Ok(()), |problem| {
        Err(Error::InvalidSetting {
            setting: "WorkerBuilder::name".to_owned(),
            problem,
        })
    })
}
