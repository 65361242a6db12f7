//! The engine end to end on a real worker: every verb's rows and events, waits on
//! the pinned clock, outputs handed on, definitions that changed under a run, and
//! completions that lost their fence.

mod definitions;
mod fence;
mod inputs;
mod outputs;
mod verbs;
mod waits;
