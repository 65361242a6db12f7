//! How the engine's statements reach the server: the one helper every
//! statement of the store, the client, the operator views and the migrations
//! goes through, so no call site can pick the wrong protocol.
//!
//! Two modes ([`StatementMode`]):
//! - `Cached` (the default): each statement is prepared once per pooled
//!   connection (deadpool's `prepare_cached`, a named statement) and then only
//!   bound and executed: the fastest on a direct connection.
//! - `Unnamed`: each statement goes out as one unnamed Parse, Bind, Describe,
//!   Execute and Sync (tokio-postgres's `query_typed`), one round trip, leaving
//!   no named statement on the server connection. That is what a
//!   transaction-mode pooler needs: `PgBouncer` 1.18 hands each transaction (and
//!   each autocommit statement) to any server connection and keeps no prepared
//!   statement across them, so a statement prepared in one transaction is not
//!   there in the next.
//!
//! An unnamed statement must declare its parameter types up front (the driver
//! encodes each value for a known type). They are learned once per process and
//! statement text, by preparing the statement inside an explicit transaction
//! and closing it before that transaction ends: the Close is queued on the
//! connection before the COMMIT, so a pooler hands both to the same server
//! connection and nothing outlives the transaction. Learning rather than
//! declaring the types beside each of the forty-odd statements keeps the SQL
//! files the only place a parameter's type is written, so the two cannot drift
//! apart. The same Parse with its learned types is also what
//! [`Client::start_in`](crate::Client::start_in) sends on a caller's
//! connection, which has no statement cache of ours.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use deadpool_postgres::Pool;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{GenericClient, Row, Statement};

use crate::error::Error;

/// How statements are sent (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StatementMode {
    /// Prepared once per pooled connection and cached there (named statements).
    #[default]
    Cached,
    /// Unnamed Parse/Bind/Execute in one Sync, for transaction-mode poolers.
    Unnamed,
}

/// Prepares statements in the store's mode, and remembers the parameter types
/// it learned (shared by every clone, so once per process and statement text).
#[derive(Debug, Clone, Default)]
pub(crate) struct Preparer {
    mode: StatementMode,
    types: Arc<Mutex<HashMap<String, Arc<[Type]>>>>,
}

/// A statement ready to run on the connection it was prepared for: a cached
/// named statement, or the text with its parameter types.
#[derive(Debug, Clone)]
pub(crate) enum Prepared<'s> {
    /// A named statement of the connection's cache.
    Cached(Statement),
    /// Sent unnamed, with these parameter types.
    Unnamed {
        /// The statement text.
        sql: &'s str,
        /// Its parameter types, in `$n` order.
        types: Arc<[Type]>,
    },
}

/// A connection statements run on: a pooled connection, a transaction of one,
/// or a caller's client ([`Caller`]).
pub(crate) trait Conn: Sync {
    /// The tokio-postgres client or transaction underneath.
    type Pg: GenericClient + Sync;
    /// It.
    fn pg(&self) -> &Self::Pg;
}

impl Conn for deadpool_postgres::Object {
    type Pg = tokio_postgres::Client;
    fn pg(&self) -> &Self::Pg {
        self
    }
}

impl<'a> Conn for deadpool_postgres::Transaction<'a> {
    type Pg = tokio_postgres::Transaction<'a>;
    fn pg(&self) -> &Self::Pg {
        self
    }
}

impl Conn for crate::pg::tx::Tx<'_> {
    type Pg = tokio_postgres::Client;
    fn pg(&self) -> &Self::Pg {
        self
    }
}

/// A caller's own client or transaction, as [`Conn`].
pub(crate) struct Caller<'c, C>(pub(crate) &'c C);

impl<C: GenericClient + Sync> Conn for Caller<'_, C> {
    type Pg = C;
    fn pg(&self) -> &Self::Pg {
        self.0
    }
}

impl Preparer {
    /// A preparer in `mode`, with nothing learned yet.
    pub(crate) fn new(mode: StatementMode) -> Self {
        Self {
            mode,
            types: Arc::default(),
        }
    }

    /// `sql`, ready to run inside the store's transaction `tx`.
    pub(crate) async fn in_tx<'s>(
        &self,
        tx: &crate::pg::tx::Tx<'_>,
        sql: &'s str,
    ) -> Result<Prepared<'s>, Error> {
        match self.mode {
            StatementMode::Cached => Ok(Prepared::Cached(tx.prepare_cached(sql).await?)),
            StatementMode::Unnamed => self.unnamed_in(tx, sql).await,
        }
    }

    /// `sql`, ready to run inside the driver's transaction `tx` (the
    /// migrations', a read's snapshot).
    pub(crate) async fn in_driver_tx<'s>(
        &self,
        tx: &deadpool_postgres::Transaction<'_>,
        sql: &'s str,
    ) -> Result<Prepared<'s>, Error> {
        match self.mode {
            StatementMode::Cached => Ok(Prepared::Cached(tx.prepare_cached(sql).await?)),
            StatementMode::Unnamed => self.unnamed_in(tx, sql).await,
        }
    }

    /// `sql` unnamed, its types learned inside transaction `tx` if not known
    /// yet.
    async fn unnamed_in<'s>(&self, tx: &impl Conn, sql: &'s str) -> Result<Prepared<'s>, Error> {
        let types = match self.known(sql) {
            Some(types) => types,
            // Prepared and closed inside `tx`: the Close goes out before
            // whatever ends the transaction.
            None => self.learn(tx.pg().prepare(sql).await?, sql),
        };
        Ok(Prepared::Unnamed { sql, types })
    }

    /// `sql`, ready to run on pooled connection `client` outside a transaction.
    pub(crate) async fn on<'s>(
        &self,
        client: &mut deadpool_postgres::Object,
        sql: &'s str,
    ) -> Result<Prepared<'s>, Error> {
        match self.mode {
            StatementMode::Cached => Ok(Prepared::Cached(client.prepare_cached(sql).await?)),
            StatementMode::Unnamed => Ok(Prepared::Unnamed {
                sql,
                types: self.types_on(client, sql).await?,
            }),
        }
    }

    /// `sql` as an unnamed statement whatever the mode, for a connection that
    /// is not ours (a caller's transaction): its types, if not known yet, are
    /// learned on a connection of `pool`, so nothing is prepared on the
    /// caller's.
    pub(crate) async fn unnamed<'s>(
        &self,
        pool: &Pool,
        sql: &'s str,
    ) -> Result<Prepared<'s>, Error> {
        let types = match self.known(sql) {
            Some(types) => types,
            None => self.types_on(&mut pool.get().await?, sql).await?,
        };
        Ok(Prepared::Unnamed { sql, types })
    }

    /// The parameter types of `sql`, learned in a transaction of its own on
    /// `client` if not known yet. Cancel-safe: a transaction dropped midway
    /// rolls back when the connection is next used.
    async fn types_on(
        &self,
        client: &mut deadpool_postgres::Object,
        sql: &str,
    ) -> Result<Arc<[Type]>, Error> {
        if let Some(types) = self.known(sql) {
            return Ok(types);
        }
        let tx = client.transaction().await?;
        let types = self.learn(tx.prepare(sql).await?, sql);
        tx.commit().await?;
        Ok(types)
    }

    fn known(&self, sql: &str) -> Option<Arc<[Type]>> {
        self.types
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(sql)
            .cloned()
    }

    /// Records the parameter types of `statement` (the text `sql`) and drops
    /// it, which queues its Close on the connection at once.
    fn learn(&self, statement: Statement, sql: &str) -> Arc<[Type]> {
        let types: Arc<[Type]> = statement.params().into();
        drop(statement);
        self.types
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(sql.to_owned(), Arc::clone(&types));
        types
    }
}

impl Prepared<'_> {
    /// `params` paired with the statement's types, for an unnamed statement.
    fn typed<'p>(
        types: &[Type],
        params: &[&'p (dyn ToSql + Sync)],
    ) -> Vec<(&'p (dyn ToSql + Sync), Type)> {
        params.iter().copied().zip(types.iter().cloned()).collect()
    }

    /// Runs it; every row.
    pub(crate) async fn query(
        &self,
        conn: &impl Conn,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        Ok(match self {
            Self::Cached(statement) => conn.pg().query(statement, params).await?,
            Self::Unnamed { sql, types } => {
                conn.pg()
                    .query_typed(sql, &Self::typed(types, params))
                    .await?
            }
        })
    }

    /// Runs it; exactly one row.
    pub(crate) async fn query_one(
        &self,
        conn: &impl Conn,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        Ok(match self {
            Self::Cached(statement) => conn.pg().query_one(statement, params).await?,
            Self::Unnamed { sql, types } => {
                conn.pg()
                    .query_typed_one(sql, &Self::typed(types, params))
                    .await?
            }
        })
    }

    /// Runs it; at most one row.
    pub(crate) async fn query_opt(
        &self,
        conn: &impl Conn,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        Ok(match self {
            Self::Cached(statement) => conn.pg().query_opt(statement, params).await?,
            Self::Unnamed { sql, types } => {
                conn.pg()
                    .query_typed_opt(sql, &Self::typed(types, params))
                    .await?
            }
        })
    }

    /// Runs it; how many rows it changed.
    pub(crate) async fn execute(
        &self,
        conn: &impl Conn,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Error> {
        Ok(match self {
            Self::Cached(statement) => conn.pg().execute(statement, params).await?,
            Self::Unnamed { sql, types } => {
                conn.pg()
                    .execute_typed(sql, &Self::typed(types, params))
                    .await?
            }
        })
    }
}
