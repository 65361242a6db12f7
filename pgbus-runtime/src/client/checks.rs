//! The rules every store applies to an operator's actor and reason and to an
//! idempotency key.

use crate::error::Error;

/// The rules every store applies to an operator action's actor: 1 to 255
/// characters of visible text: no control characters, no invisible formatting
/// characters (zero-width spaces and joiners, direction marks and overrides, the
/// byte-order mark), no whitespace at either end.
///
/// # Errors
/// [`Error::InvalidActor`].
pub fn check_actor(actor: &str) -> Result<(), Error> {
    let invisible = |c: char| c.is_control() || pgbus_core::is_invisible(c);
    if actor.is_empty()
        || actor.trim() != actor
        || actor.chars().count() > crate::error::MAX_IDEMPOTENCY_KEY_CHARS
        || actor.chars().any(invisible)
    {
        return Err(Error::InvalidActor);
    }
    Ok(())
}

/// The rule every store, the command and the dashboard apply to an operator
/// action's reason: some visible text (at least one character that is not
/// whitespace, a control or an invisible formatting character), at
/// most [`MAX_ERROR_MESSAGE_CHARS`](crate::error::MAX_ERROR_MESSAGE_CHARS)
/// (10,000) characters.
///
/// # Errors
/// [`Error::InvalidReason`].
pub fn check_reason(reason: &str) -> Result<(), Error> {
    let visible = |c: char| !c.is_whitespace() && !c.is_control() && !pgbus_core::is_invisible(c);
    if !reason.chars().any(visible)
        || reason.chars().count() > crate::error::MAX_ERROR_MESSAGE_CHARS
    {
        return Err(Error::InvalidReason);
    }
    Ok(())
}

/// The rules every store applies to an idempotency key.
///
/// # Errors
/// [`Error::BlankIdempotencyKey`] and [`Error::InvalidIdempotencyKey`].
pub fn check_key(key: &str) -> Result<(), Error> {
    if key.trim().is_empty() {
        return Err(Error::BlankIdempotencyKey);
    }
    if key.chars().count() > crate::error::MAX_IDEMPOTENCY_KEY_CHARS
        || key.chars().any(char::is_control)
    {
        return Err(Error::InvalidIdempotencyKey);
    }
    Ok(())
}

/// The checks of an operator action: [`check_actor`] and [`check_reason`],
/// then the reason as stored (capped as every stored message is). What every
/// store's `act` runs first.
///
/// # Errors
/// [`Error::InvalidActor`], [`Error::InvalidReason`].
pub fn checked_reason(actor: &str, reason: &str) -> Result<String, Error> {
    check_actor(actor)?;
    check_reason(reason)?;
    Ok(crate::error::cap_message(reason))
}
