//! The definitions document: written, read back, refused when it does not
//! hold together; and the report's counts.

use serde_json::json;

use super::{DEFINITIONS_FORMAT, Definitions, DeployReport, LiveDefinition, Position};
use crate::engine::{InFlight, LatestRow, RunStatus, StepStatus, VerdictKind};
use crate::error::Error;
use crate::prelude::*;

struct Orders;

#[workflow(name = "orders.fulfil", queue = "orders")]
impl Orders {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}

    removed_step!(legacy_check);

    #[step(wait_for = "paid", queue = "payments")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}

    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<()>, _fan: &mut FanOut) {}
}

struct Mail;

#[workflow(name = "mail.send")]
impl Mail {
    #[step]
    async fn send(&self, _cx: &mut StepCx<()>) {}
}

fn reason(result: Result<Definitions, Error>) -> String {
    match result {
        Err(Error::InvalidDefinitions { reason }) => reason,
        other => panic!("expected InvalidDefinitions, got {other:?}"),
    }
}

#[test]
fn a_document_lists_each_workflow_once_with_its_entries_as_the_registry_stores_them() {
    let document = Definitions::of([Orders::DEFINITION, Mail::DEFINITION, Orders::DEFINITION]);
    let value: serde_json::Value = serde_json::from_str(&document.to_json()).expect("JSON");
    assert_eq!(value["format"], json!(DEFINITIONS_FORMAT));
    assert_eq!(value["queues"], json!(["default", "orders", "payments"]));
    let workflows: Vec<&str> = document
        .definitions
        .iter()
        .map(|d| d.workflow.as_str())
        .collect();
    assert_eq!(workflows, ["mail.send", "orders.fulfil"]);
    assert_eq!(
        value["definitions"][1]["digest"],
        json!(Orders::DEFINITION.digest)
    );
    assert_eq!(
        value["definitions"][1]["step_plan"],
        crate::store::registered_plan(Orders::DEFINITION),
        "the same entries as the registry's `definitions.step_plan`"
    );
    assert_eq!(
        value["definitions"][1]["step_plan"][1],
        json!({"name": "legacy_check", "kind": "removed", "queue": "orders", "wait_for": null})
    );
    assert_eq!(
        value["definitions"][1]["step_plan"][2],
        json!({"name": "await_payment", "kind": "step", "queue": "payments", "wait_for": "paid"})
    );
    assert_eq!(
        Definitions::parse(&document.to_json()).ok(),
        Some(document.clone())
    );

    let narrowed = document.clone().with_queues(["orders", "orders"]);
    assert_eq!(narrowed.queues, ["orders"]);
    assert_eq!(
        document.clone().with_queues(Vec::<String>::new()).queues,
        document.queues,
        "no queues keeps the definitions' own"
    );
}

#[test]
fn a_document_that_does_not_hold_together_is_refused_saying_why() {
    let good: serde_json::Value =
        serde_json::from_str(&Definitions::of([Orders::DEFINITION]).to_json()).expect("JSON");
    let with = |change: &dyn Fn(&mut serde_json::Value)| {
        let mut value = good.clone();
        change(&mut value);
        reason(Definitions::parse(&value.to_string()))
    };

    assert!(reason(Definitions::parse("{\"format\": 1,")).starts_with("not JSON: "));
    assert!(reason(Definitions::parse("[]")).starts_with("no `format` field"));
    assert!(
        with(&|v| v["format"] = json!(2)).starts_with("format 2 is not one this version reads (1)")
    );
    assert!(with(&|v| v["format"] = json!("1")).starts_with("format \"1\" is not"));
    assert!(
        with(&|v| {
            if let Some(o) = v.as_object_mut() {
                o.remove("queues");
            }
        })
        .contains("missing field `queues`")
    );
    assert!(with(&|v| v["queues"] = json!([])).starts_with("`queues` must list"));
    assert!(with(&|v| v["definitions"] = json!([])).starts_with("`definitions` is empty"));
    let kind = with(&|v| v["definitions"][0]["step_plan"][0]["kind"] = json!("stepp"));
    assert!(kind.contains("unknown value `stepp`"), "{kind}");
    assert!(kind.contains("did you mean `step`?"), "{kind}");
    assert!(
        with(&|v| {
            let first = v["definitions"][0].clone();
            if let Some(all) = v["definitions"].as_array_mut() {
                all.push(first);
            }
        })
        .contains("workflow `orders.fulfil` is defined twice")
    );
    assert!(
        with(&|v| v["definitions"][0]["step_plan"][1]["name"] = json!("reserve"))
            .contains("has step `reserve` twice")
    );
    // An entry edited by hand (a step turned into a gravestone).
    assert!(
        with(&|v| v["definitions"][0]["step_plan"][0]["kind"] = json!("removed"))
            .starts_with("the digest of workflow `orders.fulfil` does not match its entries")
    );
    let error = Definitions::parse("{}").expect_err("refused");
    assert_eq!(
        error.to_string(),
        "invalid definitions document: no `format` field: not a definitions document (write one with `Definitions::to_json`, e.g. from a `--print-definitions` flag)"
    );
}

#[test]
fn fields_a_later_version_adds_within_the_format_are_ignored() {
    let mut value: serde_json::Value =
        serde_json::from_str(&Definitions::of([Mail::DEFINITION]).to_json()).expect("JSON");
    value["exported_at"] = json!("2026-01-01T00:00:00Z");
    value["definitions"][0]["options_digest"] = json!("abc");
    assert!(Definitions::parse(&value.to_string()).is_ok());
}

fn position(digest: &str, step: &str, status: StepStatus, runs: i64) -> Position {
    Position {
        workflow: "orders.fulfil".to_owned(),
        digest: digest.to_owned(),
        runs,
        run: InFlight {
            status: RunStatus::Ready,
            current_step: Some(step.to_owned()),
            step_names: Some(
                ["reserve", "charge", "await_payment", "notify"]
                    .map(str::to_owned)
                    .to_vec(),
            ),
            step_plan: None,
            version_plan: None,
            latest: Some(LatestRow {
                step_name: step.to_owned(),
                status,
                queue: "orders".to_owned(),
                waiting_for: None,
            }),
        },
    }
}

#[test]
fn the_report_counts_runs_per_workflow_digest_and_verdict() {
    let new = Definitions::of([Orders::DEFINITION, Mail::DEFINITION]);
    let positions = [
        position("old", "reserve", StepStatus::Scheduled, 3),
        position("old", "reserve", StepStatus::Scheduled, 2),
        position("old", "charge", StepStatus::Scheduled, 4),
        position("old", "notify", StepStatus::Scheduled, 1),
        position(
            Orders::DEFINITION.digest,
            "notify",
            StepStatus::InProgress,
            5,
        ),
    ];
    let live = [
        LiveDefinition {
            workflow: "orders.fulfil".to_owned(),
            digest: "old".to_owned(),
            workers: 2,
        },
        LiveDefinition {
            workflow: "billing.invoice".to_owned(),
            digest: "x".to_owned(),
            workers: 1,
        },
    ];
    let report = DeployReport::build(&new, &positions, &live, false);
    assert_eq!(report.unchecked, ["billing.invoice"]);
    let orders = report
        .workflows
        .iter()
        .find(|w| w.workflow == "orders.fulfil")
        .expect("orders");
    assert_eq!(orders.live.len(), 1);
    let old = orders
        .digests
        .iter()
        .find(|d| d.digest == "old")
        .expect("old");
    // `charge` is not in the new version: runs before it or at it pause.
    assert_eq!(old.counts.pauses_step_not_defined, 9);
    assert_eq!(old.counts.advances, 1);
    assert_eq!(
        old.positions[0].verdict.verdict,
        VerdictKind::PausesStepNotDefined
    );
    assert_eq!(
        old.positions
            .iter()
            .find(|p| p.step.as_deref() == Some("reserve"))
            .map(|p| p.runs),
        Some(5),
        "positions that read the same are merged"
    );
    assert_eq!(orders.counts.total(), 15);
    assert_eq!(report.counts.stopped(), 9);
    assert!(report.stops_runs());
    let mail = report
        .workflows
        .iter()
        .find(|w| w.workflow == "mail.send")
        .expect("mail");
    assert!(
        mail.digests.is_empty(),
        "a workflow with no run in flight is listed"
    );
}
