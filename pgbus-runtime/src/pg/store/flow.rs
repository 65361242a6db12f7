//! Flow control in the Postgres store: the limits a registration writes
//! (`flow_limits`, `rate_limits`) and the rows a claim held back or
//! throttled, counted in the metrics. The admission itself is the claim's
//! (`claim.sql` and `flow_admit` in migration 0016).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::definition::{SlotHolder, WorkflowDefinition};
use crate::error::Error;

/// The limits a worker's registration writes: `(concurrency, rates)`, each a
/// JSON array of rows. Concurrency: `{"key", "workflow", "max", "holder"}`
/// for `workflow:<W>` and `key:<W>` (the per-key limit) of each definition,
/// and `queue:<Q>` (`workflow` null, holder `step`) for each of
/// `queue_limits` (the last of a queue declared twice wins). Rates:
/// `{"key", "workflow", "max", "period_ms"}` for `workflow:<W>`, `key:<W>`
/// and `step:<W>/<step>` of each entry with a `rate_limit`.
pub(super) fn declared_limits(
    definitions: &[&'static WorkflowDefinition],
    queue_limits: &[(String, u32)],
) -> (Value, Value) {
    let mut concurrency = Vec::new();
    let mut rates = Vec::new();
    for definition in definitions {
        let flow = &definition.flow;
        let name = definition.name;
        let holder = match flow.slot {
            SlotHolder::Step => "step",
            SlotHolder::Run => "run",
        };
        let mut limit = |key: String, max: Option<u32>| {
            if let Some(max) = max {
                concurrency
                    .push(json!({ "key": key, "workflow": name, "max": max, "holder": holder }));
            }
        };
        limit(format!("workflow:{name}"), flow.concurrency);
        limit(format!("key:{name}"), flow.key_concurrency);
        let mut rate = |key: String, rate: Option<crate::definition::Rate>| {
            if let Some(rate) = rate {
                rates.push(json!({
                    "key": key,
                    "workflow": name,
                    "max": rate.count,
                    "period_ms": rate.period_ms,
                }));
            }
        };
        rate(format!("workflow:{name}"), flow.rate_limit);
        rate(format!("key:{name}"), flow.key_rate_limit);
        for entry in definition.entries {
            rate(
                format!("step:{name}/{}", entry.name),
                entry.options.rate_limit,
            );
        }
    }
    let queues: BTreeMap<&str, u32> = queue_limits
        .iter()
        .map(|(queue, max)| (queue.as_str(), *max))
        .collect();
    for (queue, max) in queues {
        concurrency.push(json!({
            "key": format!("queue:{queue}"),
            "workflow": null,
            "max": max,
            "holder": "step",
        }));
    }
    (Value::Array(concurrency), Value::Array(rates))
}

/// What a claim held back (`held`: at a concurrency limit) or throttled (a
/// rate window): rows per workflow, verdict and scope, summed over its rounds.
#[derive(Debug, Default)]
pub(super) struct HeldBack {
    rows: BTreeMap<(String, String, String), u64>,
}

impl HeldBack {
    /// Adds a round's `flow` column (`[[workflow, verdict, scope, rows], ...]`);
    /// how many rows it held back or throttled.
    pub(super) fn add(&mut self, flow: Value) -> Result<i64, Error> {
        let rounds: Vec<(String, String, String, i64)> = serde_json::from_value(flow)
            .map_err(|e| Error::Corrupt(format!("claim: column `flow`: {e}")))?;
        let mut total = 0_i64;
        for (workflow, verdict, scope, rows) in rounds {
            total = total.saturating_add(rows);
            *self.rows.entry((workflow, verdict, scope)).or_default() +=
                u64::try_from(rows).unwrap_or(0);
        }
        Ok(total)
    }

    /// Counts the rows in [`STEPS_HELD`](crate::metric::STEPS_HELD) and
    /// [`STEPS_THROTTLED`](crate::metric::STEPS_THROTTLED), labelled by
    /// workflow and scope (never by key: a key's values are unbounded).
    pub(super) fn record(self) {
        for ((workflow, verdict, scope), rows) in self.rows {
            let name = if verdict == "throttled" {
                crate::metric::STEPS_THROTTLED
            } else {
                crate::metric::STEPS_HELD
            };
            metrics::counter!(name, "workflow" => workflow, "scope" => scope).increment(rows);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_back_rows_add_up_over_rounds() {
        let mut held = HeldBack::default();
        let first = json!([["w", "held", "key", 3], ["w", "throttled", "step", 1]]);
        assert_eq!(held.add(first).unwrap(), 4);
        assert_eq!(held.add(json!([["w", "held", "key", 2]])).unwrap(), 2);
        assert_eq!(held.add(json!([])).unwrap(), 0);
        assert_eq!(
            held.rows
                .get(&("w".into(), "held".into(), "key".into()))
                .copied(),
            Some(5)
        );
        assert!(held.add(json!({"not": "rows"})).is_err());
    }
}
