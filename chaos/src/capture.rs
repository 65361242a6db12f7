//! The in-process tests' view of the runtime's log: a `tracing` layer that
//! keeps, for every event at `info` and up and the worker's `debug` "step
//! ended" lines, when it happened, its level, its message and its
//! `pgbus.outcome` field, so the failover and half-open modes
//! can measure when a worker noticed a lost connection and when steps completed
//! again, without polling the database while it is away.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;

/// One event.
#[derive(Debug, Clone)]
pub(crate) struct Logged {
    pub(crate) at: Instant,
    pub(crate) level: Level,
    /// Where it came from (`pgbus_runtime::worker`, `deadpool.postgres`...).
    pub(crate) target: String,
    pub(crate) message: String,
    /// The `pgbus.outcome` field (`completed`, `reattempted`, ...), if any.
    pub(crate) outcome: Option<String>,
    /// The `error` field, if any.
    pub(crate) error: Option<String>,
}

/// The events so far; cheap to clone.
#[derive(Debug, Clone, Default)]
pub(crate) struct Captured {
    events: Arc<Mutex<Vec<Logged>>>,
}

impl Captured {
    /// A copy of every event so far.
    pub(crate) fn events(&self) -> Vec<Logged> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// How many steps were logged as ended with outcome `completed`.
    pub(crate) fn completed_steps(&self) -> usize {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|e| e.is_completed_step())
            .count()
    }

    /// Warnings and errors after `since`, counted per message, most frequent
    /// first.
    pub(crate) fn warnings_since(&self, since: Instant) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for event in self.events() {
            if event.at < since || event.level > Level::WARN {
                continue;
            }
            // `#[instrument(err)]` events have no message, only the error.
            let message = if event.message.is_empty() {
                format!("{}: {}", event.target, event.error.unwrap_or_default())
            } else {
                event.message
            };
            match counts.iter_mut().find(|(m, _)| *m == message) {
                Some((_, n)) => *n += 1,
                None => counts.push((message, 1)),
            }
        }
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts
    }

    /// The first event after `since` that `matches`.
    pub(crate) fn first_after(
        &self,
        since: Instant,
        matches: impl Fn(&Logged) -> bool,
    ) -> Option<Logged> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|e| e.at >= since && matches(e))
            .cloned()
    }
}

impl Logged {
    /// A worker's "step ended" line for an attempt that completed.
    pub(crate) fn is_completed_step(&self) -> bool {
        self.message == "step ended" && self.outcome.as_deref() == Some("completed")
    }
}

/// Where the worker logs each attempt's end ("step ended", at `debug`).
pub(crate) const STEP_TARGET: &str = "pgbus_runtime::worker";

/// The layer that fills a [`Captured`].
pub(crate) struct CaptureLayer(pub(crate) Captured);

impl<S: Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &Event<'_>, _cx: Context<'_, S>) {
        let metadata = event.metadata();
        // Steps' ends are `debug`; the rest of `debug` is polling.
        if *metadata.level() > Level::INFO
            && !(*metadata.level() == Level::DEBUG && metadata.target() == STEP_TARGET)
        {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let logged = Logged {
            at: Instant::now(),
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message: fields.message,
            outcome: fields.outcome,
            error: fields.error,
        };
        self.0
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(logged);
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    outcome: Option<String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => value.clone_into(&mut self.message),
            "pgbus.outcome" => self.outcome = Some(value.to_owned()),
            "error" => self.error = Some(value.to_owned()),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut text = String::new();
        let _ = write!(text, "{value:?}");
        self.record_str(field, &text);
    }
}
