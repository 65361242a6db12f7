//! Per-deployment overrides (issue 24) on Postgres: a deployment's durations,
//! queue, priority and limits change when and where steps run (the first
//! one included, placed by the client), the registry records what is in
//! force, and an override that does not fit is refused at build, naming
//! the workflow, the step and the option.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, Overrides, RunFilter, RunStatus, StepStatus};

use crate::pg::{TestDb, at_ms, events, step};

struct Fulfil;

#[workflow(name = "overrides.fulfil", input = u32)]
impl Fulfil {
    #[step(timeout = "30s")]
    async fn charge(&self, _cx: &mut StepCx<u32>) {}

    #[step(wait = "1h")]
    async fn pack(&self, _cx: &mut StepCx<u32>) {}

    #[step(wait_for = "overrides.go", wait_timeout = "1h")]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

/// What a staging deployment says about `Fulfil`.
fn staging() -> Overrides {
    Overrides::new()
        .workflow("overrides.fulfil", |w| w.queue("staging").priority(7))
        .step("overrides.fulfil", "charge", |s| s.timeout("5m"))
        .step("overrides.fulfil", "pack", |s| s.wait("1m"))
        .step("overrides.fulfil", "ship", |s| {
            s.wait_timeout("10m").priority(-1)
        })
}

const MINUTE: i64 = 60_000;

/// Durations, queue and priority all take the deployment's values: the
/// first row as the client placed it, the later ones as the worker did, on
/// a pinned clock.
#[tokio::test]
async fn overrides_decide_when_and_where_every_step_runs() {
    let t = TestDb::new().await;
    let db = t.db.with_overrides(staging()).expect("valid overrides");
    let worker = db.worker().register(Fulfil).build().expect("the worker");
    let run = db
        .client()
        .start::<Fulfil>(&1)
        .await
        .expect("a start")
        .run_id;

    let view = t.run(run).await;
    let in_force = staging().apply(Fulfil::DEFINITION).expect("staging fits");
    assert_eq!(view.options_digest, in_force.options_digest);
    assert_ne!(view.options_digest, Fulfil::DEFINITION.options_digest);
    assert_eq!(view.definition_digest, Fulfil::DEFINITION.digest);
    let charge = step(&view, "charge", 1);
    assert_eq!((charge.queue.as_str(), charge.priority), ("staging", 7));
    let plan = view.step_plan.as_ref().expect("a step plan");
    assert_eq!(plan[0].timeout_ms, Some(5 * MINUTE));
    assert_eq!(plan[1].wait_ms, 60_000);
    assert_eq!((plan[2].queue.as_str(), plan[2].priority), ("staging", -1));

    assert_eq!(worker.run_once().await.expect("a claim"), 1, "charge");
    let view = t.run(run).await;
    assert_eq!(
        step(&view, "charge", 1).stall_at,
        Some(at_ms(5 * MINUTE)),
        "the claim's stall horizon is the overridden timeout"
    );
    let pack = step(&view, "pack", 1);
    assert_eq!(pack.scheduled_at, at_ms(MINUTE), "a minute, not an hour");
    assert_eq!(pack.queue, "staging");

    t.clock.advance(Duration::from_mins(1));
    assert_eq!(worker.run_once().await.expect("a claim"), 1, "pack");
    assert_eq!(worker.run_once().await.expect("a claim"), 1, "ship parks");
    let view = t.run(run).await;
    let ship = step(&view, "ship", 1);
    assert_eq!(ship.status, StepStatus::Waiting);
    assert_eq!((ship.queue.as_str(), ship.priority), ("staging", -1));

    t.clock.advance(Duration::from_mins(10));
    assert_eq!(worker.run_once().await.expect("a claim"), 1, "timed out");
    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Paused, "{:?}", events(&view));
    assert!(
        step(&view, "ship", 1)
            .error_message
            .as_deref()
            .is_some_and(|m| m.contains("waited 10m")),
        "{:?}",
        step(&view, "ship", 1).error_message
    );
}

/// A client without the overrides places the first step where the source
/// says; a worker that claims only the overridden queue never takes it:
/// why a deployment gives both the same overrides.
#[tokio::test]
async fn a_client_without_the_overrides_places_the_first_step_by_the_source() {
    let t = TestDb::new().await;
    let db = t.db.with_overrides(staging()).expect("valid overrides");
    let worker = db.worker().register(Fulfil).build().expect("the worker");
    let run = t
        .client()
        .start::<Fulfil>(&2)
        .await
        .expect("a start")
        .run_id;
    let view = t.run(run).await;
    assert_eq!(step(&view, "charge", 1).queue, "default");
    assert_eq!(view.options_digest, Fulfil::DEFINITION.options_digest);
    assert_eq!(worker.run_once().await.expect("a claim"), 0);
}

struct Batch;

#[workflow(name = "overrides.batch", input = u32)]
impl Batch {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

/// A concurrency limit the source does not declare, given by the
/// deployment: registered, and enforced by the claim.
#[tokio::test]
async fn a_concurrency_override_is_registered_and_enforced() {
    let t = TestDb::new().await;
    let one_at_a_time = Overrides::new().workflow("overrides.batch", |w| w.concurrency(1));
    let db = t.db.with_overrides(one_at_a_time).expect("valid overrides");
    let worker = db.worker().register(Batch).build().expect("the worker");
    assert_eq!(worker.run_once().await.expect("registers"), 0);
    let limit: i32 = t
        .query(
            "SELECT max_in_flight FROM {schema}.flow_limits WHERE key = 'workflow:overrides.batch'",
            &[],
        )
        .await[0]
        .get(0);
    assert_eq!(limit, 1);

    let client = db.client();
    for input in [1, 2] {
        client.start::<Batch>(&input).await.expect("a start");
    }
    // Up to eight claimed at once, but one slot: one runs, one is held.
    assert_eq!(worker.run_once().await.expect("a claim"), 1);
    assert_eq!(worker.run_once().await.expect("a claim"), 1);
    assert_eq!(worker.run_once().await.expect("a claim"), 0);
    let finished = client
        .list_runs(&RunFilter::new().status(RunStatus::Finished))
        .await
        .expect("the runs");
    assert_eq!(finished.len(), 2);
}

/// The registry records what is in force: the link's options digest and
/// overrides, the listing of workers, the build the SQL entry point starts.
#[tokio::test]
async fn the_registry_records_the_overrides_in_force() {
    let t = TestDb::new().await;
    let db = t.db.with_overrides(staging()).expect("valid overrides");
    let worker = db
        .worker()
        .register(Fulfil)
        .register(Batch)
        .build()
        .expect("the worker");
    assert_eq!(worker.run_once().await.expect("registers"), 0);
    let in_force = staging().apply(Fulfil::DEFINITION).expect("staging fits");

    let rows = t
        .query(
            "SELECT workflow, digest, options_digest, overrides FROM {schema}.worker_definitions \
             ORDER BY workflow",
            &[],
        )
        .await;
    let row = |i: usize| {
        (
            rows[i].get::<_, String>("workflow"),
            rows[i].get::<_, String>("digest"),
            rows[i].get::<_, Option<String>>("options_digest"),
            rows[i].get::<_, Option<serde_json::Value>>("overrides"),
        )
    };
    assert_eq!(
        row(0),
        (
            "overrides.batch".to_owned(),
            Batch::DEFINITION.digest.to_owned(),
            Some(Batch::DEFINITION.options_digest.to_owned()),
            None
        ),
        "a workflow without overrides runs as its source says"
    );
    let expected = serde_json::json!({
        "queue": "staging", "priority": 7,
        "steps": {
            "charge": {"timeout_ms": 300_000},
            "pack": {"wait_ms": 60_000},
            "ship": {"wait_timeout_ms": 600_000, "priority": -1},
        },
    });
    assert_eq!(
        row(1),
        (
            "overrides.fulfil".to_owned(),
            Fulfil::DEFINITION.digest.to_owned(),
            Some(in_force.options_digest.to_owned()),
            Some(expected.clone())
        )
    );

    let workers = t
        .client()
        .workers(Duration::from_secs(30), 10)
        .await
        .expect("the workers");
    let fulfil = &workers[0].workflows[1];
    assert_eq!(fulfil.workflow, "overrides.fulfil");
    assert_eq!(
        fulfil.options_digest.as_deref(),
        Some(in_force.options_digest)
    );
    assert_eq!(fulfil.overrides, Some(expected));
    assert_eq!(workers[0].workflows[0].overrides, None);

    // The SQL entry point starts the build in force: its first step on the
    // overridden queue.
    let id: i64 = t
        .query("SELECT {schema}.start_run('overrides.fulfil', '3')", &[])
        .await[0]
        .get(0);
    let view = t.run(pgbus_runtime::RunId(id)).await;
    assert_eq!(view.options_digest, in_force.options_digest);
    assert_eq!(step(&view, "charge", 1).queue, "staging");
}

struct Parent;

#[workflow(name = "overrides.parent")]
impl Parent {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Batch>(&1)?;
        Ok(Flow::Complete)
    }
}

/// A fan_out child of an overridden workflow starts where the overrides
/// say, as a client's start would place it.
#[tokio::test]
async fn fan_out_children_are_placed_with_the_overrides() {
    let t = TestDb::new().await;
    let kids = Overrides::new().workflow("overrides.batch", |w| w.queue("kids").priority(3));
    let db = t.db.with_overrides(kids).expect("valid overrides");
    let worker = db
        .worker()
        .register(Parent)
        .register(Batch)
        .build()
        .expect("the worker");
    let parent = db
        .client()
        .start::<Parent>(&())
        .await
        .expect("a start")
        .run_id;
    worker.run_until_idle().await.expect("runs");
    let children = db
        .client()
        .list_runs(&RunFilter::new().parent(parent))
        .await
        .expect("the children");
    assert_eq!(children.len(), 1);
    let child = t.run(children[0].id).await;
    assert_eq!(child.run.status, RunStatus::Finished);
    let only = step(&child, "only", 1);
    assert_eq!((only.queue.as_str(), only.priority), ("kids", 3));
    assert_eq!(t.run(parent).await.run.status, RunStatus::Finished);
}

/// The deployment's shape: one set of overrides on the database, a worker
/// for the parents that registers only the parent workflow, one for the
/// children that registers only theirs, on the queue the overrides give
/// them. The parent's worker places each child there, the children's worker
/// runs it, and the parent finishes.
#[tokio::test]
async fn fan_out_children_reach_the_worker_of_their_overridden_queue() {
    let t = TestDb::new().await;
    let kids = Overrides::new().workflow("overrides.batch", |w| w.queue("kids"));
    let db = t.db.with_overrides(kids).expect("valid overrides");
    let parents = db
        .worker()
        .register(Parent)
        .build()
        .expect("the overrides of a workflow it does not register are kept");
    let children = db
        .worker()
        .register(Batch)
        .build()
        .expect("the children's worker");
    assert_eq!(children.definitions().queues, ["kids"]);
    let parent = db
        .client()
        .start::<Parent>(&())
        .await
        .expect("a start")
        .run_id;
    // Round one: the parent parks on its batch, the children run and wake
    // it; round two: it finishes. A child on a queue no worker claims
    // would leave it waiting, and the bound fails the test.
    for _ in 0..3 {
        if t.run(parent).await.run.status == RunStatus::Finished {
            break;
        }
        parents.run_until_idle().await.expect("runs");
        children.run_until_idle().await.expect("runs");
    }
    let view = t.run(parent).await;
    assert_eq!(view.run.status, RunStatus::Finished, "{:?}", events(&view));
    let kids = db
        .client()
        .list_runs(&RunFilter::new().parent(parent))
        .await
        .expect("the children");
    assert_eq!(kids.len(), 1);
    let child = t.run(kids[0].id).await;
    assert_eq!(child.run.status, RunStatus::Finished);
    assert_eq!(child.options_digest, staged_batch().options_digest);
    assert_eq!(step(&child, "only", 1).queue, "kids");
}

fn staged_batch() -> &'static pgbus_runtime::WorkflowDefinition {
    Overrides::new()
        .workflow("overrides.batch", |w| w.queue("kids"))
        .apply(Batch::DEFINITION)
        .expect("fits")
}

/// An override that does not fit a fan_out child's workflow (a step it
/// lacks) fails the fan_out with the refusal as its error: the parent
/// pauses, saying why, and no child starts on a queue no worker may claim.
#[tokio::test]
async fn an_override_that_does_not_fit_a_child_pauses_the_parent() {
    let t = TestDb::new().await;
    let ghost = Overrides::new()
        .workflow("overrides.batch", |w| w.queue("kids"))
        .step("overrides.batch", "ghost", |s| s.wait("1s"));
    let db = t.db.with_overrides(ghost).expect("the values are fine");
    let parents = db
        .worker()
        .register(Parent)
        .build()
        .expect("not a workflow it registers");
    let parent = db
        .client()
        .start::<Parent>(&())
        .await
        .expect("a start")
        .run_id;
    parents.run_until_idle().await.expect("runs");
    let view = t.run(parent).await;
    assert_eq!(view.run.status, RunStatus::Paused, "{:?}", events(&view));
    assert_eq!(
        view.error_class.as_deref(),
        Some("pgbus_runtime::overrides::OverrideRefused")
    );
    assert_eq!(
        view.error_message.as_deref(),
        Some(
            "override of workflow `overrides.batch`, step `ghost` refused: this workflow has no \
             step `ghost` (its steps: `only`); name a step by its durable name"
        )
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.runs WHERE parent_batch_id IS NOT NULL",
            &[]
        )
        .await,
        0,
        "no child started"
    );
    // The children's worker refuses the same overrides at build.
    let error = db.worker().register(Batch).build().expect_err("refused");
    assert_eq!(refusal(error).1.as_deref(), Some("ghost"));
}

fn refusal(error: Error) -> (String, Option<String>, &'static str, String) {
    match error {
        Error::InvalidOverride(refused) => (
            refused.workflow,
            refused.step,
            refused.option,
            refused.reason,
        ),
        other => panic!("not an override refusal: {other:?}"),
    }
}

/// An override of a workflow the worker does not register (a misspelt name
/// here) is no reason to refuse the build: it is kept for fan_out children
/// and changes nothing the worker runs. Its values are still checked.
#[tokio::test]
async fn an_override_of_a_workflow_not_registered_is_kept_not_refused() {
    let t = TestDb::new().await;
    let misspelt = Overrides::new().workflow("overrides.fulfill", |w| w.priority(1));
    let db = t.db.with_overrides(misspelt).expect("valid overrides");
    let worker = db.worker().register(Fulfil).build().expect("accepted");
    let run = db
        .client()
        .start::<Fulfil>(&1)
        .await
        .expect("a start")
        .run_id;
    assert_eq!(worker.run_once().await.expect("a claim"), 1, "charge");
    let view = t.run(run).await;
    assert_eq!(view.options_digest, Fulfil::DEFINITION.options_digest);
    let charge = step(&view, "charge", 1);
    assert_eq!((charge.queue.as_str(), charge.priority), ("default", 0));
    let overridden = t
        .count(
            "SELECT count(*) FROM {schema}.worker_definitions WHERE overrides IS NOT NULL",
            &[],
        )
        .await;
    assert_eq!(overridden, 0, "the registry records no override in force");

    // A bad value of a workflow not registered, built in code: refused.
    let error =
        t.db.worker()
            .register(Fulfil)
            .overrides(Overrides::new().step("overrides.other", "x", |s| s.timeout("0s")))
            .build()
            .expect_err("a bad value");
    assert_eq!(
        refusal(error),
        (
            "overrides.other".to_owned(),
            Some("x".to_owned()),
            "timeout",
            "`timeout` must be greater than zero; leave it out to use the runtime's stall threshold"
                .to_owned()
        )
    );
}

/// An override that does not fit a workflow the worker registers is refused
/// at build, before anything runs, naming the workflow, the step and the
/// option; a bad value already when the database takes the overrides.
#[tokio::test]
async fn refused_overrides_fail_at_build_naming_step_and_option() {
    let t = TestDb::new().await;
    let fulfil = "overrides.fulfil";
    let cases = [
        (
            Overrides::new().step(fulfil, "chrage", |s| s.timeout("1m")),
            Some("chrage"),
            "step",
            "this workflow has no step `chrage`",
        ),
        (
            Overrides::new().step(fulfil, "charge", |s| s.wait_timeout("1m")),
            Some("charge"),
            "wait_timeout",
            "`wait_timeout` needs `wait_for`",
        ),
        (
            Overrides::new().step(fulfil, "pack", |s| s.wait("5x")),
            Some("pack"),
            "wait",
            "invalid `wait`",
        ),
        (
            Overrides::new().step(fulfil, "charge", |s| s.timeout("0s")),
            Some("charge"),
            "timeout",
            "`timeout` must be greater than zero",
        ),
        (
            Overrides::new().workflow(fulfil, |w| w.queue("two words")),
            None,
            "queue",
            "`queue` cannot contain whitespace",
        ),
    ];
    for (overrides, step, option, reason) in cases {
        let error =
            t.db.worker()
                .register(Fulfil)
                .overrides(overrides.clone())
                .build()
                .expect_err("refused at build");
        let message = error.to_string();
        let (workflow, named, refused, why) = refusal(error);
        assert_eq!((named.as_deref(), refused), (step, option), "{message}");
        assert!(workflow.starts_with("overrides.fulfil"), "{message}");
        assert!(why.starts_with(reason), "{message}");
        // The same overrides on the database: a bad value is refused when
        // the database takes them, a bad name when a worker is built.
        match t.db.with_overrides(overrides) {
            Ok(db) => {
                let error = db.worker().register(Fulfil).build().expect_err("refused");
                assert_eq!(refusal(error).2, option);
            }
            Err(error) => assert_eq!(refusal(error).2, option),
        }
    }
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.workers", &[]).await,
        0,
        "nothing registered"
    );

    // A client checks the overrides of a workflow when it first starts one.
    let db =
        t.db.with_overrides(Overrides::new().step(fulfil, "ghost", |s| s.wait("1s")))
            .expect("values are fine");
    let error = db.client().start::<Fulfil>(&1).await.expect_err("refused");
    assert_eq!(refusal(error).1.as_deref(), Some("ghost"));
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.runs", &[]).await,
        0,
        "nothing started"
    );
}
