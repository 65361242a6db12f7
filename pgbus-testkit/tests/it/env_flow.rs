//! Flow control in the environment (issue 21): a queue limit, a rate on the
//! virtual clock, a run's concurrency key and a run-held slot.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{FlowControl, Rate, RunStatus, SlotHolder, StartOptions};
use pgbus_testkit::{TestEnv, default_start};

struct Mailer;

#[workflow(name = "env.mailer", input = u8, queue = "mail")]
impl Mailer {
    #[step]
    async fn send(&self, _cx: &mut StepCx<u8>) {}

    #[step]
    async fn log(&self, _cx: &mut StepCx<u8>) {}
}

with_flow!(
    Rated,
    RATED,
    Mailer,
    "c",
    FlowControl {
        rate_limit: Some(Rate {
            count: 1,
            period_ms: 60_000,
        }),
        ..FlowControl::NONE
    }
);

with_flow!(
    Exclusive,
    EXCLUSIVE,
    Mailer,
    "c",
    FlowControl {
        has_key: true,
        key_concurrency: Some(1),
        slot: SlotHolder::Run,
        ..FlowControl::NONE
    }
);

/// A step of the queue in progress (its worker died) holds the queue's one
/// slot: the other run's step is held back, out of the due rows, until the
/// sweep takes the lost attempt and the slot goes back.
#[tokio::test]
async fn a_queue_limit_holds_steps_while_one_is_in_progress() {
    let env = TestEnv::new()
        .queue_concurrency("mail", 1)
        .expect("a limit")
        .register(Mailer)
        .lost_worker_threshold(Duration::from_secs(30));
    let a = env.start::<Mailer>(&1).expect("a start").run_id;
    let b = env.start::<Mailer>(&2).expect("a start").run_id;
    assert_eq!(env.crash_next(), Some(a));
    assert!(env.run_until_idle().await.is_empty(), "held");
    let view = env.run(b).expect("the run");
    assert_eq!(view.steps[0].held_by.as_deref(), Some("queue:mail"));
    // Held, the row is not due: running to completion leaves it be.
    let ran = env.run_to_completion().await.expect("no unrunnable run");
    assert!(ran.is_empty());
    assert_eq!(env.now(), default_start());

    env.advance(Duration::from_secs(31));
    let report = env.sweep();
    assert_eq!(report.repaired, 1, "{report:?}");
    env.run_to_completion().await.expect("runs");
    assert_eq!(env.run(b).expect("the run").run.status, RunStatus::Finished);
}

/// `rate_limit = "1/1m"` on the virtual clock: each start waits for the
/// minute after the one before; running to completion moves the clock to
/// each window's opening.
#[tokio::test]
async fn a_rate_spreads_starts_on_the_virtual_clock() {
    let env = TestEnv::new().register(Rated);
    let runs: Vec<RunId> = (0..2)
        .map(|i| env.start::<Rated>(&i).expect("a start").run_id)
        .collect();
    env.run_to_completion().await.expect("runs");
    let mut started: Vec<i64> = runs
        .iter()
        .flat_map(|run| env.run(*run).expect("the run").steps)
        .map(|step| {
            let at = step.started_at.expect("started");
            (at - default_start()).num_seconds()
        })
        .collect();
    started.sort_unstable();
    assert_eq!(started, [0, 60, 120, 180]);
    for run in runs {
        assert_eq!(
            env.run(run).expect("the run").run.status,
            RunStatus::Finished
        );
    }
}

/// The key method keys a run (a key given at start wins); with
/// `slot = "run"` and `key_concurrency = 1`, runs of one key go one after
/// the other, steps and all, while another key's run goes on.
#[tokio::test]
async fn runs_of_one_key_go_one_at_a_time_with_a_run_slot() {
    let env = TestEnv::new().register(Exclusive);
    let first = env.start::<Exclusive>(&1).expect("a start").run_id;
    let second = env.start::<Exclusive>(&1).expect("a start").run_id;
    let other = env
        .start_with::<Exclusive>(&1, &StartOptions::new().concurrency_key("mine"))
        .expect("a start")
        .run_id;
    let key = |run| env.run(run).expect("the run").concurrency_key;
    assert_eq!(key(first).as_deref(), Some("c1"));
    assert_eq!(key(other).as_deref(), Some("mine"));
    let order: Vec<(RunId, String)> = env
        .run_to_completion()
        .await
        .expect("runs")
        .into_iter()
        .map(|record| (record.run_id, record.step))
        .collect();
    // `second` waits for `first` to finish; `other`'s key is its own.
    let expected = [
        (first, "send"),
        (other, "send"),
        (first, "log"),
        (second, "send"),
        (other, "log"),
        (second, "log"),
    ];
    let expected: Vec<(RunId, String)> = expected
        .into_iter()
        .map(|(run, step)| (run, step.to_owned()))
        .collect();
    assert_eq!(order, expected);
}

/// A queue limit the worker's build would refuse is refused here too.
#[test]
fn a_bad_queue_limit_is_refused() {
    for (queue, limit) in [("mail", 0), ("mail", 100_001), ("", 1), ("two words", 1)] {
        let refused = TestEnv::new().queue_concurrency(queue, limit);
        assert!(
            matches!(
                &refused,
                Err(pgbus_runtime::Error::InvalidSetting { setting, .. })
                    if setting == "TestEnv::queue_concurrency"
            ),
            "{queue:?} {limit}: {:?}",
            refused.err()
        );
    }
    assert!(TestEnv::new().queue_concurrency("mail", 100_000).is_ok());
}
