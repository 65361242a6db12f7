//! The rules for names that the macros check at compile time and the runtime
//! checks again when a value arrives: signal names, and the invisible characters
//! that no name an operator types or reads back may hold.
//!
//! A signal name is 1 to [`MAX_SIGNAL_NAME_CHARS`] characters with no control
//! character, no invisible formatting character (see [`is_invisible`]) and no
//! whitespace at either end. `#[step(wait_for = "...")]` and `Client::signal`
//! both apply [`check_signal_name`], so a step never waits for a name that no
//! signal could carry.

/// The longest signal name accepted, in characters (not bytes).
pub const MAX_SIGNAL_NAME_CHARS: usize = 255;

/// Whether `c` is an invisible formatting character: one that changes how text
/// shows or joins without showing itself, so two names that look the same can
/// differ by it. These are the zero-width spaces, joiners and directional marks
/// (U+200B to U+200F), the directional embeddings and overrides (U+202A to
/// U+202E), the word joiner and invisible operators (U+2060 to U+2064), the
/// directional isolates (U+2066 to U+2069), the byte-order mark / zero-width
/// no-break space (U+FEFF) and the soft hyphen (U+00AD).
///
/// Control characters are not included; test them with [`char::is_control`].
///
/// ```
/// assert!(pgbus_core::is_invisible('\u{200b}'));
/// assert!(!pgbus_core::is_invisible('a'));
/// assert!(!pgbus_core::is_invisible('\n'));
/// ```
#[must_use]
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
            | '\u{00ad}'
    )
}

/// Checks a signal name against the one rule set shared by a step's `wait_for`
/// and `Client::signal`: 1 to [`MAX_SIGNAL_NAME_CHARS`] characters, no control
/// characters, no invisible formatting characters ([`is_invisible`]), and no
/// whitespace at either end.
///
/// ```
/// use pgbus_core::check_signal_name;
/// assert_eq!(check_signal_name("payment.settled"), Ok(()));
/// assert!(check_signal_name("payment.settled ").is_err());
/// assert!(check_signal_name("pay\u{200b}ment").is_err());
/// ```
///
/// # Errors
/// A short reason, a sentence fragment starting with "a signal name", naming the
/// first rule the name breaks. Rules are checked in this order: empty or only
/// whitespace, too long, control characters, invisible characters, whitespace at
/// either end.
pub fn check_signal_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        return Err("a signal name cannot be empty or only whitespace");
    }
    if name.chars().count() > MAX_SIGNAL_NAME_CHARS {
        return Err("a signal name is at most 255 characters");
    }
    if name.chars().any(char::is_control) {
        return Err("a signal name cannot hold control characters (tabs, newlines, NUL)");
    }
    if name.chars().any(is_invisible) {
        return Err("a signal name cannot hold invisible formatting characters \
             (zero-width spaces and joiners, direction marks, the byte-order mark, soft hyphens)");
    }
    if name.trim() != name {
        return Err("a signal name cannot start or end with whitespace");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
