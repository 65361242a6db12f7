//! A pooled connection whose statement in flight is cancelled when the
//! future using it is dropped: an operator page that gives up (a timed-out
//! request, a closed browser tab) must not leave its query running, or
//! waiting on a lock, on the server. (A process that exits at once, as the
//! command does on Ctrl-C, sends nothing: its statement ends at its
//! timeouts.)
//!
//! Dropping a tokio-postgres future does not stop the server's work: the
//! statement runs on until it ends or a timeout ends it, holding a backend
//! (and, queued behind a lock, piling up more of them). So a [`Guarded`]
//! connection dropped before [`Guarded::finish`] sends a cancel request
//! (PostgreSQL's out-of-band `CancelRequest`, through the same host and
//! TLS) and is then closed, never returned to the pool: a cancel that
//! arrived after the connection was handed to someone else would cancel
//! their statement instead.

use std::ops::{Deref, DerefMut};

use deadpool_postgres::{Object, Pool};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::connection::Connector;
use crate::error::Error;

/// A pooled connection that cancels its statement in flight if dropped
/// before [`Guarded::finish`].
pub(crate) struct Guarded {
    connection: Option<Object>,
    tls: Option<MakeRustlsConnect>,
}

impl Guarded {
    /// A connection from `pool`; `connector` is how the pool's connections
    /// were opened (`None` for a pool handed in alone, whose cancel requests
    /// go without TLS).
    pub(crate) async fn get(pool: &Pool, connector: Option<&Connector>) -> Result<Self, Error> {
        Ok(Self {
            connection: Some(pool.get().await?),
            tls: connector.map(|c| c.cancel_tls().clone()),
        })
    }

    /// The work is done, whatever its result: back to the pool as usual.
    pub(crate) fn finish(mut self) {
        // Dropped here, back into the pool.
        drop(self.connection.take());
    }
}

impl Deref for Guarded {
    type Target = Object;

    fn deref(&self) -> &Object {
        self.connection
            .as_ref()
            .unwrap_or_else(|| unreachable!("taken only by finish and drop"))
    }
}

impl DerefMut for Guarded {
    fn deref_mut(&mut self) -> &mut Object {
        self.connection
            .as_mut()
            .unwrap_or_else(|| unreachable!("taken only by finish and drop"))
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        let Some(connection) = self.connection.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        // Out of the pool for good: it closes once the cancel has gone out.
        let client = Object::take(connection);
        let token = client.cancel_token();
        let tls = self.tls.take();
        runtime.spawn(async move {
            let cancelled = match tls {
                Some(tls) => token.cancel_query(tls).await,
                None => token.cancel_query(tokio_postgres::NoTls).await,
            };
            if let Err(error) = cancelled {
                tracing::debug!(error.message = %error, "could not cancel an abandoned statement");
            }
            drop(client);
        });
    }
}
