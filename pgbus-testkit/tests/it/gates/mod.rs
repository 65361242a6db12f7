//! The environment with the steps that wait: a `wait_for` step tested with
//! `env.signal(..)` and timeouts on the virtual clock, and a `fan_out` step with
//! its child runs.

mod fan_out;
mod reattempt;
mod signal;
