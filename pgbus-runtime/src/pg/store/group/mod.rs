//! Group commit: the outcomes of several slots that arrive together are
//! applied by one transaction of two statements and one `COMMIT`.
//!
//! An outcome that a group can take (see [`takes`]) is handed to its store's
//! [`Groups`] and waits for its reply. A group starts at once when fewer than
//! [`MAX_RUNNING`] groups are running, with every outcome waiting (at most
//! [`MAX_MEMBERS`]); otherwise the outcome waits for the next group, which
//! starts as soon as a running one ends. So no outcome waits on a timer, and a
//! lone outcome starts its group as soon as it arrives; outcomes group only
//! while the database is busy with earlier ones, which is when sharing a
//! transaction saves the most. The idea is the group commit of database logs
//! (the members of a group share one flush), River's batched completer and
//! graphile-worker's batched completions.
//!
//! A group's transaction, on one pooled connection:
//! 1. `BEGIN` and `lock_runs.sql`, in one round trip: every member's run
//!    locked and read, skipping runs another transaction holds, so a group
//!    never waits for a lock. The engine plans each member's outcome from
//!    its run, as for an outcome alone.
//! 2. `end_group.sql` and `COMMIT`, in one round trip: every member fenced on
//!    its own claim, and each member's writes (its step row ended, its next
//!    row, its run row, its events, its queue woken) joined to its own fence,
//!    so that a member whose fence did not hold writes nothing and leaves the
//!    others as they are. Row counts are checked inside the statement, which
//!    fails when one is off, and `COMMIT` then rolls back.
//!
//! What keeps a member's outcome its own:
//! - **Only outcomes that need no read before they write.** A park, a
//!   consumed signal, a retried outcome and every ending by the sweep go
//!   alone, as without groups; so does a member whose plan reads first (open
//!   steps to cancel, a cancel's tree), whose run ended, or whose run is a
//!   fan-out child (its outcome locks its parent first, which another member
//!   may lock too), and a second member of the same run. A member whose run
//!   the group did not lock is answered as soon as the runs are locked; one
//!   whose run it locked waits for the group's end, then ends alone.
//! - **A held run.** A member whose run another transaction holds (an
//!   operator's action, a fan-out child's ending) ends alone at once,
//!   waiting for that run only; the others are not held up.
//! - **Flow control.** A member whose step or run holds a flow slot, or whose
//!   run is not `performing`, ends alone: giving back a slot takes its keys'
//!   advisory locks in a trigger, and two groups taking several members'
//!   keys could wait on each other in a circle.
//! - **A late member** (its fence did not hold) is not written, and ends
//!   alone: a late completion, as without groups.
//! - **A failed group** (a statement's error, a deadlock, no connection)
//!   writes nothing; every member then ends alone. When `COMMIT`'s answer is
//!   lost, every member ends alone as an outcome retried after a lost reply
//!   (see `end_attempt`).
//! - **A caller that gives up.** A group runs on a task of its own, so a
//!   caller that stops waiting does not stop it: an outcome whose caller is
//!   gone before its group starts is left out (nothing written, as when a
//!   transaction of its own is dropped); one whose caller leaves later is
//!   applied, and a step it handed on to its worker, which will never learn
//!   of it, is put back in its queue (`release_handoff.sql`, with the run
//!   locked first) once every member has its reply.
//! - **Lost answers.** `COMMIT` goes out behind the writes, so a connection
//!   that breaks before either answer is read leaves the group's end
//!   unknown; every member then ends as a retry (only a statement the server
//!   refused is known to have rolled back).

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use chrono::{DateTime, Utc};
use serde_json::Value;
use tokio::sync::oneshot;
use tracing::debug;

mod columns;

use columns::Columns;

use super::change::writes_without_reading;

use super::outcome::{hands_on, run_state_of};
use super::{PgStore, parse_stored};
use crate::definition::WorkflowDefinition;
use crate::engine::{
    AttemptResult, AttemptState, Gate, Plan, RunStatus, carries_over, continued_claim, plan_outcome,
};
use crate::error::Error;
use crate::pg::tx::{CommitAfter, Tx};
use crate::store::{Claim, Ended, Handoff};

/// The most outcomes one group takes.
pub(crate) const MAX_MEMBERS: usize = 32;

/// The most groups of one store running at once, each on a connection of its
/// own: while they run, outcomes gather for the next.
pub(crate) const MAX_RUNNING: usize = 2;

/// The groups of one store (shared by its clones): the outcomes waiting for
/// the next group, and how many groups are running.
#[derive(Default)]
pub(crate) struct Groups {
    queue: Mutex<Queue>,
    /// Told when the last running group task ends.
    idle: tokio::sync::Notify,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Member>,
    running: usize,
}

impl fmt::Debug for Groups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Groups").finish_non_exhaustive()
    }
}

/// Whether a group can take an outcome at all: a first try (not a retry
/// after a lost reply) that neither parks nor consumes a signal.
pub(super) fn takes(result: &AttemptResult, retrying: bool) -> bool {
    !retrying
        && result.park.is_none()
        && !matches!(result.gate, Some(Gate::Signal { fresh: true, .. }))
}

/// An outcome handed to a group: what its statements need, owned, since the
/// group runs on a task of its own.
pub(super) struct Member {
    definition: &'static WorkflowDefinition,
    step_id: i64,
    run_id: i64,
    workflow: String,
    step_name: String,
    attempt: i32,
    reattempts: i32,
    worker_id: String,
    result: AttemptResult,
    /// The pinned time of the store's clock, if any.
    now: Option<DateTime<Utc>>,
    /// The worker's queues and stall threshold (ms), when it offers to take
    /// the next step and the claim's values carry over (see `hands_on`).
    handoff: Option<(Vec<String>, i64)>,
    /// Where its reply goes; taken when it is sent before the group ends.
    reply: Option<oneshot::Sender<Reply>>,
}

/// What a group did with a member.
pub(super) enum Reply {
    /// Applied and committed.
    Ended(Box<Applied>),
    /// Not written: end it alone.
    Alone,
    /// The group's `COMMIT` went out and its answer was lost.
    Unknown,
}

/// A member's committed outcome.
pub(super) struct Applied {
    plan: Plan,
    kept_output: Option<Value>,
    /// The step handed on to the member's worker, if one was.
    next_id: Option<i64>,
    /// The transition's time.
    now: DateTime<Utc>,
}

impl Applied {
    /// The ending the caller of `end_attempt` gets, as an outcome alone gives
    /// it.
    pub(super) fn ended(self, claimed: &Claim, result: &AttemptResult) -> Ended {
        let Self {
            plan,
            kept_output,
            next_id,
            now,
        } = self;
        match (next_id, plan.next.as_ref()) {
            (Some(next_id), Some(next)) => {
                let continued =
                    continued_claim(claimed, &plan, next, result, kept_output, next_id, now);
                Ended::Continued(Box::new(plan), Box::new(continued))
            }
            _ => Ended::Applied(Box::new(plan)),
        }
    }
}

impl Member {
    /// The member for `claimed`'s outcome, and where its reply comes.
    pub(super) fn new(
        definition: &'static WorkflowDefinition,
        claimed: &Claim,
        worker_id: &str,
        result: &AttemptResult,
        now: Option<DateTime<Utc>>,
        handoff: Option<Handoff<'_>>,
    ) -> (Self, oneshot::Receiver<Reply>) {
        let (reply, replied) = oneshot::channel();
        let handoff = handoff
            .filter(|_| carries_over(claimed, result))
            .map(|h| (h.queues.to_vec(), h.stall_threshold_ms));
        let member = Self {
            definition,
            step_id: claimed.step_id,
            run_id: claimed.run_id.0,
            workflow: claimed.workflow.clone(),
            step_name: claimed.step_name.clone(),
            attempt: claimed.attempt,
            reattempts: claimed.reattempts,
            worker_id: worker_id.to_owned(),
            result: result.clone(),
            now,
            handoff,
            reply: Some(reply),
        };
        (member, replied)
    }
}

impl Groups {
    /// Hands `member` to the next group of `store`, and starts a task to run
    /// it if fewer than [`MAX_RUNNING`] run. The task takes its members when
    /// it first runs, so outcomes handed over meanwhile join the same group.
    pub(super) fn submit(self: &Arc<Self>, store: &PgStore, member: Member) {
        {
            let mut queue = lock(&self.queue);
            queue.waiting.push(member);
            if queue.running >= MAX_RUNNING {
                return;
            }
            queue.running += 1;
        }
        let mut running = Running {
            groups: Arc::clone(self),
            counted: true,
        };
        let store = store.clone();
        let groups = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let members = {
                    let mut queue = lock(&groups.queue);
                    if queue.waiting.is_empty() {
                        // In the same critical section as the look: an
                        // outcome handed over after it starts a task.
                        queue.running -= 1;
                        running.disarm();
                        if queue.running == 0 {
                            groups.idle.notify_waiters();
                        }
                        return;
                    }
                    let n = queue.waiting.len().min(MAX_MEMBERS);
                    queue.waiting.drain(..n).collect::<Vec<_>>()
                };
                store.run_group(members).await;
            }
        });
    }
}

impl Groups {
    /// Returns once no group runs and none waits: every reply sent, every
    /// step of a caller that left put back.
    #[cfg(test)]
    pub(crate) async fn settled(&self) {
        loop {
            let notified = self.idle.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            {
                let queue = lock(&self.queue);
                if queue.running == 0 && queue.waiting.is_empty() {
                    return;
                }
            }
            notified.await;
        }
    }
}

/// A running group task's place in the count, given up when the task is
/// dropped midway (the runtime stopping, a panic): the last task to go drops
/// whatever still waits, whose callers then end alone as after a lost reply,
/// so nothing waits for a task that is gone.
struct Running {
    groups: Arc<Groups>,
    counted: bool,
}

impl Running {
    /// Already out of the count.
    fn disarm(&mut self) {
        self.counted = false;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        let mut queue = lock(&self.groups.queue);
        queue.running -= 1;
        if queue.running == 0 {
            queue.waiting.clear();
            self.groups.idle.notify_waiters();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A member the group writes, with what its statements need.
struct Taken {
    /// Its place in the group's members.
    index: usize,
    plan: Plan,
    /// Whether its next step is handed to its worker.
    hands_on: bool,
}

impl PgStore {
    /// Runs one group: its transaction, then each member's reply. A member
    /// whose caller left after the group started, and whose outcome handed a
    /// step on, gets that step put back in its queue.
    async fn run_group(&self, members: Vec<Member>) {
        let members: Vec<Member> = members
            .into_iter()
            .filter(|m| m.reply.as_ref().is_some_and(|r| !r.is_closed()))
            .collect();
        if members.is_empty() {
            return;
        }
        let mut members = members;
        let mut replies = match self.end_group(&mut members).await {
            Ok(replies) => {
                let written = replies
                    .iter()
                    .filter(|r| matches!(r, Reply::Ended(_)))
                    .count();
                debug!(target: "pgbus_runtime::worker", { pgbus.members = members.len(), pgbus.written = written }, "a group of outcomes committed");
                replies
            }
            Err(GroupFailed { unknown, error }) => {
                debug!(target: "pgbus_runtime::worker", { error = %error, pgbus.members = members.len() }, "a group of outcomes failed; each ends alone");
                members
                    .iter()
                    .map(|_| {
                        if unknown {
                            Reply::Unknown
                        } else {
                            Reply::Alone
                        }
                    })
                    .collect()
            }
        };
        // Every reply first, so that no member waits on another's put-back.
        let mut left = Vec::new();
        for (member, reply) in members.into_iter().zip(replies.drain(..)) {
            let handed = match &reply {
                Reply::Ended(applied) => applied.next_id.is_some(),
                Reply::Alone | Reply::Unknown => false,
            };
            let Member {
                run_id,
                step_id,
                worker_id,
                now,
                reply: sender,
                ..
            } = member;
            // `None`: answered before the group ended (it locked nothing).
            let Some(sender) = sender else { continue };
            if sender.send(reply).is_err() && handed {
                left.push((run_id, step_id, worker_id, now));
            }
        }
        for (run_id, step_id, worker_id, now) in left {
            if let Err(error) = self.put_back(run_id, step_id, &worker_id, now).await {
                debug!(target: "pgbus_runtime::worker", { error = %error }, "could not put back a step handed to a caller that left; the sweep will");
            }
        }
    }

    /// Puts back in its queue the step the outcome of attempt `step_id` (of
    /// run `run_id`) handed to `worker_id`, whose caller left: with the run
    /// locked first, as every transition of a run (see
    /// `release_handoff.sql`).
    async fn put_back(
        &self,
        run_id: i64,
        step_id: i64,
        worker_id: &str,
        now: Option<DateTime<Utc>>,
    ) -> Result<(), Error> {
        let mut client = self.pool.get().await?;
        let tx = Tx::begin(&mut client);
        if self
            .lock_run(&tx, crate::context::RunId(run_id), now)
            .await?
            .is_some()
        {
            self.release_handoff(&tx, run_id, step_id, worker_id)
                .await?;
        }
        tx.commit().await.map_err(Error::from)
    }

    /// The group's transaction (see the module docs); a reply per member, in
    /// order.
    async fn end_group(&self, members: &mut [Member]) -> Result<Vec<Reply>, GroupFailed> {
        let failed = |error: Error| GroupFailed {
            unknown: false,
            error,
        };
        let mut client = self.pool.get().await.map_err(|e| failed(e.into()))?;
        let tx = Tx::begin(&mut client);
        let lock = self
            .prep
            .in_tx(&tx, &self.sql.lock_runs)
            .await
            .map_err(failed)?;
        let run_ids: Vec<i64> = members.iter().map(|m| m.run_id).collect();
        // The group's statements take their generic plan (as claims do, see
        // `claim.rs`), sent with the lock: planned afresh, `end_group.sql`
        // costs the server more than it takes to run.
        let setting = async {
            tx.batch_execute(super::claim::GENERIC_PLAN)
                .await
                .map_err(Error::from)
        };
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 2] = [&run_ids, &members[0].now];
        let query = lock.query(&tx, &params);
        let runs = tokio::try_join!(biased; setting, query).map_err(failed)?.1;
        // A member whose run was not locked (a fan-out child, a run held
        // elsewhere or not `performing`) ends alone at once: the group holds
        // nothing of it.
        for member in members.iter_mut() {
            let locked = runs
                .iter()
                .any(|row| row.get::<_, i64>("id") == member.run_id);
            if !locked && let Some(sender) = member.reply.take() {
                let _ = sender.send(Reply::Alone);
            }
        }
        let members: &[Member] = members;
        // Each row reads the clock as it is locked: the last, once all are.
        let Some(now) = runs
            .iter()
            .map(|row| row.get::<_, DateTime<Utc>>("now"))
            .max()
        else {
            let _ = tx.rollback().await;
            return Ok(members.iter().map(|_| Reply::Alone).collect());
        };
        let taken = plan_members(members, &runs).map_err(failed)?;
        if taken.is_empty() {
            let _ = tx.rollback().await;
            return Ok(members.iter().map(|_| Reply::Alone).collect());
        }
        let write = self
            .prep
            .in_tx(&tx, &self.sql.end_group)
            .await
            .map_err(failed)?;
        let columns = Columns::of(members, &taken);
        let channel = self.schema.channel();
        let rows = tx
            .commit_after(|client| {
                let params = columns.params(&now, &channel);
                async move {
                    write
                        .query(&crate::pg::statement::Caller(&**client), &params)
                        .await
                }
            })
            .await
            .map_err(|error| match error {
                // A refusal by the server: the queued `COMMIT` rolled back.
                // Any other failure (the connection broke) may have come
                // after the server ran both: not known.
                CommitAfter::Statement(error) => GroupFailed {
                    unknown: !refused(&error),
                    error,
                },
                CommitAfter::Commit(error) => GroupFailed {
                    unknown: error.as_db_error().is_none(),
                    error: error.into(),
                },
            })?;
        let mut replies: Vec<Reply> = members.iter().map(|_| Reply::Alone).collect();
        let mut plans: Vec<Option<Plan>> = members.iter().map(|_| None).collect();
        for t in taken {
            plans[t.index] = Some(t.plan);
        }
        for row in rows {
            let ordinal: i64 = row.get("i");
            let Some(index) = usize::try_from(ordinal - 1)
                .ok()
                .and_then(|at| columns.members.get(at).copied())
            else {
                continue;
            };
            let Some(plan) = plans[index].take() else {
                continue;
            };
            replies[index] = Reply::Ended(Box::new(Applied {
                plan,
                kept_output: row.get("kept_output"),
                next_id: row.get("next_id"),
                now,
            }));
        }
        Ok(replies)
    }
}

/// Whether `error` is the server's refusal of a statement, after which
/// nothing of its transaction stands.
fn refused(error: &Error) -> bool {
    matches!(error, Error::Database(db) if db.as_db_error().is_some())
}

/// Why a group wrote nothing it can vouch for: `unknown` when its `COMMIT`
/// went out and the answer was lost.
struct GroupFailed {
    unknown: bool,
    error: Error,
}

/// The members a group writes, planned from their locked runs (`runs`,
/// `lock_runs.sql` rows); the rest end alone.
fn plan_members(members: &[Member], runs: &[tokio_postgres::Row]) -> Result<Vec<Taken>, Error> {
    let mut seen = HashSet::new();
    let mut taken = Vec::with_capacity(members.len());
    for (index, member) in members.iter().enumerate() {
        let Some(run) = runs
            .iter()
            .find(|row| row.get::<_, i64>("id") == member.run_id)
        else {
            // A fan-out child, or a run deleted meanwhile.
            continue;
        };
        if !seen.insert(member.run_id) {
            continue;
        }
        let status: RunStatus = parse_stored(&run.get::<_, String>("status"))?;
        if status.is_terminal() {
            continue;
        }
        let run_state = run_state_of(run, status)?;
        let state = AttemptState {
            step_name: member.step_name.clone(),
            attempt: member.attempt,
            reattempts: member.reattempts,
        };
        let plan = plan_outcome(member.definition, &run_state, &state, &member.result);
        // `lock_runs.sql` locks no fan-out child.
        if !writes_without_reading(plan.cancel_open_steps, plan.run_status, None) {
            continue;
        }
        let hands_on = match &member.handoff {
            Some((queues, _)) => hands_on(
                run,
                &run_state,
                &plan,
                &member.workflow,
                queues,
                member.definition,
            )?,
            None => false,
        };
        taken.push(Taken {
            index,
            plan,
            hands_on,
        });
    }
    Ok(taken)
}
