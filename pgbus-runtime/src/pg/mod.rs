//! The Postgres side: schema names, SQL statements, migrations and the store that
//! applies the engine's plans.

pub(crate) mod cancel;
mod migrate;
mod start;
mod start_many;
pub(crate) mod statement;
pub(crate) mod store;
pub(crate) mod tx;

use std::fmt;

pub use migrate::{MIGRATIONS, Migration, migrate, migrate_schema};

use crate::error::Error;

/// A validated schema name: 1 to [`MAX_SCHEMA_NAME_LEN`] (57) lowercase ASCII
/// letters, digits and `_`, not starting with a digit nor with `pg_` (Postgres
/// reserves those). The default is `pgbus`; tests use one schema each.
///
/// 57, not Postgres's 63: every identifier derived from the name must fit in
/// 63 bytes too, and the longest is the workers' `NOTIFY` channel,
/// `pgbus_<schema>`.
///
/// Schema names are spliced into SQL (identifiers cannot be bound as parameters),
/// so only this narrow, always-safe shape is accepted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schema(String);

/// The longest schema name, in bytes: Postgres's identifier limit (63) less
/// the `pgbus_` of the channel derived from it.
pub const MAX_SCHEMA_NAME_LEN: usize = 63 - "pgbus_".len();

impl Schema {
    /// Validates `name`.
    ///
    /// # Errors
    /// [`Error::InvalidSchema`] when it is not a plain lowercase identifier.
    pub fn new(name: &str) -> Result<Self, Error> {
        let mut chars = name.chars();
        let valid = name.len() <= MAX_SCHEMA_NAME_LEN
            && chars
                .next()
                .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && !name.starts_with("pg_");
        if valid {
            Ok(Self(name.to_owned()))
        } else {
            Err(Error::InvalidSchema(name.to_owned()))
        }
    }

    /// The name.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The `LISTEN`/`NOTIFY` channel of this schema's workers.
    #[must_use]
    pub fn channel(&self) -> String {
        format!("pgbus_{}", self.0)
    }

    /// The `LISTEN`/`NOTIFY` channel on which this schema's runs say they
    /// ended (finished or cancelled) or paused: `ended_<schema>`, the run id
    /// as the payload, sent by a trigger on `runs` (migration 0014), so
    /// every path that ends a run notifies. What
    /// [`Client::result`](crate::Client::result) listens on. Six bytes of
    /// prefix, as `pgbus_`, so every valid schema name fits; a prefix that
    /// differs from the workers' in its first letter, so no schema's run-end
    /// channel is another schema's worker channel.
    #[must_use]
    pub fn result_channel(&self) -> String {
        format!("ended_{}", self.0)
    }

    /// `sql` with `{schema}` replaced by the quoted name.
    pub(crate) fn render(&self, sql: &str) -> String {
        sql.replace("{schema}", &format!("\"{}\"", self.0))
    }
}

impl Default for Schema {
    fn default() -> Self {
        Self("pgbus".to_owned())
    }
}

impl fmt::Display for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

macro_rules! statements {
    ($($name:ident => $file:literal),* $(,)?) => {
        /// Every statement, rendered for one schema. Each file in `sql/` names its
        /// placeholders in a comment at the top.
        #[derive(Debug)]
        pub(crate) struct Statements {
            $(pub(crate) $name: String,)*
        }

        impl Statements {
            pub(crate) fn new(schema: &Schema) -> Self {
                Self {
                    $($name: schema.render(include_str!(concat!("sql/", $file))),)*
                }
            }
        }

        /// Every statement's file name and text, unrendered.
        #[cfg(test)]
        pub(crate) fn sql_sources() -> Vec<(&'static str, &'static str)> {
            vec![$(($file, include_str!(concat!("sql/", $file))),)*]
        }
    };
}

statements! {
    start_run => "start_run.sql",
    find_run_by_key => "find_run_by_key.sql",
    start_many => "start_many.sql",
    find_runs_by_keys => "find_runs_by_keys.sql",
    claim => "claim.sql",
    claim_limited => "claim_limited.sql",
    next_due => "next_due.sql",
    lock_run => "lock_run.sql",
    lock_runs => "lock_runs.sql",
    end_group => "end_group.sql",
    end_attempt => "end_attempt.sql",
    update_run => "update_run.sql",
    insert_step => "insert_step.sql",
    cancel_open_steps => "cancel_open_steps.sql",
    insert_events => "insert_events.sql",
    notify => "notify.sql",
    get_run => "get_run.sql",
    run_steps => "run_steps.sql",
    run_events => "run_events.sql",
    list_runs => "list_runs.sql",
    list_runs_by_workflow => "list_runs_by_workflow.sql",
    count_runs => "count_runs.sql",
    workflows => "workflows.sql",
    overview_workflows => "overview_workflows.sql",
    overview_queues => "overview_queues.sql",
    overview_hour => "overview_hour.sql",
    limits_in_force => "limits_in_force.sql",
    limit_keys => "limit_keys.sql",
    rates_in_force => "rates_in_force.sql",
    newest_activity => "newest_activity.sql",
    register_worker => "register_worker.sql",
    late_completion => "late_completion.sql",
    stalled => "stalled.sql",
    heartbeat => "heartbeat.sql",
    latest_step => "latest_step.sql",
    skip_step => "skip_step.sql",
    delete_expired_runs => "delete_expired_runs.sql",
    delete_worker => "delete_worker.sql",
    outcome_recorded => "outcome_recorded.sql",
    release_orphans => "release_orphans.sql",
    release_handoff => "release_handoff.sql",
    lock_signalled_run => "lock_signalled_run.sql",
    send_signal => "send_signal.sql",
    park_step => "park_step.sql",
    gate_inputs => "gate_inputs.sql",
    consume_signal => "consume_signal.sql",
    start_children => "start_children.sql",
    count_child => "count_child.sql",
    lock_children => "lock_children.sql",
    cancel_children => "cancel_children.sql",
    resolve_batches => "resolve_batches.sql",
    run_signals => "run_signals.sql",
    run_batches => "run_batches.sql",
    run_counts => "run_counts.sql",
    run_status_counts => "run_status_counts.sql",
    step_insights => "step_insights.sql",
    slowest_steps => "slowest_steps.sql",
    undefined_steps => "undefined_steps.sql",
    pause_undefined => "pause_undefined.sql",
    list_workers => "list_workers.sql",
    deploy_positions => "deploy_positions.sql",
    live_definitions => "live_definitions.sql",
    lock_schedule => "lock_schedule.sql",
    lock_due_schedule => "lock_due_schedule.sql",
    due_schedules => "due_schedules.sql",
    list_schedules => "list_schedules.sql",
    delete_schedule => "delete_schedule.sql",
    insert_schedule => "insert_schedule.sql",
    update_schedule => "update_schedule.sql",
    mark_scheduled_run => "mark_scheduled_run.sql",
    store_now => "store_now.sql",
    run_result => "run_result.sql",
    expiring_runs => "expiring_runs.sql",
    spend_deadline => "spend_deadline.sql",
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod vocabulary;
