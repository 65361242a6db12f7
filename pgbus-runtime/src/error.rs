//! Errors a step body, a guard or a handler can fail with, and the errors the
//! engine itself raises into a step.

use std::any::type_name;
use std::fmt;
use std::time::Duration;

/// The longest error message kept on a step row, in characters; longer messages
/// are cut and end in `…`.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 10_000;
/// How many causes (the `source()` chain below the error) a step row keeps.
pub const MAX_ERROR_CAUSES: usize = 5;

/// Any error a step body, guard or handler returns, boxed with its type name.
///
/// Every `E: std::error::Error + Send + Sync + 'static` converts into it, so `?`
/// works in step bodies. Exception policies match it by type with
/// [`StepError::is`] (`on_exception(matching(CardDeclined), ...)`).
///
/// Like `anyhow::Error`, it does not itself implement `std::error::Error`: that is
/// what lets the blanket `From` exist.
pub struct StepError {
    inner: Box<dyn std::error::Error + Send + Sync + 'static>,
    type_name: &'static str,
}

impl StepError {
    /// An error with only a message; its type name is `pgbus_runtime::Message`.
    pub fn msg(message: impl Into<String>) -> Self {
        Self::from(Message(message.into()))
    }

    /// Wraps an already boxed error. Its type name is the box's, since the concrete
    /// type is no longer known; [`StepError::is`] still sees through the box.
    #[must_use]
    pub fn from_boxed(error: Box<dyn std::error::Error + Send + Sync + 'static>) -> Self {
        Self {
            inner: error,
            type_name: type_name::<Box<dyn std::error::Error + Send + Sync>>(),
        }
    }

    /// Whether the error is a `T` (a downcast, as policies match).
    #[must_use]
    pub fn is<T: std::error::Error + 'static>(&self) -> bool {
        self.inner.is::<T>()
    }

    /// The error as a `T`, if it is one.
    #[must_use]
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.inner.downcast_ref::<T>()
    }

    /// The Rust type name of the error, e.g. `my_app::CardDeclined`; stored as the
    /// step row's error class.
    #[must_use]
    pub const fn type_name(&self) -> &'static str {
        self.type_name
    }

    /// The error's message, cut to [`MAX_ERROR_MESSAGE_CHARS`].
    #[must_use]
    pub fn message(&self) -> String {
        cap_message(&self.inner.to_string())
    }

    /// The messages of the `source()` chain below this error, nearest first, at
    /// most [`MAX_ERROR_CAUSES`], each cut to [`MAX_ERROR_MESSAGE_CHARS`].
    #[must_use]
    pub fn causes(&self) -> Vec<String> {
        let mut causes = Vec::new();
        let mut next = self.inner.source();
        while let Some(cause) = next {
            if causes.len() == MAX_ERROR_CAUSES {
                break;
            }
            causes.push(cap_message(&cause.to_string()));
            next = cause.source();
        }
        causes
    }

    /// The boxed error.
    #[must_use]
    pub fn into_inner(self) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self.inner
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for StepError {
    fn from(error: E) -> Self {
        Self {
            inner: Box::new(error),
            type_name: type_name::<E>(),
        }
    }
}

impl fmt::Debug for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepError")
            .field("type_name", &self.type_name)
            .field("error", &self.inner)
            .finish()
    }
}

impl fmt::Display for StepError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

fn cap_message(message: &str) -> String {
    match message.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        None => message.to_owned(),
        Some((cut, _)) => {
            let mut capped = message[..cut].to_owned();
            capped.pop();
            capped.push('…');
            capped
        }
    }
}

/// A plain message error, from [`StepError::msg`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Message(pub String);

/// A step body ran past its `timeout`. Match it in a policy with
/// `on_exception(matching(Timeout), ...)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step ran past its timeout of {after:?}")]
pub struct Timeout {
    /// The step's timeout.
    pub after: Duration,
}

/// A run reached a step its workflow's definition does not have (a deploy removed
/// or renamed it without a `removed_step!` gravestone), or the engine asked for a
/// guard or handler the definition does not list. The run is paused, never retried
/// in a loop.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("workflow `{workflow}` has no step `{step}`")]
pub struct StepNotDefined {
    /// The workflow's name.
    pub workflow: String,
    /// The step, guard or handler that was asked for.
    pub step: String,
}

#[cfg(test)]
mod tests;
