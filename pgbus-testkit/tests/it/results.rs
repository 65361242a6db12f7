//! A run's result in the environment (issue 20): `TestEnv::result` reads it
//! as it stands (`now`), or drives the environment on its virtual clock
//! until the run ends, up to a virtual timeout, with `Client::result`'s
//! errors.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::view::Missing;
use pgbus_runtime::{Error, OnPause, RunStatus};
use pgbus_testkit::{TestEnv, default_start};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Receipt {
    order: u32,
    parcels: u32,
}

/// Packs, then ships two hours later; the receipt is the result. An order
/// of 0 is cancelled, 1 paused, 2 finished early with no receipt.
struct Ship;

#[workflow(name = "env.ship", input = u32, output = Receipt)]
impl Ship {
    #[step]
    async fn pack(&self, cx: &mut StepCx<u32>) -> StepResult {
        cx.output(&"packed")?;
        Ok(match cx.input() {
            0 => Flow::cancel("nothing to ship"),
            1 => Flow::pause("check the address"),
            2 => Flow::Finish,
            _ => Flow::Complete,
        })
    }

    #[step(wait = "2h")]
    async fn send(&self, cx: &mut StepCx<u32>) -> StepResult {
        let order = *cx.input();
        cx.output(&Receipt { order, parcels: 2 })?;
        Ok(Flow::Complete)
    }
}

/// Waits for `go`, with no wait timeout.
struct Gate;

#[workflow(name = "env.gate", output = Option<u32>)]
impl Gate {
    #[step(wait_for = "go")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        let n: u32 = cx
            .signal()
            .map_or(Ok(0), pgbus_runtime::Signal::payload_as)?;
        cx.output(&Some(n))?;
        Ok(Flow::Complete)
    }
}

/// A parent whose fan-out children are of a workflow nobody registered.
struct Dispatch;

#[workflow(name = "env.dispatch")]
impl Dispatch {
    #[fan_out]
    async fn spread(&self, _cx: &mut StepCx<()>, fan: &mut FanOut) -> StepResult {
        fan.start::<Parcel>(&1)?;
        Ok(Flow::Complete)
    }
}

struct Parcel;

#[workflow(name = "env.parcel", input = u32)]
impl Parcel {
    #[step]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}
}

fn env() -> TestEnv {
    TestEnv::new()
        .register(Ship)
        .register(Gate)
        .register(Dispatch)
}

fn hours(h: i64) -> chrono::DateTime<chrono::Utc> {
    default_start() + chrono::Duration::hours(h)
}

#[tokio::test]
async fn awaiting_drives_the_run_to_its_end_on_the_virtual_clock() {
    let env = env();
    let run = env.start::<Ship>(&7).unwrap();
    let receipt = env.result::<Ship>(run).await.expect("the result");
    assert_eq!(
        receipt,
        Receipt {
            order: 7,
            parcels: 2
        }
    );
    assert_eq!(env.now(), hours(2), "the clock jumped to the second step");
    assert_eq!(
        env.result::<Ship>(run).now().expect("ended"),
        receipt,
        "read again, without running anything"
    );
}

#[tokio::test]
async fn now_runs_nothing_and_a_virtual_timeout_stops_the_clock() {
    let env = env();
    let run = env.start::<Ship>(&7).unwrap().run_id;
    let now = env.result::<Ship>(run).now();
    assert!(
        matches!(
            now,
            Err(Error::ResultTimeout {
                waited: Duration::ZERO,
                status: RunStatus::Ready,
                ..
            })
        ),
        "{now:?}"
    );
    assert_eq!(env.run(run).unwrap().steps.len(), 1, "nothing ran");

    let timed_out = env
        .result::<Ship>(run)
        .timeout(Duration::from_hours(1))
        .await;
    assert!(
        matches!(timed_out, Err(Error::ResultTimeout { waited, .. }) if waited == Duration::from_hours(1)),
        "{timed_out:?}"
    );
    assert_eq!(env.now(), hours(1), "stopped at the timeout");
    assert_eq!(
        env.run(run).unwrap().steps.len(),
        2,
        "`pack` ran, `send` is due later"
    );
    let receipt = env
        .result::<Ship>(run)
        .timeout(Duration::from_hours(1))
        .await
        .expect("due within the next hour");
    assert_eq!(receipt.order, 7);
    assert_eq!(env.now(), hours(2));
}

#[tokio::test]
async fn cancelled_paused_and_undecodable_runs_are_errors() {
    let env = env();
    let cancelled = env.start::<Ship>(&0).unwrap();
    let result = env.result::<Ship>(cancelled).await;
    assert!(
        matches!(&result, Err(Error::RunCancelled { reason: Some(r), .. }) if r == "nothing to ship"),
        "{result:?}"
    );

    let paused = env.start::<Ship>(&1).unwrap();
    let result = env.result::<Ship>(paused).await;
    assert!(
        matches!(&result, Err(Error::RunPaused { reason: Some(r), .. }) if r == "check the address"),
        "{result:?}"
    );
    // Waited through: nothing here resumes it, so the timeout ends the wait,
    // as `RunPaused`.
    let before = env.now();
    let result = env
        .result::<Ship>(paused)
        .on_pause(OnPause::Wait)
        .timeout(Duration::from_mins(1))
        .await;
    assert!(matches!(result, Err(Error::RunPaused { .. })), "{result:?}");
    assert_eq!(env.now(), before + chrono::Duration::seconds(60));

    // `Flow::Finish` on `pack`: the result is "packed", no receipt.
    let early = env.start::<Ship>(&2).unwrap();
    let result = env.result::<Ship>(early).await;
    assert!(
        matches!(&result, Err(Error::ResultDecode { step: Some(s), output_type, .. })
            if s == "pack" && output_type.ends_with("Receipt")),
        "{result:?}"
    );
    let missing = env.result::<Ship>(RunId(999)).now();
    assert!(
        matches!(missing, Err(Error::RunNotFound { run_id: RunId(999) })),
        "{missing:?}"
    );
}

#[tokio::test]
async fn a_run_nothing_can_end_is_not_waited_for_forever() {
    let env = env();
    let run = env.start::<Gate>(&()).unwrap();
    // Waiting for a signal nobody sends: nothing left to run, the clock
    // stays, and the wait ends.
    let result = env.result::<Gate>(run).await;
    assert!(
        matches!(
            result,
            Err(Error::ResultTimeout {
                waited: Duration::ZERO,
                ..
            })
        ),
        "{result:?}"
    );
    assert_eq!(env.now(), default_start());
    env.signal(run.run_id, "go", &5).unwrap();
    assert_eq!(env.result::<Gate>(run).await.expect("ended"), Some(5));

    // A child of a workflow the environment lacks: said, as
    // `run_to_completion` says it.
    let parent = env.start::<Dispatch>(&()).unwrap();
    env.run_until_idle().await;
    let child = env
        .run(parent.run_id)
        .unwrap()
        .batches
        .first()
        .and_then(|b| b.unrunnable_child)
        .expect("a stuck child");
    let result = env.result::<Parcel>(child).await;
    assert!(
        matches!(&result, Err(Error::RunUnrunnable { run_id, unrunnable })
            if *run_id == child && unrunnable.missing == Missing::Workflow),
        "{result:?}"
    );
}
