//! The store's transaction: `BEGIN` sent, not awaited, so it reaches the
//! server in the same write as the transaction's first statement and costs no
//! round trip of its own.
//!
//! tokio-postgres's `Client::transaction` awaits the server's answer to
//! `BEGIN` before it hands out the transaction, so every transaction of the
//! store began with a round trip that carried nothing else: one of the five an
//! outcome took. A [`Tx`] queues `BEGIN` on the connection at once (the
//! driver writes a request to its connection task on the future's first
//! poll) and reads the answer when the transaction ends; a statement run on
//! the `Tx` is queued behind it, so the server runs them in that order. The
//! idea is libpq's pipeline mode (PostgreSQL 14), where an application sends
//! `BEGIN` and its statements without waiting for each result.
//!
//! Ending: [`Tx::commit`] and [`Tx::rollback`] queue their statement at
//! once, then read `BEGIN`'s answer and their own, so a caller that gives up
//! while they wait leaves no transaction open. A `Tx` dropped before either (its future cancelled) queues a
//! `ROLLBACK` in its drop, as the driver's own transaction does, so the
//! connection goes back to the pool with no transaction open: the pool hands
//! it out again only after the `ROLLBACK` is queued, and the connection sends
//! requests in the order they were queued.

use std::future::Future;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

use deadpool_postgres::ClientWrapper;

/// A request sent on the connection whose answer is read later.
pub(crate) type Pending<'a> =
    Pin<Box<dyn Future<Output = Result<(), tokio_postgres::Error>> + Send + 'a>>;

/// A transaction on a pooled connection; see the module docs. Derefs to the
/// connection, which statements run on as they would on the driver's
/// transaction.
pub(crate) struct Tx<'a> {
    client: &'a ClientWrapper,
    /// `BEGIN`, until its answer was read. In a mutex only so that a `&Tx`
    /// can cross threads (`Tx` is `Sync`): it is reached through `&mut self`
    /// alone, never locked.
    begin: Mutex<Option<Pending<'a>>>,
    /// Whether `COMMIT` or `ROLLBACK` went out.
    done: bool,
}

impl<'a> Tx<'a> {
    /// Opens a transaction on `client`: `BEGIN` is queued on the connection
    /// and not awaited. Borrows the connection mutably for the transaction's
    /// life, so nothing else runs on it meanwhile.
    pub(crate) fn begin(client: &'a mut ClientWrapper) -> Self {
        let client: &'a ClientWrapper = client;
        Self {
            client,
            begin: Mutex::new(Some(send(client, "BEGIN"))),
            done: false,
        }
    }

    /// Commits: `BEGIN`'s answer, then `COMMIT`'s.
    ///
    /// # Errors
    /// The driver's error when either failed (the connection broke, or the
    /// server refused the commit: a serialization failure in `SERIALIZABLE`,
    /// a deferred constraint).
    pub(crate) async fn commit(mut self) -> Result<(), tokio_postgres::Error> {
        let begin = self.begin_answer();
        // Queued before anything is awaited: a caller that gives up from
        // here on leaves no transaction open.
        let commit = send(self.client, "COMMIT");
        self.done = true;
        if let Some(begin) = begin {
            begin.await?;
        }
        commit.await
    }

    /// Runs the transaction's last statement and commits, `COMMIT` queued
    /// behind the statement before either answer is read: one round trip for
    /// both. `last` is given the connection and returns the statement's
    /// future, which must send its request on its first poll (the driver's
    /// statements do).
    ///
    /// # Errors
    /// `Statement` with the statement's error, `Commit` with `BEGIN`'s or
    /// `COMMIT`'s. Only an error the server sent
    /// ([`tokio_postgres::Error::as_db_error`]) says what happened: a
    /// statement it refused aborted the transaction, so its `COMMIT` rolled
    /// back, and a `COMMIT` it refused committed nothing. Any other (the
    /// connection broke) may have come after the server ran both: whether
    /// the transaction committed is not known, whichever answer failed.
    pub(crate) async fn commit_after<F, T, E>(
        mut self,
        last: impl FnOnce(&'a ClientWrapper) -> F,
    ) -> Result<T, CommitAfter<E>>
    where
        F: Future<Output = Result<T, E>>,
    {
        let begin = self.begin_answer();
        let mut last = std::pin::pin!(last(self.client));
        // The first poll queues the statement; only an error comes back at
        // once (the connection is closed).
        let early = last.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        let commit = send(self.client, "COMMIT");
        self.done = true;
        if let Some(begin) = begin {
            begin.await.map_err(CommitAfter::Commit)?;
        }
        let answered = match early {
            Poll::Ready(answered) => answered,
            Poll::Pending => last.await,
        };
        // Read even when the statement failed, so the connection's answers
        // stay in step; then it says only `ROLLBACK`.
        let committed = commit.await;
        let value = answered.map_err(CommitAfter::Statement)?;
        committed.map_err(CommitAfter::Commit)?;
        Ok(value)
    }

    /// Rolls back: `BEGIN`'s answer (an error there says only that the
    /// connection is gone, and the transaction with it), then `ROLLBACK`'s.
    ///
    /// # Errors
    /// The driver's error when `ROLLBACK` failed: the connection is gone.
    pub(crate) async fn rollback(mut self) -> Result<(), tokio_postgres::Error> {
        let begin = self.begin_answer();
        let rollback = send(self.client, "ROLLBACK");
        self.done = true;
        if let Some(begin) = begin {
            let _ = begin.await;
        }
        rollback.await
    }
}

impl<'a> Tx<'a> {
    /// `BEGIN`'s answer, if not read yet.
    fn begin_answer(&mut self) -> Option<Pending<'a>> {
        self.begin
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl Deref for Tx<'_> {
    type Target = ClientWrapper;

    fn deref(&self) -> &ClientWrapper {
        self.client
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.done {
            // Queued now; its answer is read by no one.
            drop(send(self.client, "ROLLBACK"));
        }
    }
}

/// How [`Tx::commit_after`] failed.
#[derive(Debug)]
pub(crate) enum CommitAfter<E> {
    /// The last statement failed: when the server refused it, nothing of
    /// the transaction stands.
    Statement(E),
    /// `BEGIN` or `COMMIT` failed.
    Commit(tokio_postgres::Error),
}

/// `sql` (a simple query) queued on `client`'s connection now; the future
/// reads its answer. The first poll queues the request (the driver sends
/// before it first waits), so it is polled once here with a waker that does
/// nothing: whoever awaits the future later polls it again with their own.
pub(crate) fn send<'a>(client: &'a ClientWrapper, sql: &'static str) -> Pending<'a> {
    let mut request: Pending<'a> = Box::pin(client.batch_execute(sql));
    match request
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        // Only an error comes back at once (the connection is closed): kept
        // for whoever reads the answer.
        Poll::Ready(result) => Box::pin(std::future::ready(result)),
        Poll::Pending => request,
    }
}

#[cfg(test)]
mod tests {
    use std::pin::pin;

    use super::*;
    use crate::{Clock, Database, Schema};

    async fn connection() -> deadpool_postgres::Object {
        let url = std::env::var("PGBUS_TEST_DATABASE_URL")
            .unwrap_or_else(|_| "postgres://127.0.0.1:5432/test".to_owned());
        let db = Database::connect_with(
            &url,
            Schema::new("tx_unused").expect("valid"),
            Clock::Database,
        )
        .await
        .expect("connect");
        let client = db.pool().get().await.expect("connection");
        client
            .batch_execute("CREATE TEMP TABLE written (n int)")
            .await
            .expect("a table of this connection's own");
        client
    }

    /// Whether `client` is inside a transaction: two statements that see the
    /// same transaction id.
    async fn in_transaction(client: &ClientWrapper) -> bool {
        let id = "SELECT pg_current_xact_id()::text";
        let first: String = client.query_one(id, &[]).await.expect("id").get(0);
        let second: String = client.query_one(id, &[]).await.expect("id").get(0);
        first == second
    }

    async fn written(client: &ClientWrapper) -> i64 {
        client
            .query_one("SELECT count(*) FROM written", &[])
            .await
            .expect("count")
            .get(0)
    }

    #[tokio::test]
    async fn statements_run_inside_and_commit_ends_it() {
        let mut client = connection().await;
        let tx = Tx::begin(&mut client);
        assert!(in_transaction(&tx).await, "BEGIN went out before them");
        tx.execute("INSERT INTO written VALUES (1)", &[])
            .await
            .expect("insert");
        tx.commit().await.expect("commit");
        assert!(!in_transaction(&client).await, "no transaction left open");
        assert_eq!(written(&client).await, 1);
    }

    #[tokio::test]
    async fn rollback_undoes_what_it_wrote() {
        let mut client = connection().await;
        let tx = Tx::begin(&mut client);
        tx.execute("INSERT INTO written VALUES (1)", &[])
            .await
            .expect("insert");
        tx.rollback().await.expect("rollback");
        assert!(!in_transaction(&client).await);
        assert_eq!(written(&client).await, 0);
    }

    #[tokio::test]
    async fn a_transaction_dropped_midway_is_rolled_back_before_the_next_use() {
        let mut client = connection().await;
        {
            // Its caller gave up while the insert was on the wire: polled
            // once (BEGIN and the insert sent), then dropped.
            let mut cancelled = pin!(async {
                let tx = Tx::begin(&mut client);
                tx.execute("INSERT INTO written VALUES (1)", &[]).await?;
                tx.commit().await
            });
            let polled = cancelled
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()));
            assert!(polled.is_pending(), "nothing answered yet");
        }
        assert!(!in_transaction(&client).await, "the ROLLBACK went first");
        assert_eq!(written(&client).await, 0);
        // And a transaction dropped before any statement.
        drop(Tx::begin(&mut client));
        assert!(!in_transaction(&client).await);
    }

    #[tokio::test]
    async fn a_commit_or_rollback_given_up_midway_leaves_no_transaction_open() {
        let mut client = connection().await;
        for commit in [true, false] {
            {
                // Ended before any answer came back, `BEGIN`'s included.
                let tx = Tx::begin(&mut client);
                let mut ending = pin!(async move {
                    if commit {
                        tx.commit().await
                    } else {
                        tx.rollback().await
                    }
                });
                // Polled once (waiting for the answers), then dropped.
                let polled = ending
                    .as_mut()
                    .poll(&mut Context::from_waker(Waker::noop()));
                assert!(polled.is_pending());
            }
            assert!(!in_transaction(&client).await, "commit: {commit}");
        }
    }
}
