//! Per-deployment overrides (issue 24): both stores place, claim and limit
//! the steps of an overridden definition alike, and their registries record
//! what is in force.

use pgbus_runtime::engine::{AttemptResult, Verb};
use pgbus_runtime::prelude::*;
use pgbus_runtime::store::{Registration, Runner, Store};
use pgbus_runtime::{Overrides, RunRead, StartOptions};

use super::{Clocked, Pair, Pinned, WORKER, memory};

/// What a deployment says about `Pair`: a queue of its own, a priority, a
/// timeout on `first`, a wait before `second`, one run at a time.
fn deployed() -> Overrides {
    Overrides::new()
        .workflow("contract.pair", |w| {
            w.queue("contract_deployed").priority(4).concurrency(1)
        })
        .step("contract.pair", "first", |s| s.timeout("5m"))
        .step("contract.pair", "second", |s| s.wait("1m"))
}

/// Starts, claims and completes under the overrides: the first row on the
/// overridden queue with the overridden priority, the claim holding a second
/// run back (one slot), the attempt's timeout the overridden one, the next
/// step due after the overridden wait; the registry records the overridden
/// options digest and the overrides.
async fn an_overridden_definition_is_placed_limited_and_registered<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let runner = Runner::new(store.clone(), WORKER)
        .register(Pair)
        .overrides(deployed())
        .expect("the overrides fit");
    let definition = runner.definition("contract.pair").expect("registered");
    assert_ne!(definition.options_digest, Pair::DEFINITION.options_digest);
    assert_eq!(definition.digest, Pair::DEFINITION.digest);
    assert_eq!(runner.claimed_queues(), ["contract_deployed".to_owned()]);
    store
        .register_worker(&Registration {
            worker_id: WORKER,
            name: WORKER,
            host: "test",
            pid: 0,
            queues: runner.claimed_queues(),
            concurrency: 2,
            definitions: &runner.definitions(),
            queue_limits: &[],
        })
        .await
        .expect("a registration");

    let mut runs = Vec::new();
    for input in [1, 2] {
        let (run, _) = store
            .start_run(definition, &serde_json::json!(input), &StartOptions::new())
            .await
            .expect("a start");
        runs.push(run);
    }
    let view = store
        .run(runs[0], RunRead::default())
        .await
        .expect("the run");
    assert_eq!(view.options_digest, definition.options_digest);
    let first = &view.steps[0];
    assert_eq!(
        (first.queue.as_str(), first.priority),
        ("contract_deployed", 4)
    );

    let claims = runner
        .claim(runner.claimed_queues(), 2)
        .await
        .expect("the claim");
    assert_eq!(claims.len(), 1, "one slot: {claims:?}");
    let claim = &claims[0];
    assert_eq!(claim.timeout_ms, Some(300_000));
    let now = store
        .run(claim.run_id, RunRead::default())
        .await
        .expect("the run")
        .steps[0]
        .started_at
        .expect("claimed");
    store
        .end_attempt(
            definition,
            claim,
            WORKER,
            &AttemptResult::ok(Verb::Complete, None),
            false,
            None,
        )
        .await
        .expect("the outcome");
    let view = store
        .run(claim.run_id, RunRead::default())
        .await
        .expect("the run");
    let second = view.steps.last().expect("the next row");
    assert_eq!(second.step_name, "second");
    assert_eq!(second.scheduled_at, now + chrono::Duration::minutes(1));
    assert_eq!(second.queue, "contract_deployed");

    // The slot is free again: the other run's first step is claimed now
    // (the second step is not due for a minute).
    let next = runner
        .claim(runner.claimed_queues(), 2)
        .await
        .expect("the claim");
    assert_eq!(
        next.iter()
            .map(|c| c.step_name.as_str())
            .collect::<Vec<_>>(),
        ["first"]
    );

    let registered = clocked.registered(WORKER).await;
    assert_eq!(registered.len(), 1);
    assert_eq!(
        registered[0].options_digest.as_deref(),
        Some(definition.options_digest)
    );
    assert_eq!(
        registered[0].overrides,
        Some(serde_json::json!({
            "queue": "contract_deployed", "priority": 4, "concurrency": 1,
            "steps": {"first": {"timeout_ms": 300_000}, "second": {"wait_ms": 60_000}},
        }))
    );
}

both_stores!(an_overridden_definition_is_placed_limited_and_registered);
