//! Integration tests of the examples, one test binary: the order-fulfilment
//! workflow in the testkit (`fulfil`), its `--print-definitions` hook (`deploy`), through PgBouncer (`pooler`), and
//! started in a sqlx transaction (`sqlx_start`, the runtime's `sqlx` feature).

// Test support code outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod deploy;
mod fulfil;
mod pooler;
mod sqlx_start;
