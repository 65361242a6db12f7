//! Group commit: the outcomes of several slots that arrive together share one
//! transaction on one connection, and one `COMMIT`.
//!
//! An outcome joins the open group of its store, or opens one (a pooled
//! connection, `BEGIN` queued on it). Each member runs its own statements on
//! the group's connection as it would on a transaction of its own: its run
//! lock, its fence and writes (pipelined). The driver queues the members'
//! statements on the one connection, so they share round trips as well. The
//! member that finishes last ends the group: `COMMIT` if every member's
//! statements succeeded, `ROLLBACK` if any failed; each member learns the end
//! before it returns. No member waits for an outcome that has not arrived:
//! a group takes members only while one of its members is still running its
//! statements, and at most [`MAX_MEMBERS`], so a lone outcome commits as soon
//! as it is done, as before. The idea is the group commit of database logs
//! (the members of a group share one flush), and River's batched completer.
//!
//! What keeps a member's outcome its own:
//! - **The run lock still excludes.** Two members of one group share a
//!   transaction, so Postgres does not make one wait for the other's lock.
//!   A group therefore takes no two members of the same run, and no fan-out
//!   child (whose outcome locks its parent, which a sibling may lock too):
//!   such a member leaves the group before it writes anything and ends alone
//!   once the group has ended (its run lock is the group's until then). A
//!   claim does not say whether its run is a child, so a child learns it
//!   from its lock statement, which locks nothing for it in a group
//!   (`lock_run.sql`), and so waits for its group's end before it ends.
//! - **Only writes that need no read.** A member whose change reads before it
//!   writes (a cancel, open steps to cancel, a park, a run that ended) leaves
//!   the group the same way.
//! - **One member's failure is not another's.** A member whose fence did not
//!   hold (its writes went out with it), or whose statement failed, makes the
//!   group roll back; every member then ends alone, each with its own
//!   transaction, as without groups. So does a member cancelled midway.
//! - **A lost reply.** When `COMMIT`'s answer is lost the members do not know
//!   whether it committed; each ends alone as an outcome retried after a lost
//!   reply does (see `end_attempt`).

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use deadpool_postgres::{ClientWrapper, Object, Pool};
use tokio::sync::watch;

use super::PgStore;
use super::fence::Fence;
use super::outcome::{AttemptEnd, Attempted};
use crate::error::Error;
use crate::pg::tx::Tx;
use crate::store::Ended;

/// The most outcomes one group takes. A member waits, at most, for the
/// statements of the members that joined while it ran its own.
pub(crate) const MAX_MEMBERS: usize = 8;

/// How a group ended, as each member learns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GroupEnd {
    /// Every member's change is in.
    Committed,
    /// No member's change is in.
    RolledBack,
    /// `COMMIT` went out and its answer did not come back.
    Unknown,
}

/// The groups of one store (shared by its clones): the one taking members,
/// held weakly, so that a group's connection goes back to the pool once its
/// members and its end are done with it.
#[derive(Default)]
pub(crate) struct Groups {
    open: Mutex<Weak<Group>>,
}

impl fmt::Debug for Groups {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Groups").finish_non_exhaustive()
    }
}

/// One shared transaction.
struct Group {
    client: Object,
    state: Mutex<State>,
    end: watch::Sender<Option<GroupEnd>>,
}

struct State {
    /// Members that joined.
    joined: usize,
    /// Members still running their statements.
    running: usize,
    /// Whether it still takes members.
    open: bool,
    /// Whether a member failed, or was dropped midway.
    failed: bool,
    /// The runs its members locked.
    runs: HashSet<i64>,
    /// Whether `COMMIT` or `ROLLBACK` was sent.
    ended: bool,
}

/// A member of a group: runs its statements on [`Member::client`], then
/// [`Member::finish`]es. Dropped before it finished (its future cancelled),
/// it fails the group.
pub(crate) struct Member {
    group: Arc<Group>,
    finished: bool,
}

impl Groups {
    /// Joins the open group, or opens one on a connection of `pool`.
    ///
    /// # Errors
    /// The pool's, when it has no connection to give.
    pub(crate) async fn join(&self, pool: &Pool) -> Result<Member, Error> {
        if let Some(group) = lock(&self.open).upgrade() {
            let mut state = lock(&group.state);
            if state.open && state.joined < MAX_MEMBERS {
                state.joined += 1;
                state.running += 1;
                drop(state);
                return Ok(Member {
                    group,
                    finished: false,
                });
            }
        }
        let client = pool.get().await?;
        // Queued now, answered with the first statement; an error there
        // (the connection is gone) comes back with that statement's.
        drop(super::super::tx::send(&client, "BEGIN"));
        let group = Arc::new(Group {
            client,
            state: Mutex::new(State {
                joined: 1,
                running: 1,
                open: true,
                failed: false,
                runs: HashSet::new(),
                ended: false,
            }),
            end: watch::Sender::new(None),
        });
        *lock(&self.open) = Arc::downgrade(&group);
        Ok(Member {
            group,
            finished: false,
        })
    }
}

impl Member {
    /// The group's connection, for this member's statements.
    pub(crate) fn client(&self) -> &ClientWrapper {
        &self.group.client
    }

    /// Records that this member locked `run_id`; `false` when another member
    /// of the group holds it already (then this member must leave the group
    /// without writing).
    pub(crate) fn take_run(&self, run_id: i64) -> bool {
        lock(&self.group.state).runs.insert(run_id)
    }

    /// Says this member's statements are done (`ok`) or failed, and waits for
    /// the group's end: the last member to finish sends `COMMIT` (or
    /// `ROLLBACK`, when a member failed) on a task of its own, which a
    /// cancelled member does not stop.
    pub(crate) async fn finish(mut self, ok: bool) -> GroupEnd {
        self.finished = true;
        let group = Arc::clone(&self.group);
        if let Some(commit) = group.leave(ok) {
            let ending = Arc::clone(&group);
            tokio::spawn(async move {
                let end = if commit {
                    match ending.client.batch_execute("COMMIT").await {
                        Ok(()) => GroupEnd::Committed,
                        // The server refused it: nothing of it stands.
                        Err(error) if error.as_db_error().is_some() => GroupEnd::RolledBack,
                        Err(_) => GroupEnd::Unknown,
                    }
                } else {
                    let _ = ending.client.batch_execute("ROLLBACK").await;
                    GroupEnd::RolledBack
                };
                ending.end.send_replace(Some(end));
            });
        }
        let mut ended = group.end.subscribe();
        match ended.wait_for(Option::is_some).await {
            Ok(end) => end.unwrap_or(GroupEnd::Unknown),
            // The task was dropped with the runtime: nobody knows.
            Err(_) => GroupEnd::Unknown,
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Cancelled midway: whatever it sent may be half a change.
        if self.group.leave(false).is_some() {
            // The last one: roll back now, without waiting for the answer.
            drop(super::super::tx::send(&self.group.client, "ROLLBACK"));
            self.group.end.send_replace(Some(GroupEnd::RolledBack));
        }
    }
}

impl Group {
    /// One member leaves; for the last, whether the group commits (`true`)
    /// or rolls back, and the group takes no more members.
    fn leave(&self, ok: bool) -> Option<bool> {
        let mut state = lock(&self.state);
        state.running -= 1;
        state.failed |= !ok;
        if state.running > 0 {
            return None;
        }
        state.open = false;
        state.ended = true;
        Some(!state.failed)
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Unreachable through `Member`, which ends every group it leaves
        // last; kept so that no connection goes back to the pool inside a
        // transaction whatever happens.
        if !self
            .state
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .ended
        {
            drop(super::super::tx::send(&self.client, "ROLLBACK"));
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl PgStore {
    /// An outcome in a group (see `group.rs`).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn end_in_group(&self, groups: &Groups, end: AttemptEnd<'_>) -> Grouped {
        let Ok(member) = groups.join(&self.pool).await else {
            return Grouped::Alone;
        };
        let attempted = {
            let tx = Tx::joined(member.client());
            self.end_attempt_in(&tx, end, Fence::Pipelined, Some(&member))
                .await
        };
        let (ok, ended) = match attempted {
            Ok(Attempted::Ended(ended)) => (true, Some(ended)),
            Ok(Attempted::Elsewhere) => (true, None),
            // Alone, it fails again and says why, or goes the late way.
            Ok(Attempted::Undo) | Err(_) => (false, None),
        };
        match (member.finish(ok).await, ended) {
            (GroupEnd::Committed, Some(ended)) => Grouped::Ended(ended),
            (GroupEnd::Unknown, Some(_)) => Grouped::Unknown,
            _ => Grouped::Alone,
        }
    }
}

/// How an outcome fared in a group.
pub(super) enum Grouped {
    /// Committed with the group.
    Ended(Ended),
    /// Not in: end it alone.
    Alone,
    /// The group's `COMMIT` went out and its answer was lost.
    Unknown,
}
