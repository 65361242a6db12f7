//! A run as a wait for its result reads it.

use serde_json::Value;

use super::{PgStore, parse_stored};
use crate::context::RunId;
use crate::engine::{RunStatus, StepStatus};
use crate::error::Error;
use crate::view::{LastAttempt, REASON_EVENTS_READ, ResultView};

impl PgStore {
    /// `run_result.sql`: one statement on a pooled connection. Not a
    /// [`Guarded`](crate::pg::cancel::Guarded) one: the read takes no lock
    /// and ends in an index probe or two, so a caller that drops the wait
    /// mid-read leaves nothing running worth a cancel request, and the
    /// connection goes back to the pool (tokio-postgres discards the reply
    /// of a dropped query).
    pub(crate) async fn run_result(&self, run_id: RunId) -> Result<ResultView, Error> {
        let mut client = self.pool.get().await?;
        let statement = self.prep.on(&mut client, &self.sql.run_result).await?;
        let Some(row) = statement
            .query_opt(&client, &[&run_id.0, &REASON_EVENTS_READ])
            .await?
        else {
            return Err(Error::RunNotFound { run_id });
        };
        let status: RunStatus = parse_stored(&row.get::<_, String>("status"))?;
        let step_status: Option<String> = row.get("step_status");
        let last_attempt = match step_status {
            Some(text) => Some(LastAttempt {
                step_name: row.get("step_name"),
                attempt: row.get("attempt"),
                status: parse_stored::<StepStatus>(&text)?,
                output: row.try_get::<_, Option<Value>>("output").map_err(|e| {
                    Error::Corrupt(format!(
                        "column `output`: {}",
                        crate::error::display_chain(&e)
                    ))
                })?,
            }),
            None => None,
        };
        Ok(ResultView {
            run_id,
            workflow: row.get("workflow"),
            status,
            last_attempt,
            reason: row.get("reason"),
            error_class: row.get("error_class"),
            error_message: row.get("error_message"),
        })
    }
}
