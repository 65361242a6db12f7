//! Test pgbus workflows without waiting: the same engine as on Postgres, run in
//! memory on a virtual clock ([`TestEnv`]), single steps with no store at all
//! ([`StepHarness`]), and a fresh migrated schema per test for integration tests
//! against the real server ([`TestDatabase`]).

mod env;
mod harness;
mod memory;
mod pg;
pub mod pgbouncer;

pub use env::{MAX_ATTEMPTS_PER_CALL, StepRecord, TestEnv, default_start};
pub use harness::{StepHarness, StepRun};
pub use memory::TESTKIT_WORKER;
pub use pg::{TestDatabase, test_database_url};
