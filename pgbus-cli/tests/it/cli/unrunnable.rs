//! Runs nobody can run (issue 19), as `show` and `runs` print them: what is
//! missing and since when, a mark in the listing, the stuck child of a
//! fan-out, and nothing once a worker that has it registers.

use pgbus_runtime::prelude::*;

use super::Ops;
use crate::common::{TestSchema, json};

/// A workflow no worker of these tests registers until it is asked to.
struct Lonely;

#[workflow(name = "cli.lonely")]
impl Lonely {
    #[step]
    async fn wait_here(&self, _cx: &mut StepCx<()>) {}
}

#[tokio::test]
async fn show_and_runs_say_what_no_live_worker_has() {
    let t = TestSchema::new().await;
    let client = t.db.client();
    let lonely = client.start::<Lonely>(&()).await.expect("start").run_id;
    let ops = client.start::<Ops>(&()).await.expect("start").run_id;
    // A live worker of `cli.ops` only.
    let worker = t.db.worker().register(Ops).build().expect("worker");
    worker.heartbeat().await.expect("a heartbeat registers it");

    let text = t.ok(&["show", &lonely.0.to_string()]);
    let line = text
        .lines()
        .find(|l| l.starts_with("cannot run: "))
        .unwrap_or_else(|| panic!("a `cannot run` line in:\n{text}"));
    assert!(
        line.contains("no live worker registered workflow `cli.lonely`")
            && line.contains("step `wait_here` has been due since")
            && line.contains("it waits for a worker that registers the workflow"),
        "{line}"
    );
    let value = json(&t.ok(&["show", &lonely.0.to_string(), "--json"]));
    let unrunnable = &value["run"]["unrunnable"];
    assert_eq!(unrunnable["missing"], "workflow");
    assert_eq!(unrunnable["workflow"], "cli.lonely");
    assert_eq!(unrunnable["step_name"], "wait_here");
    assert!(unrunnable["since"].is_string(), "{unrunnable}");
    assert_eq!(value["run"]["run"]["unrunnable"], "workflow");

    let text = t.ok(&["show", &ops.0.to_string()]);
    assert!(!text.contains("cannot run"), "{text}");
    assert!(json(&t.ok(&["show", &ops.0.to_string(), "--json"]))["run"]["unrunnable"].is_null());

    // The listing marks the one, in a column of its own, with a note.
    let table = t.ok(&["runs"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].contains("CANNOT RUN"), "{table}");
    let row = |id: i64| {
        lines
            .iter()
            .find(|l| l.trim_start().starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("run {id} in:\n{table}"))
    };
    assert!(row(lonely.0).contains("workflow missing"), "{table}");
    assert!(!row(ops.0).contains("missing"), "{table}");
    assert!(table.contains("`pgbus show <id>` says which"), "{table}");
    let marks: Vec<(i64, serde_json::Value)> = json(&t.ok(&["runs", "--json"]))
        .as_array()
        .expect("an array")
        .iter()
        .map(|r| (r["id"].as_i64().expect("an id"), r["unrunnable"].clone()))
        .collect();
    assert_eq!(
        marks,
        [
            (ops.0, serde_json::Value::Null),
            (lonely.0, serde_json::json!("workflow"))
        ]
    );

    // Silent for longer than the threshold, the worker no longer counts.
    t.batch("UPDATE {schema}.workers SET heartbeat_at = now() - interval '1 minute'")
        .await;
    let table = t.ok(&["runs"]);
    assert_eq!(table.matches("workflow missing").count(), 2, "{table}");
    let table = t.ok(&["runs", "--lost-worker-threshold", "5m"]);
    assert_eq!(table.matches("workflow missing").count(), 1, "{table}");
    let text = t.ok(&["show", &ops.0.to_string(), "--lost-worker-threshold", "5m"]);
    assert!(!text.contains("cannot run"), "{text}");

    // A worker that registers it: no mark, no column, nothing said.
    let fixed =
        t.db.worker()
            .register(Lonely)
            .register(Ops)
            .build()
            .expect("worker");
    fixed.heartbeat().await.expect("a heartbeat registers it");
    let table = t.ok(&["runs"]);
    assert!(!table.contains("CANNOT RUN"), "{table}");
    assert!(
        !t.ok(&["show", &lonely.0.to_string()])
            .contains("cannot run")
    );
}

/// Ships each parcel in a child run of a workflow the worker forgot.
struct Dispatch;

#[workflow(name = "cli.dispatch", input = Vec<u32>)]
impl Dispatch {
    #[fan_out]
    async fn ship_all(&self, cx: &mut StepCx<Vec<u32>>, fan: &mut FanOut) -> StepResult {
        for parcel in cx.input().clone() {
            fan.start::<Parcel>(&parcel)?;
        }
        Ok(Flow::Complete)
    }
}

struct Parcel;

#[workflow(name = "cli.parcel", input = u32)]
impl Parcel {
    #[step]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn show_names_a_fan_out_child_that_cannot_run() {
    let t = TestSchema::new().await;
    let parent =
        t.db.client()
            .start::<Dispatch>(&vec![1, 2])
            .await
            .expect("start")
            .run_id;
    let worker = t.db.worker().register(Dispatch).build().expect("worker");
    worker.run_until_idle().await.expect("run");

    let value = json(&t.ok(&["show", &parent.0.to_string(), "--json"]));
    let child = value["run"]["batches"][0]["unrunnable_child"]
        .as_i64()
        .unwrap_or_else(|| panic!("a stuck child: {value}"));
    let text = t.ok(&["show", &parent.0.to_string()]);
    assert!(text.contains("CHILD THAT CANNOT RUN"), "{text}");
    assert!(
        text.contains(&format!("run {child} (`pgbus show {child}`)")),
        "{text}"
    );
    let text = t.ok(&["show", &child.to_string()]);
    assert!(
        text.contains("cannot run: no live worker registered workflow `cli.parcel`"),
        "{text}"
    );
}

/// A run on a queue that the live worker of its workflow does not claim:
/// `show` names the queue and `runs` marks it `queue unclaimed`.
#[tokio::test]
async fn show_and_runs_say_a_queue_nobody_claims() {
    let t = TestSchema::new().await;
    let options = pgbus_runtime::StartOptions::new().queue("elsewhere");
    let run =
        t.db.client()
            .start_with::<Lonely>(&(), &options)
            .await
            .expect("start")
            .run_id;
    let worker = t.db.worker().register(Lonely).build().expect("worker");
    worker.heartbeat().await.expect("a heartbeat registers it");

    let text = t.ok(&["show", &run.0.to_string()]);
    assert!(
        text.contains(
            "cannot run: no live worker that has step `wait_here` of workflow `cli.lonely` \
             claims from queue `elsewhere`"
        ) && text.contains("it waits for a worker with the step that claims from its queue"),
        "{text}"
    );
    let value = json(&t.ok(&["show", &run.0.to_string(), "--json"]));
    assert_eq!(value["run"]["unrunnable"]["missing"], "queue");
    assert_eq!(value["run"]["unrunnable"]["queue"], "elsewhere");
    let table = t.ok(&["runs"]);
    assert!(table.contains("queue unclaimed"), "{table}");
}
