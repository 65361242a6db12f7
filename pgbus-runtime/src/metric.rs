//! The names of the metrics pgbus records through the `metrics` facade, one
//! constant each. Install any `metrics` recorder (a Prometheus exporter, say)
//! to collect them; without one they cost nothing.

/// Histogram, seconds from a step's due time to its claim; label `workflow`.
pub const STEP_PICKUP_LATENCY: &str = "pgbus_step_pickup_latency_seconds";
/// Histogram, seconds an attempt ran; labels `workflow`, `step`.
pub const STEP_DURATION: &str = "pgbus_step_duration_seconds";
/// Counter of attempts whose outcome was applied; labels `workflow`, `step`,
/// `outcome`.
pub const STEPS: &str = "pgbus_steps_total";
/// Counter of attempts that parked to wait for a signal or a batch; labels
/// `workflow`, `step`.
pub const STEPS_PARKED: &str = "pgbus_steps_parked_total";
/// Counter of stalled attempts the sweep repaired; label `detection`
/// (`timeout` or `worker_lost`).
pub const STALLS: &str = "pgbus_stalls_total";
/// Counter of the sweep's repairs; label `repair` (`stalled_attempt`, `batch`).
pub const SWEEP_REPAIRS: &str = "pgbus_sweep_repairs_total";
/// Counter of runs the sweep found past their deadline; label `action`
/// (`cancel`, `pause`).
pub const DEADLINES_EXCEEDED: &str = "pgbus_deadlines_exceeded_total";
/// Counter of batches the sweep resolved.
pub const BATCHES_RESOLVED: &str = "pgbus_batches_resolved_total";
/// Counter of runs retention deleted.
pub const RUNS_DELETED: &str = "pgbus_runs_deleted_total";
/// Gauge of runs by `status` (`ready`, `performing`, `paused`), with
/// `WorkerBuilder::run_gauges`.
pub const RUNS: &str = "pgbus_runs";
/// Counter of schedule ticks a fire handled; labels `schedule`, `outcome`
/// (`started`: a run was started for it; `skipped`: a missed tick the
/// catch-up policy ran nothing for).
pub const SCHEDULE_TICKS: &str = "pgbus_schedule_ticks_total";
/// Counter of due steps a claim held back at a concurrency limit (out of
/// the due queue until a slot of the limit is given back); labels
/// `workflow`, `scope` (`workflow`, `key` or `queue`: which limit). Never
/// labelled by a key's value: those are unbounded.
pub const STEPS_HELD: &str = "pgbus_steps_held_total";
/// Counter of due steps a claim throttled (due again when the rate window
/// lets them start); labels `workflow`, `scope` (`workflow`, `step` or
/// `key`: which rate).
pub const STEPS_THROTTLED: &str = "pgbus_steps_throttled_total";
