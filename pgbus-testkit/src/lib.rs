#![doc = include_str!("../README.md")]

pub mod deploy;
mod env;
mod harness;
mod memory;
mod pg;
// The repository's own helper for its pooler tests (Debian's binary, run as
// `postgres` under root): public for the workspace's other crates, not API.
#[doc(hidden)]
pub mod pgbouncer;

pub use env::{
    MAX_ATTEMPTS_PER_CALL, MAX_TICKS_PER_ADVANCE, StepRecord, TestEnv, TestResult, default_start,
};
pub use harness::{StepHarness, StepRun};
pub use memory::{MemoryStore, TESTKIT_WORKER};
pub use pg::{
    TestDatabase, TestDatabaseBuilder, connect_raw, default_user, raw_config, test_database_url,
};
