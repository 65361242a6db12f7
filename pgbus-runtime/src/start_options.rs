//! What a start may say beyond its input: an idempotency key, when the first
//! step is due, and the queue and priority the run's steps go to.
//!
//! One value, [`StartOptions`], serves every start: [`Client::start_with`]
//! and its transaction forms, each item of [`Client::start_many`], the
//! store contract's [`Store::start_run`](crate::store::Store::start_run) and
//! the testkit's `TestEnv::start_with`. The plain forms
//! ([`Client::start`], [`Client::start_idempotent`], ...) are
//! `StartOptions::new()` and `StartOptions::new().key(..)`.
//!
//! [`Client::start_with`]: crate::Client::start_with
//! [`Client::start_many`]: crate::Client::start_many
//! [`Client::start`]: crate::Client::start
//! [`Client::start_idempotent`]: crate::Client::start_idempotent

use std::borrow::Borrow;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgbus_core::MAX_DURATION_MS;

use crate::error::Error;
use crate::workflow::Workflow;

/// The longest queue name a start accepts, in characters.
pub const MAX_QUEUE_NAME_CHARS: usize = 255;

/// How many runs one [`Client::start_many`](crate::Client::start_many) call
/// (or `TestEnv::start_many`, or a store's
/// [`start_many`](crate::store::Store::start_many)) starts at most: above it,
/// [`Error::TooManyStarts`] and nothing is started. Split larger batches into
/// calls of this size.
pub const MAX_STARTS_PER_CALL: usize = 1_000;

/// How many bytes of input JSON (compact, summed over the runs) one
/// `start_many` call carries at most: 32 MiB. Above it,
/// [`Error::TooManyStarts`] and nothing is started. Each input is also held to
/// [`Limits::input_bytes`](crate::Limits::input_bytes) on its own.
pub const MAX_START_MANY_INPUT_BYTES: usize = 32 * 1024 * 1024;

/// When a run's first step is due, before that step's own `wait` is added.
/// Set with [`StartOptions::at`] or [`StartOptions::delay`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartAt {
    /// At this time (the first step is due at it plus the step's `wait`); a
    /// time already past makes the step due at once.
    At(DateTime<Utc>),
    /// This long after the start, on the store's clock (the database's
    /// `clock_timestamp()`, or the testkit's virtual clock).
    After(Duration),
}

/// The options of one start, built by chaining: an idempotency key, a start
/// time or delay, and a queue and priority for the run. Every option is
/// optional; `StartOptions::new()` (or `default()`) is a plain start.
///
/// ```
/// use std::time::Duration;
/// use pgbus_runtime::StartOptions;
///
/// let options = StartOptions::new()
///     .key("order-1042")
///     .delay(Duration::from_mins(30))
///     .queue("orders_bulk")
///     .priority(10);
/// assert_eq!(options.idempotency_key(), Some("order-1042"));
/// ```
///
/// - **Key** ([`StartOptions::key`]): as [`Client::start_idempotent`](crate::Client::start_idempotent):
///   a second start of the same workflow with the same key starts nothing and
///   returns the first run, `created: false`, whatever its other options say
///   (the first start's time, queue and priority stand).
/// - **Time** ([`StartOptions::at`], [`StartOptions::delay`]): the first
///   step is due at that time plus its own `wait`; until then the run is
///   `ready` with a `scheduled` row that no claim takes, as for any row not
///   yet due (the sweep and the claims treat it like any other). `at` and
///   `delay` set one thing, so **the last one called wins**. Later steps
///   count their `wait` from the end of the step before, as always.
/// - **Queue and priority** ([`StartOptions::queue`], [`StartOptions::priority`]):
///   the run's own, replacing the workflow's `queue`/`priority` for every step
///   of the run (the first, later ones, reattempts, and the rows an operator's
///   resume or skip schedules). A step that names its own `queue` or
///   `priority` in `#[step(...)]` keeps it: the step's option is the more
///   specific. As Temporal's task queue given at start, which a workflow's
///   activities use unless their own options name another. Fan-out children
///   are runs of their own workflows and do not inherit them.
/// - **Deadline** ([`StartOptions::deadline`], [`StartOptions::deadline_after`]):
///   the run's own, replacing the workflow's `deadline`; the last one called
///   wins. Past it the run starts no step and the sweep cancels or pauses it
///   (the workflow's `on_deadline`). Fan-out children get no deadline, the
///   parent's or their workflow's: a parent's cancel cancels them.
///
/// Checked when the start is made (see [`StartOptions::check`]): each
/// refusal is a typed error naming the option, and nothing is started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[must_use]
pub struct StartOptions {
    key: Option<String>,
    start_at: Option<StartAt>,
    queue: Option<String>,
    priority: Option<i16>,
    concurrency_key: Option<String>,
    deadline: Option<StartAt>,
}

impl StartOptions {
    /// No options: a plain start, due after the first step's `wait`, on the
    /// workflow's queues and priorities, without a key.
    pub fn new() -> Self {
        Self::default()
    }

    /// The idempotency key (per workflow; 1 to 255 characters of visible
    /// text, see [`check_key`](crate::client::check_key)).
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }

    /// The first step is due at `at` plus its own `wait`; an `at` already
    /// past makes it due at once (as soon as that sum is past). At most
    /// 36,500 days ([`MAX_DURATION_MS`]) ahead of the store's clock.
    /// Replaces an earlier [`StartOptions::delay`]: the last one wins.
    pub fn at(mut self, at: DateTime<Utc>) -> Self {
        self.start_at = Some(StartAt::At(at));
        self
    }

    /// The first step is due `delay` after the start (on the store's clock)
    /// plus its own `wait`. At most 36,500 days ([`MAX_DURATION_MS`]);
    /// counted in whole milliseconds (a finer part is dropped). Replaces an
    /// earlier [`StartOptions::at`]: the last one wins.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.start_at = Some(StartAt::After(delay));
        self
    }

    /// The run's queue, replacing the workflow's for each step that names
    /// none of its own: 1 to 255 characters, no whitespace, control or
    /// invisible formatting characters. Workers claim a row only from the
    /// queues they serve, so a queue no worker serves leaves the run waiting.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// The run's priority, replacing the workflow's for each step that names
    /// none of its own; lower numbers run first.
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }

    /// The run's concurrency key, replacing the one the workflow's
    /// `key = Self::method` derives from the input (a workflow without a key
    /// method takes one this way only): its runs share the workflow's
    /// `key_concurrency` and `key_rate_limit` with every run of the same key.
    /// 1 to 255 characters, not blank, no control characters, as an
    /// idempotency key (a bad one: [`Error::InvalidStartOption`] with
    /// `option: "concurrency_key"`, from [`StartOptions::check`]).
    pub fn concurrency_key(mut self, key: impl Into<String>) -> Self {
        self.concurrency_key = Some(key.into());
        self
    }

    /// The run's deadline, replacing the workflow's `deadline`: a run not
    /// ended by `at` starts no further step, and the sweep cancels or pauses
    /// it as the workflow's `on_deadline` says (default `cancel`). After the
    /// run's start time and at most 36,500 days after it (see
    /// [`StartOptions::check`]). Replaces an earlier
    /// [`StartOptions::deadline_after`].
    pub fn deadline(mut self, at: DateTime<Utc>) -> Self {
        self.deadline = Some(StartAt::At(at));
        self
    }

    /// The run's deadline, `after` its start time (its [`StartOptions::at`]
    /// or [`StartOptions::delay`], else the start itself, on the store's
    /// clock; never the first step's `wait`), replacing the workflow's
    /// `deadline`. Over zero and at most 36,500 days; counted in whole
    /// milliseconds. Replaces an earlier [`StartOptions::deadline`].
    pub fn deadline_after(mut self, after: Duration) -> Self {
        self.deadline = Some(StartAt::After(after));
        self
    }

    /// The concurrency key given at start, if any.
    #[must_use]
    pub fn run_concurrency_key(&self) -> Option<&str> {
        self.concurrency_key.as_deref()
    }

    /// The deadline given at start, if any.
    #[must_use]
    pub const fn run_deadline(&self) -> Option<StartAt> {
        self.deadline
    }

    /// The idempotency key, if any.
    #[must_use]
    pub fn idempotency_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// When the first step is due (before its `wait`), if set.
    #[must_use]
    pub const fn start_at(&self) -> Option<StartAt> {
        self.start_at
    }

    /// The run's queue, if set.
    #[must_use]
    pub fn run_queue(&self) -> Option<&str> {
        self.queue.as_deref()
    }

    /// The run's priority, if set.
    #[must_use]
    pub const fn run_priority(&self) -> Option<i16> {
        self.priority
    }

    /// The checks every start applies, `now` being the store's clock (the
    /// testkit's virtual time; the pinned time of a Postgres store in tests,
    /// else this machine's clock: the bound is a century, not a due time).
    /// In this order: the key, then the time, then the queue, then the
    /// deadline.
    ///
    /// # Errors
    /// - [`Error::BlankIdempotencyKey`], [`Error::InvalidIdempotencyKey`]
    ///   for a bad key, as every keyed start;
    /// - [`Error::InvalidStartOption`] with `option: "at"` for a time more
    ///   than 36,500 days after `now`;
    /// - [`Error::InvalidStartOption`] with `option: "delay"` for a delay
    ///   over 36,500 days;
    /// - [`Error::InvalidStartOption`] with `option: "queue"` for a queue
    ///   that is empty, over 255 characters, or holds whitespace, control or
    ///   invisible formatting characters;
    /// - [`Error::InvalidStartOption`] with `option: "concurrency_key"` for a
    ///   concurrency key that breaks the idempotency key's rule (given here
    ///   or derived by the workflow's key method: a key of a bad shape is the
    ///   start's error, not a silent fallback to no key).
    /// - [`Error::InvalidStartOption`] with `option: "deadline"` for a
    ///   deadline not after the run's start time (its `at`, not before
    ///   `now`; `now` plus its `delay`; else `now`) or more than 36,500 days
    ///   after it;
    /// - [`Error::InvalidStartOption`] with `option: "deadline_after"` for a
    ///   zero duration or one over 36,500 days.
    pub fn check(&self, now: DateTime<Utc>) -> Result<(), Error> {
        if let Some(key) = &self.key {
            crate::client::check_key(key)?;
        }
        let limit = now
            .checked_add_signed(max_ahead())
            .unwrap_or(DateTime::<Utc>::MAX_UTC);
        match self.start_at {
            Some(StartAt::At(at)) if at > limit => {
                return Err(Error::InvalidStartOption {
                    option: "at",
                    problem: format!(
                        "must be at most 36500 days ahead of the store's clock ({}); got {}",
                        now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                    ),
                });
            }
            Some(StartAt::After(delay)) if delay.as_millis() > u128::from(MAX_DURATION_MS) => {
                return Err(Error::InvalidStartOption {
                    option: "delay",
                    problem: format!(
                        "must be at most 36500 days (`36500d`), as every pgbus duration; got {delay:?}"
                    ),
                });
            }
            _ => {}
        }
        if let Some(queue) = &self.queue {
            check_queue(queue).map_err(|problem| Error::InvalidStartOption {
                option: "queue",
                problem: problem.to_owned(),
            })?;
        }
        if let Some(key) = &self.concurrency_key {
            check_concurrency_key(key)?;
        }
        crate::engine::check_deadline(self, now)
            .map_err(|(option, problem)| Error::InvalidStartOption { option, problem })
    }

    /// These options with the concurrency key of a run of `W` with `input`:
    /// the one given ([`StartOptions::concurrency_key`]) if any, else the
    /// one `W`'s key method derives ([`Workflow::concurrency_key`]), else
    /// none. What every client start (and a fan-out's child) does before the
    /// store sees the options: a store has the input as JSON only, not
    /// `W::Input`.
    pub fn with_key_of<W: Workflow>(self, input: &W::Input) -> Self {
        match (&self.concurrency_key, W::concurrency_key(input)) {
            (None, Some(key)) => self.concurrency_key(key),
            _ => self,
        }
    }
}

/// The rule for a concurrency key, given at start or derived by a key
/// method: an idempotency key's (1 to 255 characters, not blank, no control
/// characters).
///
/// # Errors
/// [`Error::InvalidStartOption`] with `option: "concurrency_key"`.
pub(crate) fn check_concurrency_key(key: &str) -> Result<(), Error> {
    let problem = if key.trim().is_empty() {
        "cannot be empty or blank; leave it out to start the run without a key"
    } else if key.chars().count() > crate::error::MAX_IDEMPOTENCY_KEY_CHARS {
        "must be at most 255 characters"
    } else if key.chars().any(char::is_control) {
        "cannot contain control characters"
    } else {
        return Ok(());
    };
    Err(Error::InvalidStartOption {
        option: "concurrency_key",
        problem: problem.to_owned(),
    })
}

/// [`MAX_DURATION_MS`] as a chrono duration.
fn max_ahead() -> chrono::Duration {
    chrono::Duration::milliseconds(i64::try_from(MAX_DURATION_MS).unwrap_or(i64::MAX))
}

/// The rule for a queue a start names: what `#[workflow(queue = "...")]`
/// accepts (not empty, no whitespace or control characters), and also at most
/// [`MAX_QUEUE_NAME_CHARS`] characters and no invisible formatting characters
/// ([`pgbus_core::is_invisible`]): a name that reads like a served queue but
/// is not one would strand the run.
///
/// # Errors
/// What is wrong, as a sentence fragment.
pub fn check_queue(queue: &str) -> Result<(), &'static str> {
    if queue.is_empty() {
        return Err("cannot be empty; leave it out to use the workflow's queue");
    }
    if queue.chars().count() > MAX_QUEUE_NAME_CHARS {
        return Err("must be at most 255 characters");
    }
    if queue
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || pgbus_core::is_invisible(c))
    {
        return Err(
            "cannot contain whitespace, control or invisible formatting characters; use e.g. `orders_eu`",
        );
    }
    Ok(())
}

/// One run of a bulk start as a store takes it
/// ([`Store::start_many`](crate::store::Store::start_many)): its input as
/// JSON and its options.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    /// The run's input.
    pub input: serde_json::Value,
    /// Its options.
    pub options: StartOptions,
}

impl NewRun {
    /// A run to start with `input` and `options`.
    #[must_use]
    pub const fn new(input: serde_json::Value, options: StartOptions) -> Self {
        Self { input, options }
    }
}

/// The starts of a bulk call as a store takes them
/// ([`Store::start_many`](crate::store::Store::start_many)): each input
/// serialized to JSON, in order, each start's options with the run's
/// concurrency key ([`StartOptions::with_key_of`]). What [`Client::start_many`](crate::Client::start_many)
/// and the testkit's `TestEnv::start_many` do first. Past
/// [`MAX_STARTS_PER_CALL`], the rest are counted, not serialized.
///
/// # Errors
/// [`Error::TooManyStarts`]; [`Error::StartRefused`] with [`Error::Json`]
/// for an input that does not serialize.
pub fn new_runs<W: Workflow>(
    starts: impl IntoIterator<Item = (impl Borrow<W::Input>, StartOptions)>,
) -> Result<Vec<NewRun>, Error> {
    let mut starts = starts.into_iter();
    let mut runs = Vec::new();
    while let Some((input, options)) = starts.next() {
        let index = runs.len();
        if index == MAX_STARTS_PER_CALL {
            // Over the bound: count the rest without serializing them.
            crate::engine::check_bulk_count(
                index
                    .saturating_add(1)
                    .saturating_add(starts.by_ref().count()),
            )?;
        }
        let options = options.with_key_of::<W>(input.borrow());
        let input = serde_json::to_value(input.borrow()).map_err(|error| Error::StartRefused {
            index,
            source: Box::new(Error::Json(error)),
        })?;
        runs.push(NewRun::new(input, options));
    }
    Ok(runs)
}

/// The size of `value` as compact JSON, in bytes (what the input limits
/// count).
pub(crate) fn json_bytes(value: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

#[cfg(test)]
mod tests;
