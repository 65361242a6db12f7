//! Integration tests of the `pgbus` binary, one test binary with a module per
//! area: the commands (`cli`), the dashboard over plain HTTP (`dashboard`) and
//! in Chromium (`browser`), and both through PgBouncer (`pooler`).

// Test support code outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod browser;
mod cli;
mod common;
mod dashboard;
mod pooler;
