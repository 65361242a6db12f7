//! Whose clock decides when something is due: the database's, or a clock a test
//! moves by hand.
//!
//! Every due time, wait and stall horizon is computed in SQL as
//! `coalesce($now, clock_timestamp())`: with [`Clock::Database`] the parameter is
//! `NULL` and Postgres's `clock_timestamp()` decides (not the transaction start
//! time, so a run started inside a long transaction is not scheduled in the past);
//! with a [`ManualClock`] the pinned time is bound instead. Worker wall clocks
//! never decide when a step is due.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};

/// The time source of a client or worker.
#[derive(Debug, Clone, Default)]
pub enum Clock {
    /// The database's `clock_timestamp()`: what production uses.
    #[default]
    Database,
    /// A time pinned by a test and moved with [`ManualClock::advance`].
    Manual(ManualClock),
}

impl Clock {
    /// The time to bind as `$now`: `None` lets the database decide.
    #[must_use]
    pub fn now(&self) -> Option<DateTime<Utc>> {
        match self {
            Self::Database => None,
            Self::Manual(manual) => Some(manual.now()),
        }
    }
}

/// A clock that only moves when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<Mutex<DateTime<Utc>>>,
}

impl ManualClock {
    /// A clock pinned at `start`.
    #[must_use]
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Arc::new(Mutex::new(start)),
        }
    }

    /// The pinned time.
    #[must_use]
    pub fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Moves the clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        *now = now.checked_add_signed(by).unwrap_or(*now);
    }
}

impl From<ManualClock> for Clock {
    fn from(clock: ManualClock) -> Self {
        Self::Manual(clock)
    }
}
