//! Errors a step body, a guard or a handler can fail with, and the errors the
//! engine itself raises into a step.

mod call;
mod driver;
mod raised;
mod step_error;

/// The longest error message kept on a step row, in characters; longer messages
/// are cut and end in `…`. NUL characters, which Postgres text cannot hold, are
/// kept as `U+FFFD`.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 10_000;
/// The longest idempotency key accepted, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
/// How many causes (the `source()` chain below the error) a step row keeps.
pub const MAX_ERROR_CAUSES: usize = 5;

pub use call::Error;
pub use raised::{
    BadInput, FanOutFailed, Message, Panicked, StepNotDefined, StepStalled, Timeout, Unstorable,
    WaitTimedOut,
};
pub(crate) use step_error::display_chain;
pub use step_error::{StepError, cap_message};

#[cfg(test)]
mod tests;
