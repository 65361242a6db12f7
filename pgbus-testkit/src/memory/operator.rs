//! The operator's reads beside runs, as the Postgres store answers them:
//! workflow names, bounded counts, the overview, the limits in force and
//! the newest activity.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, DurationRound, Utc};
use pgbus_runtime::engine::flow::{RateKey, SlotKey};
use pgbus_runtime::engine::{RunStatus, StepStatus};
use pgbus_runtime::{
    Client, ConcurrencyNow, Error, EventKind, KeyNow, LimitsNow, MinuteCounts, Overview, QueueNow,
    RateNow, RunCount, RunFilter, SlotHolder, WorkflowNow,
};

use super::Rows;

/// A queue's due rows, the oldest's due time, held rows, attempts in flight.
type QueueTally = (usize, Option<DateTime<Utc>>, usize, usize);

impl Rows {
    /// As `Client::workflows`.
    pub(crate) fn workflows(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .runs
            .values()
            .map(|run| run.summary.workflow.clone())
            .chain(self.definitions.values().map(|d| d.name.to_owned()))
            .collect();
        names.sort();
        names.dedup();
        names.truncate(usize::try_from(Client::WORKFLOWS_MAX).unwrap_or(usize::MAX));
        names
    }

    /// As `Client::count_runs`.
    pub(crate) fn count_runs(&self, filter: &RunFilter, cap: u32) -> Result<RunCount, Error> {
        let path = filter
            .input_path
            .as_deref()
            .map(super::path::Path::parse)
            .transpose()?;
        let read = if path.is_some() {
            RunFilter::INPUT_SCAN
        } else {
            i64::from(cap.clamp(1, RunCount::MAX_CAP)) + 1
        };
        let kept: Vec<_> = self
            .runs
            .values()
            .rev()
            .filter(|run| {
                filter.before.is_none_or(|before| run.summary.id < before)
                    && filter.after.is_none_or(|after| run.summary.id > after)
                    && filter.keeps(&self.related(run), run.idempotency_key.as_deref())
            })
            .take(usize::try_from(read).unwrap_or(usize::MAX))
            .collect();
        let scanned = i64::try_from(kept.len()).unwrap_or(i64::MAX);
        let matched = kept
            .iter()
            .filter(|run| path.as_ref().is_none_or(|p| p.matches(&run.input)))
            .count();
        Ok(RunCount::of(
            scanned,
            i64::try_from(matched).unwrap_or(i64::MAX),
            cap,
            path.is_some(),
        ))
    }

    /// As `Client::overview`, on the virtual clock.
    pub(crate) fn overview(&self) -> Overview {
        let now = self.now;
        let cap = Overview::COUNT_CAP;
        let capped = |n: usize| i64::try_from(n).unwrap_or(i64::MAX).min(cap);

        let mut by_workflow: BTreeMap<&str, [usize; 3]> = BTreeMap::new();
        let mut by_status = [0_usize; 3];
        for run in self.runs.values() {
            let slot = match run.summary.status {
                RunStatus::Ready => 0,
                RunStatus::Performing => 1,
                RunStatus::Paused => 2,
                _ => continue,
            };
            by_workflow.entry(&run.summary.workflow).or_default()[slot] += 1;
            by_status[slot] += 1;
        }
        // As the store: with at most `WORKFLOWS` names in all (ended runs'
        // too), every name is read and nothing is cut; with more, the names
        // come from at most `COUNT_CAP` runs per status and at most
        // `WORKFLOWS` are kept, either bound reached saying the list may be
        // cut.
        let most = usize::try_from(Overview::WORKFLOWS).unwrap_or(usize::MAX);
        let every_name: std::collections::BTreeSet<&str> = self
            .runs
            .values()
            .map(|run| run.summary.workflow.as_str())
            .collect();
        let workflows_cut = every_name.len() > most
            && (by_workflow.len() > most
                || by_status
                    .iter()
                    .any(|&n| i64::try_from(n).unwrap_or(i64::MAX) > cap));
        let workflows = by_workflow
            .into_iter()
            .take(most)
            .map(|(name, [ready, performing, paused])| {
                WorkflowNow::new(
                    name.to_owned(),
                    capped(ready),
                    capped(performing),
                    capped(paused),
                )
            })
            .collect();

        let queues = self.queues_now(capped);

        let from = now - Duration::hours(1);
        let in_hour = |at: DateTime<Utc>| at > from && at <= now;
        let minute = |at: DateTime<Utc>| at.duration_trunc(Duration::minutes(1)).unwrap_or(at);
        let mut minutes: BTreeMap<DateTime<Utc>, [i64; 3]> = BTreeMap::new();
        let mut failed = 0;
        for run in self.runs.values() {
            let ended = run
                .summary
                .finished_at
                .or(run.cancelled_at)
                .unwrap_or(run.summary.created_at);
            match run.summary.status {
                RunStatus::Finished if in_hour(ended) => {
                    minutes.entry(minute(ended)).or_default()[0] += 1;
                }
                RunStatus::Cancelled if in_hour(ended) => {
                    minutes.entry(minute(ended)).or_default()[1] += 1;
                }
                RunStatus::Paused
                    if run.error_class.is_some() && run.paused_at.is_some_and(in_hour) =>
                {
                    failed += 1;
                }
                _ => {}
            }
            for event in &run.events {
                if event.event == EventKind::Paused && in_hour(event.created_at) {
                    minutes.entry(minute(event.created_at)).or_default()[2] += 1;
                }
            }
        }
        let minutes: Vec<MinuteCounts> = minutes
            .into_iter()
            .map(|(at, [finished, cancelled, paused])| {
                MinuteCounts::new(at, finished, cancelled, paused)
            })
            .collect();
        let cancelled = minutes.iter().map(|m| m.cancelled).sum();
        let pauses = minutes.iter().map(|m| m.paused).sum();
        Overview::new(
            now,
            workflows,
            queues,
            (cancelled, failed.min(cap), pauses),
            minutes,
        )
        .with_workflows_cut(workflows_cut)
    }

    /// The overview's queues: due rows of `ready` runs, held rows and
    /// attempts in flight, per queue.
    fn queues_now(&self, capped: impl Fn(usize) -> i64) -> Vec<QueueNow> {
        let now = self.now;
        let mut by_queue: BTreeMap<&str, QueueTally> = BTreeMap::new();
        for step in self.steps.values() {
            let view = &step.view;
            let open = matches!(view.status, StepStatus::Scheduled | StepStatus::Waiting);
            if open && step.held.is_some() {
                by_queue.entry(&view.queue).or_default().2 += 1;
            } else if view.status == StepStatus::Scheduled
                && view.scheduled_at <= now
                && self.run_status(step.run_id) == Some(RunStatus::Ready)
            {
                let entry = by_queue.entry(&view.queue).or_default();
                entry.0 += 1;
                entry.1 = Some(
                    entry
                        .1
                        .map_or(view.scheduled_at, |t| t.min(view.scheduled_at)),
                );
            } else if view.status == StepStatus::InProgress {
                by_queue.entry(&view.queue).or_default().3 += 1;
            }
        }
        by_queue
            .into_iter()
            .map(|(queue, (due, oldest, held, flying))| {
                QueueNow::new(
                    queue.to_owned(),
                    capped(due),
                    oldest,
                    capped(held),
                    capped(flying),
                )
            })
            .collect()
    }

    /// As `Client::limits`, on the virtual clock.
    pub(crate) fn limits(&self) -> LimitsNow {
        let most = usize::try_from(LimitsNow::LIMITS_MAX).unwrap_or(usize::MAX);
        let capped = |n: usize| {
            i64::try_from(n)
                .unwrap_or(i64::MAX)
                .min(LimitsNow::COUNT_CAP)
        };
        let mut concurrency = Vec::new();
        let mut rates = Vec::new();
        for (workflow, declared) in self.flow.workflows() {
            let named = || Some(workflow.to_owned());
            if let Some(limit) = declared.concurrency {
                concurrency.push(ConcurrencyNow::new(
                    format!("workflow:{workflow}"),
                    named(),
                    i64::from(limit.max_in_flight),
                    limit.holder,
                ));
            }
            if let Some(limit) = declared.key_concurrency {
                concurrency.push(ConcurrencyNow::new(
                    format!("key:{workflow}"),
                    named(),
                    i64::from(limit.max_in_flight),
                    limit.holder,
                ));
            }
            let window = |key: &RateKey, period_ms: u64| {
                let from =
                    self.now - Duration::milliseconds(i64::try_from(period_ms).unwrap_or(i64::MAX));
                let starts = self
                    .windows
                    .get(key)
                    .map_or(0, |log| log.iter().filter(|t| **t > from).count());
                i64::try_from(starts).unwrap_or(i64::MAX)
            };
            let rate = |limit: String, rate: pgbus_runtime::Rate, starts: Option<i64>| {
                RateNow::new(
                    limit,
                    workflow.to_owned(),
                    (
                        i64::from(rate.count),
                        i64::try_from(rate.period_ms).unwrap_or(i64::MAX),
                    ),
                    starts,
                )
            };
            if let Some(r) = declared.rate {
                let key = RateKey::Workflow(workflow.to_owned());
                rates.push(rate(key.to_string(), r, Some(window(&key, r.period_ms))));
            }
            for (step, r) in &declared.steps {
                let key = RateKey::Step {
                    workflow: workflow.to_owned(),
                    step: step.clone(),
                };
                rates.push(rate(key.to_string(), *r, Some(window(&key, r.period_ms))));
            }
            if let Some(r) = declared.key_rate {
                rates.push(rate(format!("key:{workflow}"), r, None));
            }
        }
        for (queue, max) in self.flow.queues() {
            concurrency.push(ConcurrencyNow::new(
                format!("queue:{queue}"),
                None,
                i64::from(max),
                SlotHolder::Step,
            ));
        }
        concurrency.sort_by(|a, b| a.limit.cmp(&b.limit));
        concurrency.truncate(most);
        rates.sort_by(|a, b| a.limit.cmp(&b.limit));
        rates.truncate(most);

        let limit_of = |key: &SlotKey| match key {
            SlotKey::Key { workflow, .. } => format!("key:{workflow}"),
            other => other.to_string(),
        };
        let mut keys: BTreeMap<(String, String), (i64, i64)> = BTreeMap::new();
        for (key, runs) in &self.holders {
            keys.entry((limit_of(key), key.to_string())).or_default().0 = capped(runs.len());
        }
        for (key, rows) in &self.held {
            keys.entry((limit_of(key), key.to_string())).or_default().1 = capped(rows.len());
        }
        let keys = keys
            .into_iter()
            .filter(|(_, (in_flight, held))| *in_flight > 0 || *held > 0)
            .take(usize::try_from(LimitsNow::KEYS_MAX).unwrap_or(usize::MAX))
            .map(|((limit, key), (in_flight, held))| KeyNow::new(key, limit, in_flight, held))
            .collect();
        LimitsNow::new(self.now, concurrency, keys, rates)
    }

    /// As `Client::newest_activity`.
    pub(crate) fn newest_activity(&self) -> Option<DateTime<Utc>> {
        self.runs
            .values()
            .next_back()
            .map(|run| run.summary.created_at)
    }
}
