//! Starting runs in bulk, and a worker running in this process until told to
//! stop.

use std::time::{Duration, Instant};

use pgbus_runtime::{Client, RunId, Worker, Workflow};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::BoxError;

/// How many runs are started at once: enough to batch the commits (group
/// commit) without taking every connection of the engine's pool (16).
const STARTERS: u32 = 8;

/// A batch that makes no progress for this long is stuck, not slow.
const STUCK_AFTER: Duration = Duration::from_mins(1);

/// How long the in-memory reports may be quiet before the database is asked
/// whether the batch still progresses.
const QUIET: Duration = Duration::from_secs(5);

/// The run ids a batch of starts returned, lowest and highest: nothing else
/// starts runs of the schema meanwhile, so every run between them is the batch's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Started {
    pub(crate) first: RunId,
    pub(crate) last: RunId,
}

/// Starts `runs` runs of `W` with `STARTERS` concurrent callers.
pub(crate) async fn start_runs<W>(client: &Client, runs: u32) -> Result<Started, BoxError>
where
    W: Workflow<Input = ()>,
{
    let mut starters = tokio::task::JoinSet::new();
    for starter in 0..STARTERS {
        let client = client.clone();
        // Equal shares; the first `runs % STARTERS` starters take one more.
        let share = runs / STARTERS + u32::from(starter < runs % STARTERS);
        starters.spawn(async move {
            let mut ids = Vec::with_capacity(share as usize);
            for _ in 0..share {
                ids.push(client.start::<W>(&()).await?.run_id);
            }
            Ok::<_, pgbus_runtime::Error>(ids)
        });
    }
    let mut range: Option<Started> = None;
    while let Some(ids) = starters.join_next().await {
        for id in ids?? {
            range = Some(match range {
                None => Started {
                    first: id,
                    last: id,
                },
                Some(r) => Started {
                    first: r.first.min(id),
                    last: r.last.max(id),
                },
            });
        }
    }
    range.ok_or_else(|| "no runs to start".into())
}

/// A worker's `run_until` on a task of its own. Dropping it without
/// [`RunningWorker::stop`] aborts the loop (on an error path).
pub(crate) struct RunningWorker {
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), pgbus_runtime::Error>>,
}

impl RunningWorker {
    /// Runs `worker` until [`RunningWorker::stop`].
    pub(crate) fn spawn(worker: Worker) -> Self {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            worker
                .run_until(async {
                    let _ = stopped.await;
                })
                .await
        });
        Self {
            stop: Some(stop),
            task,
        }
    }

    /// Stops claiming, lets running bodies finish, and waits for the loop.
    pub(crate) async fn stop(mut self) -> Result<(), BoxError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        (&mut self.task).await??;
        Ok(())
    }
}

impl Drop for RunningWorker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Waits until `count` runs have reported their last step on `ended`: the
/// bodies ran; their outcomes may still be committing.
///
/// A batch started up front reports no end for a long while (claims take the
/// oldest due step first, so every run's first steps go before any run's
/// last), so a quiet channel alone does not mean stuck: when it has been quiet
/// for a while, `progress` (a count of step rows that only grows while the
/// worker works) decides.
pub(crate) async fn await_ended(
    ended: &mut mpsc::UnboundedReceiver<RunId>,
    count: u32,
    progress: &Progress<'_>,
) -> Result<(), BoxError> {
    let mut seen = 0;
    // Read only once quiet: while reports flow, the database is left alone.
    let mut last_progress = None;
    let mut quiet_since = Instant::now();
    while seen < count {
        match tokio::time::timeout(QUIET, ended.recv()).await {
            Ok(Some(_)) => {
                seen += 1;
                quiet_since = Instant::now();
            }
            Ok(None) => return Err("the workflow's report channel closed".into()),
            Err(_) => {
                let now = Some(progress.read().await?);
                if now != last_progress {
                    last_progress = now;
                    quiet_since = Instant::now();
                } else if quiet_since.elapsed() >= STUCK_AFTER {
                    return Err(format!(
                        "no step completed for {} s ({seen} of {count} runs ended): the worker is stuck",
                        STUCK_AFTER.as_secs()
                    )
                    .into());
                }
            }
        }
    }
    Ok(())
}

/// A count query that grows while a batch progresses, read only when the
/// batch has been quiet for a while (see [`await_ended`]).
pub(crate) struct Progress<'a> {
    pub(crate) admin: &'a tokio_postgres::Client,
    /// One `bigint` column.
    pub(crate) query: String,
    pub(crate) params: Vec<&'a (dyn tokio_postgres::types::ToSql + Sync)>,
}

impl Progress<'_> {
    async fn read(&self) -> Result<i64, BoxError> {
        Ok(self
            .admin
            .query_one(&self.query, &self.params)
            .await?
            .get(0))
    }
}

/// Polls `query` (one `bigint` column) until it returns `target`: what a
/// phase waits on after the in-memory reports, so its figures read committed
/// rows. `$1` and `$2` are bound to `params`.
pub(crate) async fn await_count(
    client: &tokio_postgres::Client,
    query: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    target: i64,
    every: Duration,
) -> Result<(), BoxError> {
    let statement = client.prepare(query).await?;
    let mut last = (i64::MIN, Instant::now());
    loop {
        let count: i64 = client.query_one(&statement, params).await?.get(0);
        if count >= target {
            return Ok(());
        }
        if count != last.0 {
            last = (count, Instant::now());
        } else if last.1.elapsed() > STUCK_AFTER {
            return Err(format!(
                "stuck at {count} of {target} for {} s: {query}",
                STUCK_AFTER.as_secs()
            )
            .into());
        }
        tokio::time::sleep(every).await;
    }
}
