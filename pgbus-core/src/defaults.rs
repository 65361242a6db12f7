//! Defaults the macro writes into a definition when an option is left out.

/// The queue a workflow runs on when it names none.
pub const DEFAULT_QUEUE: &str = "default";
/// The priority of a workflow that names none; lower numbers run first.
pub const DEFAULT_PRIORITY: i16 = 0;
/// `wait` of a reattempt policy that names none, in milliseconds.
pub const DEFAULT_REATTEMPT_WAIT_MS: u64 = 1_000;
/// `max_reattempts` of a reattempt policy that names none: the body runs at most
/// four times in a row.
pub const DEFAULT_MAX_REATTEMPTS: u32 = 3;
