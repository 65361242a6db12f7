//! A signal step: `env.signal(..)` lets it through, a signal sent before the wait
//! is taken at once, and the wait times out when the virtual clock says so.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, RunStatus, StepOutcome, StepStatus};
use pgbus_testkit::{TestEnv, default_start};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Settled {
    order: u32,
    cents: u64,
}

struct Checkout;

#[workflow(name = "shop.checkout", input = u32)]
impl Checkout {
    fn for_this_order(&self, cx: &StepCx<u32>, signal: &Signal) -> bool {
        signal.payload["order"] == *cx.input()
    }

    #[step]
    async fn reserve(&self, cx: &mut StepCx<u32>) -> StepResult {
        cx.output(&format!("reserved for order {}", cx.input()))?;
        Ok(Flow::Complete)
    }

    #[step(
        wait_for(name = "payment.settled", matches = for_this_order),
        wait_timeout = "1h",
        on_timeout = "cancel"
    )]
    async fn await_payment(&self, cx: &mut StepCx<u32>) -> StepResult {
        let settled: Settled = cx
            .signal()
            .expect("the gate passed a signal")
            .payload_as()?;
        cx.output(&settled.cents)?;
        Ok(Flow::Complete)
    }

    #[step]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

#[tokio::test]
async fn a_signal_step_waits_and_the_signal_lets_it_through() {
    let env = TestEnv::new().register(Checkout);
    let run = env.start::<Checkout>(&7).unwrap().run_id;
    let reserved = env.run_next().await.unwrap();
    assert_eq!(reserved.outcome, Some(StepOutcome::Completed));

    // No signal yet: the attempt parks; it has no outcome.
    let parked = env.run_next().await.unwrap();
    assert_eq!(parked.step, "await_payment");
    assert_eq!(parked.outcome, None);
    assert_eq!(parked.status, StepStatus::Waiting);
    assert_eq!(
        parked.run_status,
        RunStatus::Ready,
        "a waiting run is ready"
    );
    let view = env.run(run).unwrap();
    let waiting = &view.steps[1];
    assert_eq!(waiting.waiting_for.as_deref(), Some("payment.settled"));
    assert_eq!(waiting.waiting_since, Some(default_start()));
    assert!(env.run_until_idle().await.is_empty(), "nothing is due");

    // Another order's payment: the predicate turns it down, the step waits on.
    env.advance(Duration::from_mins(5));
    env.signal(
        run,
        "payment.settled",
        &Settled {
            order: 8,
            cents: 100,
        },
    )
    .unwrap();
    let again = env.run_next().await.unwrap();
    assert_eq!((again.attempt, again.outcome), (1, None), "same attempt");
    assert_eq!(again.status, StepStatus::Waiting);

    env.advance(Duration::from_mins(5));
    env.signal(
        run,
        "payment.settled",
        &Settled {
            order: 7,
            cents: 4_200,
        },
    )
    .unwrap();
    let records = env.run_to_completion().await.unwrap();
    let steps: Vec<(&str, Option<StepOutcome>)> = records
        .iter()
        .map(|r| (r.step.as_str(), r.outcome))
        .collect();
    assert_eq!(
        steps,
        [
            ("await_payment", Some(StepOutcome::Completed)),
            ("ship", Some(StepOutcome::Completed)),
        ]
    );
    assert_eq!(records[0].output, Some(serde_json::json!(4_200)));
    let view = env.run(run).unwrap();
    assert_eq!(view.run.status, RunStatus::Finished);
    let consumed: Vec<Option<i64>> = view.signals.iter().map(|s| s.consumed_by).collect();
    assert_eq!(
        consumed,
        [None, Some(view.steps[1].id)],
        "the other order's payment stays unconsumed"
    );
    let events: Vec<&str> = view.events.iter().map(|e| e.event.as_str()).collect();
    assert!(events.contains(&"signal_consumed"));
    assert_eq!(
        (env.now() - default_start()).num_minutes(),
        10,
        "no waiting in real time"
    );
}

#[tokio::test]
async fn a_signal_sent_before_the_wait_is_taken_at_once() {
    let env = TestEnv::new().register(Checkout);
    let run = env.start::<Checkout>(&1).unwrap().run_id;
    env.signal(run, "payment.settled", &Settled { order: 1, cents: 5 })
        .unwrap();
    let records = env.run_until_idle().await;
    assert!(
        records.iter().all(|r| r.outcome.is_some()),
        "nothing parked"
    );
    assert_eq!(env.run(run).unwrap().run.status, RunStatus::Finished);
}

#[tokio::test]
async fn the_wait_times_out_when_the_clock_says_so() {
    let env = TestEnv::new().register(Checkout);
    let run = env.start::<Checkout>(&3).unwrap().run_id;
    env.run_until_idle().await;
    env.advance(Duration::from_secs(3_599));
    assert!(
        env.run_until_idle().await.is_empty(),
        "59m59s is not an hour"
    );

    env.advance(Duration::from_secs(1));
    let timed_out = env.run_next().await.unwrap();
    assert_eq!(timed_out.outcome, Some(StepOutcome::Cancelled));
    assert_eq!(timed_out.status, StepStatus::Failed);
    let error = timed_out.error.unwrap();
    assert!(error.class.ends_with("WaitTimedOut"), "{}", error.class);
    assert_eq!(
        error.message,
        "step `await_payment` waited 1h for signal `payment.settled`, which did not come"
    );
    assert_eq!(timed_out.run_status, RunStatus::Cancelled);
    assert!(matches!(
        env.signal(run, "payment.settled", &()),
        Err(Error::RunEnded { .. })
    ));
}

#[tokio::test]
async fn run_to_completion_reaches_a_timeout_but_leaves_an_open_wait_waiting() {
    let env = TestEnv::new().register(Checkout).register(Openended);
    let timed = env.start::<Checkout>(&3).unwrap().run_id;
    let open = env.start::<Openended>(&()).unwrap().run_id;
    let records = env.run_to_completion().await.unwrap();
    assert_eq!(records.len(), 4, "reserve, park, timeout; and one park");
    assert_eq!(env.run(timed).unwrap().run.status, RunStatus::Cancelled);
    assert_eq!(
        (env.now() - default_start()).num_minutes(),
        60,
        "the clock went to the timeout, and no further"
    );
    let view = env.run(open).unwrap();
    assert_eq!(view.steps[0].status, StepStatus::Waiting);
    env.signal(open, "go", &()).unwrap();
    env.run_to_completion().await.unwrap();
    assert_eq!(env.run(open).unwrap().run.status, RunStatus::Finished);
}

/// Waits for `go` with no timeout.
struct Openended;

#[workflow(name = "shop.openended")]
impl Openended {
    #[step(wait_for = "go")]
    async fn wait(&self, _cx: &mut StepCx<()>) {}
}
