//! Integration tests of pgbus-runtime: one binary, one module per area.

// Test support code outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

mod client_pg;
mod connection_pg;
mod deadline_pg;
mod definition;
mod dispatch;
mod engine_pg;
mod errors_pg;
mod fan_out_pg;
mod flow_pg;
mod gate_pg;
mod insights_pg;
mod lifecycle_pg;
mod metrics_pg;
mod migrate_pg;
mod operator_pg;
mod overrides_pg;
mod pg;
mod policy_pg;
mod registry_pg;
mod result_pg;
mod robust_pg;
mod schedules_pg;
mod signal_pg;
mod sql_start_pg;
mod start_edges_pg;
mod start_in_pg;
mod start_options_pg;
mod sweep_pg;
mod tls_cluster;
mod tls_pg;
mod unrunnable_pg;
mod wire;
mod worker_pg;

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// Polls a future that never waits on I/O to completion.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return output;
        }
    }
}
