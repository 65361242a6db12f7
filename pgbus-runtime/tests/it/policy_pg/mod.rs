//! Errors, exception policies and guards on a real worker: what the step and run
//! rows keep of an error, which policy answers, how often a body runs, what is
//! reported, and guards that cancel, skip or fail.

mod errors;
mod guards;
mod handlers;
mod reporting;
mod resolution;
