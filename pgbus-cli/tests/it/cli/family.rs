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

#[tokio::test]
async fn runs_lists_a_family_by_parent_prefix_and_key_with_both_columns() {
    let t = TestSchema::new().await;
    let keyed =
        t.db.client()
            .start_idempotent::<Ops>(&(), "order-7")
            .await
            .expect("start")
            .run_id;
    let parent = brood(&t, 2).await;
    let children: Vec<i64> =
        t.db.client()
            .list_runs(&RunFilter::new().parent(parent))
            .await
            .expect("children")
            .iter()
            .map(|r| r.id.0)
            .collect();
    assert_eq!(children.len(), 2);
    let ids = |args: &[&str]| -> Vec<i64> {
        let mut all = vec!["runs", "--json"];
        all.extend_from_slice(args);
        crate::common::json(&t.ok(&all))
            .as_array()
            .expect("an array")
            .iter()
            .map(|r| r["id"].as_i64().expect("an id"))
            .collect()
    };
    assert_eq!(ids(&["--top-level"]), [parent.0, keyed.0]);
    assert_eq!(ids(&["--parent", &parent.0.to_string()]), children);
    assert_eq!(ids(&["--parent", &keyed.0.to_string()]), [0_i64; 0]);
    let mut family = children.clone();
    family.push(parent.0);
    assert_eq!(ids(&["--workflow-prefix", "cli.family."]), family);
    assert_eq!(ids(&["--workflow-prefix", "cli.family.c"]), children);
    assert_eq!(ids(&["--key", "order-7"]), [keyed.0]);
    assert_eq!(ids(&["--key", "order-8"]), [0_i64; 0]);

    let table = t.ok(&["runs"]);
    let header = table.lines().next().expect("a header");
    assert!(
        header.contains("PARENT") && header.contains("CHILDREN"),
        "{table}"
    );
    let row = |id: i64| -> Vec<String> {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
            .unwrap_or_else(|| panic!("run {id} in:\n{table}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    // id, workflow, status, step, parent, children, ...
    assert_eq!(row(parent.0)[4..6], ["-", "2"], "{table}");
    assert_eq!(
        row(children[0])[4..6],
        [parent.0.to_string(), "-".to_owned()]
    );
    assert_eq!(row(keyed.0)[4..6], ["-", "-"], "{table}");

    // A `*` is no wildcard; the answer says which flag lists by prefix.
    let none = t.ok(&["runs", "--workflow", "cli.family.*"]);
    assert!(
        none.contains("`--workflow-prefix` lists by prefix"),
        "{none}"
    );
    t.fails(&["runs", "--top-level", "--parent", "1"], 2);
    t.fails(&["runs", "--workflow", "a", "--workflow-prefix", "b"], 2);
}
