//! Replaying a run against a new version of its workflow, in memory: the
//! verdict `pgbus deploy-check` would count the run under, from the run's
//! export (`pgbus show RUN --json`, or a [`RunView`](pgbus_runtime::RunView)
//! as JSON, e.g. from [`TestEnv::run`](crate::TestEnv::run)) and the new
//! version's [`Definitions`] document, through the same engine function
//! ([`deploy_verdict`]).
//!
//! ```
//! use pgbus_runtime::deploy::Definitions;
//! use pgbus_runtime::engine::VerdictKind;
//! use pgbus_runtime::prelude::*;
//! use pgbus_testkit::TestEnv;
//!
//! struct V1;
//! #[workflow(name = "orders.fulfil")]
//! impl V1 {
//!     #[step] async fn reserve(&self, _cx: &mut StepCx<()>) {}
//!     #[step] async fn charge(&self, _cx: &mut StepCx<()>) {}
//! }
//! struct V2; // `charge` renamed, without a gravestone
//! #[workflow(name = "orders.fulfil")]
//! impl V2 {
//!     #[step] async fn reserve(&self, _cx: &mut StepCx<()>) {}
//!     #[step] async fn charge_card(&self, _cx: &mut StepCx<()>) {}
//! }
//!
//! let env = TestEnv::new().register(V1);
//! let run = env.start::<V1>(&()).unwrap().run_id;
//! let export = serde_json::to_value(env.run(run).unwrap()).unwrap();
//! let verdict = pgbus_testkit::deploy::verdict(&export, &Definitions::of([V2::DEFINITION])).unwrap();
//! assert_eq!(verdict.verdict, VerdictKind::PausesStepNotDefined);
//! assert_eq!(verdict.missed, ["charge_card"]);
//! ```

use pgbus_runtime::Error;
use pgbus_runtime::deploy::Definitions;
use pgbus_runtime::engine::{
    InFlight, LatestRow, NewVersion, PlannedStep, RunStatus, StepStatus, Verdict, deploy_verdict,
};
use serde::Deserialize;
use serde_json::Value;

/// A run export, as far as the verdict reads it.
#[derive(Deserialize)]
struct Export {
    run: Summary,
    #[serde(default)]
    step_plan: Option<Vec<PlannedStep>>,
    #[serde(default)]
    steps: Vec<ShownStep>,
}

#[derive(Deserialize)]
struct Summary {
    id: i64,
    workflow: String,
    status: RunStatus,
    current_step: Option<String>,
}

/// One step attempt of the export.
#[derive(Deserialize)]
struct ShownStep {
    step_name: String,
    attempt: i32,
    status: StepStatus,
    queue: String,
    #[serde(default)]
    waiting_for: Option<String>,
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidRunExport {
        reason: reason.into(),
    }
}

/// What `new` would do to the run `export` shows, as `pgbus deploy-check`
/// judges it: `export` is `pgbus show RUN --json`'s output (`{"run": ...,
/// "timeline": ...}`) or a `RunView` as JSON. The run's latest attempts must
/// be in it (`show` keeps the latest 200).
///
/// # Errors
/// [`Error::InvalidRunExport`] for an export without a run's fields, or of a
/// run that has ended (only runs in flight are judged);
/// [`Error::InvalidDefinitions`] when `new` does not define the run's
/// workflow.
pub fn verdict(export: &Value, new: &Definitions) -> Result<Verdict, Error> {
    let (workflow, run) = in_flight(export)?;
    let definition = new
        .definition(&workflow)
        .ok_or_else(|| Error::InvalidDefinitions {
            reason: format!("it does not define workflow `{workflow}`, the run's"),
        })?;
    Ok(deploy_verdict(
        &run,
        &NewVersion {
            plan: &definition.step_plan,
            queues: &new.queues,
        },
    ))
}

/// The run `export` shows, as the check reads a run in flight, with its
/// workflow's name.
///
/// # Errors
/// As [`verdict`], for the export.
pub fn in_flight(export: &Value) -> Result<(String, InFlight), Error> {
    // `pgbus show --json` wraps the view: {"run": <view>, "timeline", "counts"}.
    let view = match export.get("run") {
        Some(inner) if inner.get("run").is_some_and(Value::is_object) => inner,
        _ => export,
    };
    let export: Export = serde_json::from_value(view.clone()).map_err(|e| {
        invalid(format!(
            "{e} (expected `pgbus show RUN --json` output or a RunView as JSON)"
        ))
    })?;
    let run = export.run;
    if run.status.is_terminal() {
        return Err(invalid(format!(
            "run {} has ended ({}): only runs in flight are judged",
            run.id, run.status
        )));
    }
    let latest = run.current_step.as_ref().and_then(|current| {
        export
            .steps
            .iter()
            .filter(|s| s.step_name == *current)
            .max_by_key(|s| s.attempt)
            .map(|s| LatestRow {
                step_name: s.step_name.clone(),
                status: s.status,
                queue: s.queue.clone(),
                waiting_for: s.waiting_for.clone(),
            })
    });
    Ok((
        run.workflow,
        InFlight {
            status: run.status,
            current_step: run.current_step,
            step_names: None,
            step_plan: export.step_plan,
            // The registry is not in an export; a run with a step plan does
            // not need it.
            version_plan: None,
            latest,
        },
    ))
}
