//! The columns `end_group.sql` takes: one element per member a group
//! writes, and one per event.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::super::change::{EventRows, StepRef};
use super::{Member, Taken};
use crate::engine::RunStatus;

/// The columns of `end_group.sql`: one element per member written, and one
/// per event.
#[derive(Default)]
pub(super) struct Columns {
    /// The member each element is, by its place in the group's members.
    pub(super) members: Vec<usize>,
    step_ids: Vec<i64>,
    attempts: Vec<i32>,
    worker_ids: Vec<String>,
    statuses: Vec<&'static str>,
    outcomes: Vec<&'static str>,
    outputs: Vec<Option<Value>>,
    error_classes: Vec<Option<String>>,
    error_messages: Vec<Option<String>>,
    error_causes: Vec<Option<Value>>,
    run_ids: Vec<i64>,
    workflows: Vec<String>,
    run_statuses: Vec<&'static str>,
    current_steps: Vec<Option<String>>,
    run_error_classes: Vec<Option<String>>,
    run_error_messages: Vec<Option<String>>,
    next_steps: Vec<Option<String>>,
    next_attempts: Vec<Option<i32>>,
    next_reattempts: Vec<Option<i32>>,
    next_queues: Vec<Option<String>>,
    next_priorities: Vec<Option<i16>>,
    next_timeouts: Vec<Option<i64>>,
    next_delays: Vec<Option<i64>>,
    claimers: Vec<Option<String>>,
    stall_thresholds: Vec<Option<i64>>,
    wakes: Vec<bool>,
    event_members: Vec<i64>,
    events: EventRows,
}

impl Columns {
    pub(super) fn of(members: &[Member], taken: &[Taken]) -> Self {
        let mut c = Self {
            members: Vec::with_capacity(taken.len()),
            ..Self::default()
        };
        for (ordinal, t) in (1_i64..).zip(taken) {
            let m = &members[t.index];
            let plan = &t.plan;
            let error = m.result.error.as_ref();
            c.members.push(t.index);
            c.step_ids.push(m.step_id);
            c.attempts.push(m.attempt);
            c.worker_ids.push(m.worker_id.clone());
            c.statuses.push(plan.step_status.as_str());
            c.outcomes.push(plan.step_outcome.as_str());
            c.outputs.push(m.result.output.clone());
            c.error_classes.push(error.map(|e| e.class.clone()));
            c.error_messages.push(error.map(|e| e.message.clone()));
            c.error_causes
                .push(error.map(|e| Value::from(e.causes.clone())));
            c.run_ids.push(m.run_id);
            c.workflows.push(m.workflow.clone());
            // A run whose next step its worker takes is `performing`, as a
            // claim leaves it.
            c.run_statuses.push(if t.hands_on {
                RunStatus::Performing.as_str()
            } else {
                plan.run_status.as_str()
            });
            c.current_steps.push(plan.current_step.clone());
            c.run_error_classes
                .push(plan.run_error.as_ref().map(|e| e.class.clone()));
            c.run_error_messages
                .push(plan.run_error.as_ref().map(|e| e.message.clone()));
            let next = plan.next.as_ref();
            c.next_steps.push(next.map(|n| n.step_name.clone()));
            c.next_attempts.push(next.map(|n| n.attempt));
            c.next_reattempts.push(next.map(|n| n.reattempts));
            c.next_queues.push(next.map(|n| n.queue.clone()));
            c.next_priorities.push(next.map(|n| n.priority));
            c.next_timeouts.push(next.and_then(|n| n.timeout_ms));
            c.next_delays
                .push(next.map(|n| i64::try_from(n.delay_ms).unwrap_or(i64::MAX)));
            let handed = t.hands_on.then_some(m.handoff.as_ref()).flatten();
            c.claimers.push(handed.map(|_| m.worker_id.clone()));
            c.stall_thresholds.push(handed.map(|(_, ms)| *ms));
            // Wake workers even for a delayed step (they learn its due time);
            // a step handed to this worker wakes no one.
            c.wakes
                .push(next.is_some() && plan.run_status == RunStatus::Ready && !t.hands_on);
            let step = StepRef {
                id: m.step_id,
                name: &m.step_name,
                attempt: m.attempt,
            };
            let rows = EventRows::of(&plan.events, &step);
            c.event_members
                .extend(std::iter::repeat_n(ordinal, rows.events.len()));
            c.events.extend(rows);
        }
        c
    }

    /// `end_group.sql`'s parameters.
    pub(super) fn params<'p>(
        &'p self,
        now: &'p DateTime<Utc>,
        channel: &'p String,
    ) -> Vec<&'p (dyn tokio_postgres::types::ToSql + Sync)> {
        vec![
            &self.step_ids,
            &self.attempts,
            &self.worker_ids,
            &self.statuses,
            &self.outcomes,
            &self.outputs,
            &self.error_classes,
            &self.error_messages,
            &self.error_causes,
            now,
            &self.run_ids,
            &self.workflows,
            &self.run_statuses,
            &self.current_steps,
            &self.run_error_classes,
            &self.run_error_messages,
            &self.next_steps,
            &self.next_attempts,
            &self.next_reattempts,
            &self.next_queues,
            &self.next_priorities,
            &self.next_timeouts,
            &self.next_delays,
            &self.claimers,
            &self.stall_thresholds,
            &self.wakes,
            &self.event_members,
            &self.events.step_ids,
            &self.events.step_names,
            &self.events.attempts,
            &self.events.events,
            &self.events.reasons,
            &self.events.details,
            channel,
        ]
    }
}
