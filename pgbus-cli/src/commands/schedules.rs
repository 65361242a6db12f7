//! `pgbus schedules`: list, show, create, update, pause, resume and delete
//! schedules (see `pgbus_runtime::schedule`).

use std::fmt::Write as _;

use comfy_table::Cell;
use pgbus_runtime::Database;
use pgbus_runtime::schedule::{CatchUp, Schedule, ScheduleUpdate, ScheduleView};

use super::text::{json_visible, render};
use super::{BoxError, time, visible};
use crate::output::Output;

/// What `pgbus schedules` does.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum ScheduleCommand {
    /// Lists schedules by name: workflow, expression, zone, catch-up policy,
    /// next and last tick, the last run, and whether paused.
    List {
        /// Only schedules of this workflow.
        #[arg(long)]
        workflow: Option<String>,
        /// At most this many (1 to 1000).
        #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=1000))]
        limit: u32,
        /// JSON, one array, instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// One schedule, every field.
    Show {
        /// The schedule's name.
        name: String,
        /// JSON instead of lines.
        #[arg(long)]
        json: bool,
    },
    /// Creates a schedule: each tick of CRON (six fields with seconds, or
    /// five) in ZONE starts a run of WORKFLOW with INPUT, fired by the workers
    /// that registered WORKFLOW.
    Create {
        /// The schedule's name (1 to 200 characters).
        name: String,
        /// The workflow each tick starts.
        #[arg(long)]
        workflow: String,
        /// The cron expression, e.g. `0 */5 * * * *`.
        #[arg(long)]
        cron: String,
        /// The IANA time zone the expression reads wall-clock time in.
        #[arg(long, default_value = "UTC")]
        timezone: String,
        /// Missed ticks: `skip`, `one` or `all(N)`.
        #[arg(long, default_value = "one", value_parser = parse_catch_up)]
        catch_up: CatchUp,
        /// The runs' input, as JSON (default `null`).
        #[arg(long, default_value = "null", value_parser = parse_json)]
        input: serde_json::Value,
    },
    /// Changes a schedule created through the client (a schedule declared in
    /// code changes in the code); the next tick is computed again from now.
    Update {
        /// The schedule's name.
        name: String,
        /// A new cron expression.
        #[arg(long)]
        cron: Option<String>,
        /// A new time zone.
        #[arg(long)]
        timezone: Option<String>,
        /// A new catch-up policy.
        #[arg(long, value_parser = parse_catch_up)]
        catch_up: Option<CatchUp>,
        /// A new input, as JSON.
        #[arg(long, value_parser = parse_json)]
        input: Option<serde_json::Value>,
    },
    /// Pauses a schedule: no tick fires until it is resumed (a pause of a
    /// schedule declared in code survives redeploys).
    Pause {
        /// The schedule's name.
        name: String,
        /// Why: kept on the schedule (1 to 10,000 characters).
        #[arg(long)]
        reason: String,
        /// Who: kept on the schedule (default `cli:$USER`).
        #[arg(long)]
        actor: Option<String>,
    },
    /// Resumes a schedule from its first tick after now (ticks while it was
    /// paused are not caught up).
    Resume {
        /// The schedule's name.
        name: String,
    },
    /// Deletes a schedule; its runs stay. A schedule declared in code comes
    /// back when a worker of its workflow next starts: remove it from the
    /// code first.
    Delete {
        /// The schedule's name.
        name: String,
    },
}

fn parse_catch_up(text: &str) -> Result<CatchUp, String> {
    text.parse()
        .map_err(|e: pgbus_runtime::schedule::ScheduleError| e.to_string())
}

fn parse_json(text: &str) -> Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

pub(super) async fn schedules(
    db: &Database,
    out: Output,
    command: ScheduleCommand,
) -> Result<(), BoxError> {
    let client = db.client();
    let changed = match command {
        ScheduleCommand::List {
            workflow,
            limit,
            json,
        } => {
            let limit = usize::try_from(limit).unwrap_or(usize::MAX);
            let listed = client.list_schedules(workflow.as_deref(), limit).await?;
            return list(out, &listed, limit, json);
        }
        ScheduleCommand::Show { name, json } => {
            let schedule = client.schedule(&name).await?;
            if json {
                return Ok(out.emit(&format!(
                    "{}\n",
                    json_visible(&serde_json::to_string_pretty(&schedule)?)
                ))?);
            }
            return Ok(out.emit(&details(&schedule))?);
        }
        ScheduleCommand::Create {
            name,
            workflow,
            cron,
            timezone,
            catch_up,
            input,
        } => {
            let schedule = Schedule::cron(cron).timezone(timezone).catch_up(catch_up);
            let created = client
                .create_schedule_of(&workflow, &name, &schedule, input)
                .await?;
            // Only a worker that registered the workflow fires it: say so
            // when none runs now (a typo in `--workflow` looks the same).
            let live = client
                .workers(std::time::Duration::from_secs(30), 1000)
                .await?;
            if !live
                .iter()
                .any(|worker| worker.workflows.iter().any(|w| w.workflow == workflow))
            {
                out.line(&out.warning(&format!(
                    "no live worker has registered workflow {}; the schedule fires once one does",
                    visible(&workflow)
                )))?;
            }
            ("created", created)
        }
        ScheduleCommand::Update {
            name,
            cron,
            timezone,
            catch_up,
            input,
        } => {
            let mut update = ScheduleUpdate::new();
            update.expression = cron;
            update.timezone = timezone;
            update.catch_up = catch_up;
            update.input = input;
            ("updated", client.update_schedule(&name, update).await?)
        }
        ScheduleCommand::Pause {
            name,
            reason,
            actor,
        } => {
            let actor = actor.unwrap_or_else(super::act::default_actor);
            (
                "paused",
                client.pause_schedule(&name, &actor, &reason).await?,
            )
        }
        ScheduleCommand::Resume { name } => ("resumed", client.resume_schedule(&name).await?),
        ScheduleCommand::Delete { name } => {
            let deleted = client.delete_schedule(&name).await?;
            return Ok(out.line(&format!("schedule {}: deleted", visible(&deleted.name)))?);
        }
    };
    let (verb, schedule) = changed;
    out.line(&format!(
        "schedule {}: {verb}; next tick {}",
        visible(&schedule.name),
        next_tick(&schedule)
    ))?;
    Ok(())
}

/// The next tick as a listing shows it.
fn next_tick(schedule: &ScheduleView) -> String {
    match (schedule.paused_at, schedule.next_tick_at) {
        (Some(_), _) => "- (paused)".to_owned(),
        (None, Some(at)) => time(at),
        (None, None) => "- (none ahead)".to_owned(),
    }
}

fn list(out: Output, listed: &[ScheduleView], limit: usize, json: bool) -> Result<(), BoxError> {
    if json {
        return Ok(out.emit(&format!(
            "{}\n",
            json_visible(&serde_json::to_string_pretty(listed)?)
        ))?);
    }
    if listed.is_empty() {
        return Ok(out.line("no schedules")?);
    }
    let mut table = out.table(&[
        "name",
        "workflow",
        "cron",
        "zone",
        "catch-up",
        "next tick",
        "last tick",
        "last run",
        "from",
    ]);
    for schedule in listed {
        table.add_row(vec![
            Cell::new(visible(&schedule.name)),
            Cell::new(visible(&schedule.workflow)),
            Cell::new(visible(&schedule.expression)),
            Cell::new(visible(&schedule.timezone)),
            Cell::new(visible(&schedule.catch_up)),
            Cell::new(next_tick(schedule)),
            Cell::new(schedule.last_tick_at.map_or_else(|| "-".to_owned(), time)),
            Cell::new(
                schedule
                    .last_run_id
                    .map_or_else(|| "-".to_owned(), |run| run.to_string()),
            ),
            Cell::new(schedule.origin.as_str()),
        ]);
    }
    let mut text = render(&table);
    if listed.len() == limit {
        write!(
            text,
            "\nthe first {limit}; `--limit` lists more (up to 1000)"
        )?;
    }
    text.push('\n');
    Ok(out.emit(&text)?)
}

/// Every field, one a line.
fn details(schedule: &ScheduleView) -> String {
    let or_dash =
        |at: Option<chrono::DateTime<chrono::Utc>>| at.map_or_else(|| "-".to_owned(), time);
    let mut text = String::new();
    let mut line = |key: &str, value: String| {
        let _ = writeln!(text, "{key:<14} {value}");
    };
    line("schedule", visible(&schedule.name));
    line("workflow", visible(&schedule.workflow));
    line("cron", visible(&schedule.expression));
    line("timezone", visible(&schedule.timezone));
    line("catch-up", visible(&schedule.catch_up));
    line("from", schedule.origin.as_str().to_owned());
    line(
        "input",
        visible(&super::clip(&schedule.input.to_string(), 2000)),
    );
    line("next tick", next_tick(schedule));
    line("last tick", or_dash(schedule.last_tick_at));
    line(
        "last run",
        schedule
            .last_run_id
            .map_or_else(|| "-".to_owned(), |run| run.to_string()),
    );
    line("last fired", or_dash(schedule.last_fired_at));
    line("ticks skipped", schedule.ticks_skipped.to_string());
    if let Some(at) = schedule.paused_at {
        line(
            "paused",
            format!(
                "{} by {}: {}",
                time(at),
                visible(schedule.paused_by.as_deref().unwrap_or("-")),
                visible(&super::clip(
                    schedule.paused_reason.as_deref().unwrap_or(""),
                    2000
                ))
            ),
        );
    }
    line("declared", or_dash(schedule.declared_at));
    line("created", time(schedule.created_at));
    line("updated", time(schedule.updated_at));
    text
}
