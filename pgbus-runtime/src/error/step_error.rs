//! [`StepError`]: what a step body, guard or handler fails with, and how its
//! text is made storable.

use std::any::type_name;
use std::fmt;

use super::{MAX_ERROR_CAUSES, MAX_ERROR_MESSAGE_CHARS, Message};

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

    /// The error's message, cut to [`MAX_ERROR_MESSAGE_CHARS`], NUL characters
    /// replaced by `U+FFFD` (Postgres text cannot hold them).
    #[must_use]
    pub fn message(&self) -> String {
        cap_message(&safe_display(&*self.inner))
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
            causes.push(cap_message(&safe_display(cause)));
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
        f.write_str(&safe_display(&*self.inner))
    }
}

/// `value.to_string()`, except that a `Display` returning an error gives a
/// placeholder rather than the panic `to_string` raises.
pub(super) fn safe_display(value: &dyn fmt::Display) -> String {
    let mut text = String::new();
    if fmt::write(&mut text, format_args!("{value}")).is_err() {
        return "<the error's Display implementation failed>".to_owned();
    }
    text
}

/// An error and its sources on one line, for logs and stored reasons.
pub(crate) fn display_chain(error: &dyn std::error::Error) -> String {
    let mut text = safe_display(error);
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&safe_display(cause));
        source = cause.source();
    }
    text
}

/// A message, reason or cause as a row keeps it: NUL characters replaced by
/// `U+FFFD`, at most [`MAX_ERROR_MESSAGE_CHARS`] characters (a longer one is cut
/// and ends in `…`).
#[must_use]
pub fn cap_message(message: &str) -> String {
    let message = storable_text(message.to_owned());
    match message.char_indices().nth(MAX_ERROR_MESSAGE_CHARS) {
        None => message,
        Some((cut, _)) => {
            let mut capped = message[..cut].to_owned();
            capped.pop();
            capped.push('…');
            capped
        }
    }
}

/// `text` with its NUL characters, which Postgres `text` and `jsonb` refuse,
/// replaced by `U+FFFD`: what the rows keep of a message or reason, so an outcome
/// is never unrecordable because of what a step said.
pub(crate) fn storable_text(text: String) -> String {
    if text.contains('\0') {
        text.replace('\0', "\u{fffd}")
    } else {
        text
    }
}
