//! Integration tests of the testkit: the environment, the harness, and the
//! differential suite that holds the memory store to the Postgres one.

// Test support code outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

// Before the modules that use its macro.
#[macro_use]
mod deadline_wrap;

mod contract;
mod database;
mod deadlines;
mod deploy;
mod differential;
mod env;
mod env_checks;
mod env_flow;
mod gates;
mod harness;
mod overrides;
mod results;
mod schedules;
mod stress;
mod unrunnable;
