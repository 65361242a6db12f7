//! Runs and what they hold by name: `show` names attempts (`second#1`), a
//! child's parent run and a parent's children, and `runs` lists a family
//! (top-level runs, a run's children, a workflow prefix, an idempotency
//! key) with each run's parent and child count.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunFilter, RunStatus};

use super::{Ops, work};
use crate::common::TestSchema;

/// Starts a child run per number, of a workflow the same worker runs.
struct Brood;

#[workflow(name = "cli.family.brood", input = Vec<u32>)]
impl Brood {
    #[fan_out]
    async fn hatch(&self, cx: &mut StepCx<Vec<u32>>, fan: &mut FanOut) -> StepResult {
        for n in cx.input().clone() {
            fan.start::<Chick>(&n)?;
        }
        Ok(Flow::Complete)
    }
}

struct Chick;

#[workflow(name = "cli.family.chick", input = u32)]
impl Chick {
    #[step]
    async fn peep(&self, _cx: &mut StepCx<u32>) {}
}

/// A brood of `n` children, worked until every run has ended.
async fn brood(t: &TestSchema, n: u32) -> RunId {
    let parent =
        t.db.client()
            .start::<Brood>(&(1..=n).collect::<Vec<_>>())
            .await
            .expect("start")
            .run_id;
    let worker =
        t.db.worker()
            .register(Brood)
            .register(Chick)
            .build()
            .expect("worker");
    worker.run_until_idle().await.expect("run");
    assert_eq!(t.status(parent).await, RunStatus::Finished);
    parent
}

#[tokio::test]
async fn show_names_attempts_parents_and_children_not_row_ids() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    work(&t).await;
    let id = run.0.to_string();
    let sent = t.ok(&["signal", &id, "go"]);
    assert!(
        sent.starts_with(&format!("signal `go` sent to run {id} (signal id ")),
        "{sent}"
    );
    work(&t).await;

    let text = t.ok(&["show", &id]);
    // The attempts table leads with the step's name, no row id.
    let steps = text
        .lines()
        .skip_while(|l| *l != "steps")
        .nth(1)
        .unwrap_or_else(|| panic!("a steps table in:\n{text}"));
    assert!(steps.trim_start().starts_with("STEP "), "{steps}");
    // The signal was consumed by an attempt, named as the timeline names it.
    assert!(text.contains("CONSUMED BY"), "{text}");
    let signal = text
        .lines()
        .skip_while(|l| *l != "signals")
        .nth(2)
        .unwrap_or_else(|| panic!("a signal row in:\n{text}"));
    assert!(
        signal.contains(" go ") && signal.contains("second#1"),
        "{signal}"
    );

    let parent = brood(&t, 2).await;
    let p = parent.0.to_string();
    let text = t.ok(&["show", &p]);
    assert!(
        text.contains(&format!(
            "children 2 in 1 fan-out batch: 2 finished, 0 cancelled, 0 not ended (`pgbus runs --parent {p}` lists them)"
        )),
        "{text}"
    );
    let batch = text
        .lines()
        .skip_while(|l| *l != "fan-out batches")
        .nth(2)
        .unwrap_or_else(|| panic!("a batch row in:\n{text}"));
    assert!(batch.contains("hatch#1"), "{batch}");

    let child =
        t.db.client()
            .list_runs(&RunFilter::new().parent(parent))
            .await
            .expect("children")[0]
            .id;
    let text = t.ok(&["show", &child.0.to_string()]);
    let line = text
        .lines()
        .find(|l| l.starts_with("parent run "))
        .unwrap_or_else(|| panic!("a parent line in:\n{text}"));
    assert!(
        line.starts_with(&format!("parent run {p}, fan-out batch "))
            && line.ends_with(&format!("(`pgbus show {p}`)")),
        "{line}"
    );
    assert!(!text.contains("children "), "{text}");
}
