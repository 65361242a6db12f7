//! The limits in force and what each holds (issue 23), read alike from
//! both stores: the concurrency and rate limits workers registered, per
//! concurrency key its slots held and rows held back, per rate of one
//! window its starts inside the window ending now.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::store::Store;
use pgbus_runtime::{FlowControl, KeyNow, LimitsNow, Rate, SlotHolder, WorkflowDefinition};

use super::flow::{Flowing, QUEUE, claim, complete, register, start};
use super::{Clocked, Pinned, memory};

/// Three slots for the workflow, one per concurrency key, five starts a
/// minute for the workflow and two per key.
static LIMITED: WorkflowDefinition = WorkflowDefinition {
    flow: FlowControl {
        concurrency: Some(3),
        has_key: true,
        key_concurrency: Some(1),
        rate_limit: Some(Rate {
            count: 5,
            period_ms: 60_000,
        }),
        key_rate_limit: Some(Rate {
            count: 2,
            period_ms: 60_000,
        }),
        ..FlowControl::NONE
    },
    ..*<Flowing as Workflow>::DEFINITION
};

fn uses(limits: &LimitsNow) -> Vec<(&str, &str, i64, i64)> {
    limits
        .keys
        .iter()
        .map(|k: &KeyNow| (k.limit.as_str(), k.key.as_str(), k.in_flight, k.held))
        .collect()
}

/// Nothing registered: nothing in force. Then three runs of key `a` and
/// one of `b`: the claim admits one of each key and holds the other two
/// `a` rows; the read names every limit, each key's slots and held rows,
/// and the workflow rate's two starts, until the window passes them.
async fn the_limits_read_what_each_key_holds<C: Clocked>(clocked: C) {
    let store = clocked.store();
    let none = store.limits().await.expect("the limits");
    assert!(
        none.concurrency.is_empty() && none.keys.is_empty() && none.rates.is_empty(),
        "{none:?}"
    );
    register(store, &[&LIMITED], &[(QUEUE.to_owned(), 4)]).await;
    let mut runs = Vec::new();
    for key in ["a", "a", "a", "b"] {
        runs.push(start(store, &LIMITED, Some(key)).await);
    }
    let claimed = claim(store, &[&LIMITED], 8).await;
    assert_eq!(claimed.len(), 2, "{claimed:?}");

    let limits = store.limits().await.expect("the limits");
    let concurrency: Vec<_> = limits
        .concurrency
        .iter()
        .map(|c| {
            (
                c.limit.as_str(),
                c.workflow.as_deref(),
                c.max_in_flight,
                c.holder,
            )
        })
        .collect();
    assert_eq!(
        concurrency,
        vec![
            (
                "key:contract.flow",
                Some("contract.flow"),
                1,
                SlotHolder::Step
            ),
            ("queue:contract_flow", None, 4, SlotHolder::Step),
            (
                "workflow:contract.flow",
                Some("contract.flow"),
                3,
                SlotHolder::Step
            ),
        ]
    );
    assert_eq!(
        uses(&limits),
        vec![
            ("key:contract.flow", "key:contract.flow:a", 1, 2),
            ("key:contract.flow", "key:contract.flow:b", 1, 0),
            ("queue:contract_flow", "queue:contract_flow", 2, 0),
            ("workflow:contract.flow", "workflow:contract.flow", 2, 0),
        ]
    );
    assert_eq!(limits.keys_of("key:contract.flow").count(), 2);
    let rates: Vec<_> = limits
        .rates
        .iter()
        .map(|r| {
            (
                r.limit.as_str(),
                r.workflow.as_str(),
                r.max_starts,
                r.period_ms,
                r.starts_in_window,
            )
        })
        .collect();
    assert_eq!(
        rates,
        vec![
            ("key:contract.flow", "contract.flow", 2, 60_000, None),
            (
                "workflow:contract.flow",
                "contract.flow",
                5,
                60_000,
                Some(2)
            ),
        ]
    );

    // A minute on, the starts have left the window; a slot given back
    // lets one held row go, and the key shows the one still held.
    clocked.advance(Duration::from_secs(61));
    let first_a = claimed
        .iter()
        .find(|c| c.run_id == runs[0])
        .expect("the first run of key a");
    complete(store, &LIMITED, first_a).await;
    let later = store.limits().await.expect("the limits");
    assert_eq!(later.at - limits.at, chrono::Duration::seconds(61));
    assert_eq!(later.rates[1].starts_in_window, Some(0));
    assert_eq!(
        uses(&later),
        vec![
            ("key:contract.flow", "key:contract.flow:a", 0, 1),
            ("key:contract.flow", "key:contract.flow:b", 1, 0),
            ("queue:contract_flow", "queue:contract_flow", 1, 0),
            ("workflow:contract.flow", "workflow:contract.flow", 1, 0),
        ]
    );
}

both_stores!(the_limits_read_what_each_key_holds);
