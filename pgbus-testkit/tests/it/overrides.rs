//! Per-deployment overrides in the environment (issue 24): the same
//! `Overrides` a worker takes, on the virtual clock: staging durations,
//! queues, priorities, limits and deadlines, what the store's registry
//! records, and the refusals, each naming the step and the option.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, Overrides, RunId, RunStatus, StepStatus};
use pgbus_testkit::{TESTKIT_WORKER, TestEnv, default_start};

struct Remind;

#[workflow(name = "overrides.remind", input = u32)]
impl Remind {
    #[step(timeout = "1h")]
    async fn first(&self, _cx: &mut StepCx<u32>) {}

    #[step(wait = "1d")]
    async fn again(&self, _cx: &mut StepCx<u32>) {}

    #[step(wait_for = "overrides.answer", wait_timeout = "7d")]
    async fn answer(&self, _cx: &mut StepCx<u32>) {}
}

fn staging() -> Overrides {
    Overrides::new()
        .step("overrides.remind", "first", |s| s.timeout("2m"))
        .step("overrides.remind", "again", |s| s.wait("1m"))
        .step("overrides.remind", "answer", |s| s.wait_timeout("10m"))
}

/// Seconds from the start of the virtual clock to each attempt.
fn seconds(env: &TestEnv, run: RunId) -> Vec<(String, i64)> {
    env.run(run)
        .expect("the run")
        .steps
        .iter()
        .map(|step| {
            let at = step.started_at.unwrap_or(step.scheduled_at);
            (step.step_name.clone(), (at - default_start()).num_seconds())
        })
        .collect()
}

/// A day's wait is a minute and a week's signal wait ten minutes: the run
/// ends when the staging durations say, on the virtual clock.
#[tokio::test]
async fn staging_durations_decide_when_things_happen() {
    let env = TestEnv::new()
        .register(Remind)
        .overrides(staging())
        .expect("staging fits");
    let run = env.start::<Remind>(&1).expect("a start").run_id;
    env.run_to_completion().await.expect("runs");
    // `answer` parked at 60 s; its claim at 660 s found the wait over.
    assert_eq!(
        seconds(&env, run),
        [
            ("first".to_owned(), 0),
            ("again".to_owned(), 60),
            ("answer".to_owned(), 660)
        ]
    );
    let view = env.run(run).expect("the run");
    assert_eq!(view.run.status, RunStatus::Paused, "the signal never came");
    assert_eq!(
        env.now(),
        default_start() + chrono::Duration::seconds(60 + 600)
    );
    assert_eq!(
        view.steps.last().and_then(|s| s.error_message.clone()),
        Some(
            "step `answer` waited 10m for signal `overrides.answer`, which did not come".to_owned()
        )
    );

    // Without them, the source's day.
    let plain = TestEnv::new().register(Remind);
    let run = plain.start::<Remind>(&1).expect("a start").run_id;
    plain.run_until_idle().await;
    assert_eq!(seconds(&plain, run)[1], ("again".to_owned(), 86_400));
}

/// The overridden timeout is the stall horizon of a claim: a worker that
/// dies is found two minutes in, not an hour.
#[tokio::test]
async fn a_timeout_override_is_the_stall_horizon() {
    let env = TestEnv::new()
        .lost_worker_threshold(Duration::from_hours(24))
        .register(Remind)
        .overrides(staging())
        .expect("staging fits");
    let run = env.start::<Remind>(&1).expect("a start").run_id;
    assert_eq!(env.crash_next(), Some(run));
    let stall_at = env.run(run).expect("the run").steps[0].stall_at;
    assert_eq!(
        stall_at,
        Some(default_start() + chrono::Duration::minutes(2))
    );
    env.advance(Duration::from_secs(119));
    assert_eq!(env.sweep().repaired, 0);
    env.advance(Duration::from_secs(1));
    assert_eq!(env.sweep().repaired, 1);
    let view = env.run(run).expect("the run");
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some("pgbus_runtime::error::StepStalled")
    );
}

struct Send;

#[workflow(name = "overrides.send", input = u32)]
impl Send {
    #[step]
    async fn render(&self, _cx: &mut StepCx<u32>) {}

    #[step(queue = "smtp")]
    async fn deliver(&self, _cx: &mut StepCx<u32>) {}
}

/// A queue and a priority for the workflow and one step, a rate on a step
/// and a deadline: every row goes where they say, starts as the rate
/// allows, and the store's registry records what is in force.
#[tokio::test]
async fn queues_priorities_a_rate_and_a_deadline_take_effect_and_are_registered() {
    let overrides = Overrides::new()
        .workflow("overrides.send", |w| {
            w.queue("mail-staging").priority(9).deadline("90s")
        })
        .step("overrides.send", "deliver", |s| {
            s.queue("smtp-staging").priority(-2).rate_limit("1/1m")
        });
    let env = TestEnv::new()
        .register(Send)
        .overrides(overrides.clone())
        .expect("they fit");
    let runs: Vec<RunId> = (0..2)
        .map(|i| env.start::<Send>(&i).expect("a start").run_id)
        .collect();
    let view = env.run(runs[0]).expect("the run");
    assert_eq!(
        (view.steps[0].queue.as_str(), view.steps[0].priority),
        ("mail-staging", 9)
    );
    let in_force = overrides.apply(Send::DEFINITION).expect("they fit");
    assert_eq!(view.options_digest, in_force.options_digest);
    assert_ne!(view.options_digest, Send::DEFINITION.options_digest);
    assert_eq!(
        view.deadline_at,
        Some(default_start() + chrono::Duration::seconds(90))
    );

    env.run_to_completion().await.expect("runs");
    let first = env.run(runs[0]).expect("the run");
    let second = env.run(runs[1]).expect("the run");
    let deliver = |view: &pgbus_runtime::RunView| {
        view.steps
            .iter()
            .find(|s| s.step_name == "deliver")
            .cloned()
            .expect("a deliver row")
    };
    assert_eq!(
        (deliver(&first).queue.as_str(), deliver(&first).priority),
        ("smtp-staging", -2)
    );
    // One start of `deliver` a minute: the second run's waits a minute,
    // inside its deadline; the deadline ends nothing that finished.
    assert_eq!(
        [first.run.status, second.run.status],
        [RunStatus::Finished, RunStatus::Finished]
    );
    let started = |view: &pgbus_runtime::RunView| {
        (deliver(view).started_at.expect("started") - default_start()).num_seconds()
    };
    let mut starts = [started(&first), started(&second)];
    starts.sort_unstable();
    assert_eq!(starts, [0, 60]);

    let registered = env.store().registered(TESTKIT_WORKER).expect("registered");
    assert_eq!(registered.len(), 1);
    assert_eq!(
        registered[0].options_digest.as_deref(),
        Some(in_force.options_digest)
    );
    assert_eq!(registered[0].overrides, in_force.overrides_in_force());
    assert!(registered[0].overrides.is_some());
}

/// A deadline override ends a run the source would let wait a day.
#[tokio::test]
async fn a_deadline_override_cancels_a_run_in_time() {
    let env = TestEnv::new()
        .register(Remind)
        .overrides(Overrides::new().workflow("overrides.remind", |w| w.deadline("30m")))
        .expect("fits");
    let run = env.start::<Remind>(&1).expect("a start").run_id;
    env.run_to_completion().await.expect("runs");
    let view = env.run(run).expect("the run");
    assert_eq!(view.run.status, RunStatus::Cancelled);
    assert_eq!(env.now(), default_start() + chrono::Duration::minutes(30));
    assert!(view.steps.iter().all(|s| s.step_name != "answer"));
    assert_eq!(
        view.steps.last().map(|s| s.status),
        Some(StepStatus::Cancelled)
    );
}

/// Registering again after the overrides keeps them in force.
#[tokio::test]
async fn a_workflow_registered_again_keeps_the_overrides() {
    let env = TestEnv::new()
        .register(Remind)
        .overrides(staging())
        .expect("fits")
        .register(Remind);
    let run = env.start::<Remind>(&1).expect("a start").run_id;
    env.run_until_idle().await;
    env.advance(Duration::from_mins(1));
    env.run_until_idle().await;
    assert_eq!(seconds(&env, run)[1], ("again".to_owned(), 60));
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

/// Each refusal names the workflow, the step and the option, as a worker's
/// build does.
#[tokio::test]
async fn refused_overrides_name_the_step_and_the_option() {
    let remind = "overrides.remind";
    let cases = [
        (
            Overrides::new().step(remind, "secnd", |s| s.wait("1s")),
            Some("secnd"),
            "step",
            "this workflow has no step `secnd` (its steps: `first`, `again`, `answer`); \
             name a step by its durable name",
        ),
        (
            Overrides::new().step(remind, "again", |s| s.wait("1 minute")),
            Some("again"),
            "wait",
            "invalid `wait`: ",
        ),
        (
            Overrides::new().step(remind, "first", |s| s.wait_timeout("1m")),
            Some("first"),
            "wait_timeout",
            "`wait_timeout` needs `wait_for`: it limits how long the step waits for a signal; \
             step `first` waits for no signal, so remove the override",
        ),
        (
            Overrides::new().step(remind, "first", |s| s.timeout("0ms")),
            Some("first"),
            "timeout",
            "`timeout` must be greater than zero; leave it out to use the runtime's stall threshold",
        ),
        (
            Overrides::new().step(remind, "again", |s| s.queue("")),
            Some("again"),
            "queue",
            "`queue` cannot be empty; leave it out to use `\"default\"`",
        ),
        (
            Overrides::new().workflow(remind, |w| w.rate_limit("0/1s")),
            None,
            "rate_limit",
            "invalid `rate_limit`: a rate of 0 would never start a step",
        ),
    ];
    for (overrides, step, option, reason) in cases {
        let error = TestEnv::new()
            .register(Remind)
            .overrides(overrides)
            .expect_err("refused");
        let message = error.to_string();
        let (workflow, s, o, r) = refusal(error);
        assert!(workflow.starts_with("overrides.rem"), "{message}");
        assert_eq!((s.as_deref(), o), (step, option), "{message}");
        assert!(r.starts_with(reason), "{message}");
    }

    // A bad value of a workflow not registered is refused too.
    let error = TestEnv::new()
        .register(Remind)
        .overrides(Overrides::new().workflow("overrides.other", |w| w.concurrency(0)))
        .expect_err("a bad value");
    let (workflow, _, option, _) = refusal(error);
    assert_eq!(
        (workflow.as_str(), option),
        ("overrides.other", "concurrency")
    );
}

/// Overrides of a workflow not registered (a misspelt name here) are kept,
/// not refused, and change nothing registered; given before a workflow is
/// registered, they apply to it when it is.
#[tokio::test]
async fn overrides_of_workflows_not_registered_are_kept() {
    let env = TestEnv::new()
        .register(Remind)
        .overrides(Overrides::new().workflow("overrides.remnd", |w| w.priority(1)))
        .expect("accepted");
    let run = env.start::<Remind>(&1).expect("a start").run_id;
    let view = env.run(run).expect("the run");
    assert_eq!(view.options_digest, Remind::DEFINITION.options_digest);
    assert_eq!(view.steps[0].priority, 0);
    let registered = env.store().registered(TESTKIT_WORKER).expect("registered");
    assert_eq!(registered[0].overrides, None);

    let env = TestEnv::new()
        .overrides(staging())
        .expect("kept until registered")
        .register(Remind);
    let run = env.start::<Remind>(&1).expect("a start").run_id;
    env.run_until_idle().await;
    env.advance(Duration::from_mins(1));
    env.run_until_idle().await;
    assert_eq!(seconds(&env, run)[1], ("again".to_owned(), 60));
}

struct Kid;

#[workflow(name = "overrides.kid", input = u32)]
impl Kid {
    #[step]
    async fn only(&self, _cx: &mut StepCx<u32>) {}
}

struct Parent;

#[workflow(name = "overrides.parent")]
impl Parent {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Kid>(&1)?;
        Ok(Flow::Complete)
    }
}

/// An override that does not fit a fan_out child's workflow pauses the
/// parent with the refusal as its error, and starts no child, as on
/// Postgres.
#[tokio::test]
async fn an_override_that_does_not_fit_a_child_pauses_the_parent() {
    let env = TestEnv::new()
        .register(Parent)
        .overrides(Overrides::new().step("overrides.kid", "ghost", |s| s.wait("1s")))
        .expect("not a workflow it registers");
    let parent = env.start::<Parent>(&()).expect("a start").run_id;
    env.run_until_idle().await;
    let view = env.run(parent).expect("the run");
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(
        view.error_class.as_deref(),
        Some("pgbus_runtime::overrides::OverrideRefused")
    );
    assert_eq!(
        view.error_message.as_deref(),
        Some(
            "override of workflow `overrides.kid`, step `ghost` refused: this workflow has no \
             step `ghost` (its steps: `only`); name a step by its durable name"
        )
    );
    let children = env
        .list_runs(&pgbus_runtime::RunFilter::new().parent(parent))
        .expect("the children");
    assert!(children.is_empty(), "no child started: {children:?}");
}
