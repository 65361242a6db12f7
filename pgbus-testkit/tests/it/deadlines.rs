//! Run deadlines on the environment's virtual clock (issue 21): moving the
//! clock past a deadline acts on it as a worker's sweep would.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{DeadlineAction, RunStatus, StartOptions};
use pgbus_testkit::{TestEnv, default_start};

/// `second` is due an hour after `first`.
struct Slow;

#[workflow(name = "env.deadline_slow", input = u8)]
impl Slow {
    #[step]
    async fn first(&self, _cx: &mut StepCx<u8>) {}

    #[step(wait = "1h")]
    async fn second(&self, _cx: &mut StepCx<u8>) {}
}

with_deadline!(
    SlowIn30m,
    SLOW_IN_30M,
    Slow,
    1_800_000,
    DeadlineAction::Cancel
);

fn minutes(n: i64) -> chrono::DateTime<chrono::Utc> {
    default_start() + chrono::Duration::minutes(n)
}

#[tokio::test]
async fn advancing_past_a_deadline_cancels_the_run() {
    let env = TestEnv::new().register(SlowIn30m(Slow));
    let run = env.start::<SlowIn30m>(&1).expect("a start").run_id;
    assert_eq!(env.run_until_idle().await.len(), 1, "`first`");
    assert_eq!(
        env.run(run).expect("the run").deadline_at,
        Some(minutes(30))
    );
    env.advance(Duration::from_mins(29));
    assert_eq!(env.run(run).expect("the run").run.status, RunStatus::Ready);
    env.advance(Duration::from_mins(2));
    let view = env.run(run).expect("the run");
    assert_eq!(view.run.status, RunStatus::Cancelled);
    let exceeded = view
        .events
        .iter()
        .find(|e| e.event == "deadline_exceeded")
        .expect("the event");
    assert_eq!(exceeded.actor, "deadline");
    assert_eq!(
        exceeded.created_at,
        minutes(31),
        "at the end of the advance"
    );
    assert_eq!(env.sweep().deadlines_exceeded, 0, "spent");
}

#[tokio::test]
async fn run_to_completion_reaches_a_deadline_before_a_later_step() {
    let env = TestEnv::new().register(SlowIn30m(Slow));
    let run = env.start::<SlowIn30m>(&2).expect("a start").run_id;
    let ran = env.run_to_completion().await.expect("the runs");
    assert_eq!(
        ran.len(),
        1,
        "`first`; `second` would start after the deadline"
    );
    assert_eq!(env.now(), minutes(30), "the clock jumped to the deadline");
    assert_eq!(
        env.run(run).expect("the run").run.status,
        RunStatus::Cancelled
    );

    // A start's own deadline, past which no step starts: the sweep acts.
    let own = env
        .start_with::<Slow>(
            &3,
            &StartOptions::new().deadline_after(Duration::from_mins(5)),
        )
        .expect("a start")
        .run_id;
    env.outage(Duration::from_mins(10));
    assert!(env.run_until_idle().await.is_empty(), "past its deadline");
    assert_eq!(env.sweep().deadlines_exceeded, 1);
    assert_eq!(
        env.run(own).expect("the run").run.status,
        RunStatus::Cancelled
    );
}
