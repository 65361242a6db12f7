//! The chaos crate's tests, one test binary: the short chaos run CI does
//! (`chaos`), the failover to a promoted standby (`failover`) and half-open
//! connections (`half_open`). Each runs the `pgbus-chaos` binary, which sets
//! up and removes its own clusters; they take turns (see `common`).

#![allow(clippy::expect_used, clippy::panic)]

mod chaos;
mod common;
mod failover;
mod half_open;
