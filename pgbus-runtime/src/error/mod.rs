//! Errors a step body, a guard or a handler can fail with, and the errors the
//! engine itself raises into a step.

mod call;
mod driver;
mod step_error;

use std::time::Duration;

use call::{describe_error, describe_reason, unrunnable_hint};
#[cfg(feature = "sqlx")]
use driver::describe_sqlx_error;
use driver::{describe_driver_error, describe_pool_error, driver_cause};
pub(crate) use step_error::display_chain;
pub use step_error::{StepError, cap_message};

/// The longest error message kept on a step row, in characters; longer messages
/// are cut and end in `…`. NUL characters, which Postgres text cannot hold, are
/// kept as `U+FFFD`.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 10_000;
/// The longest idempotency key accepted, in characters.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
/// How many causes (the `source()` chain below the error) a step row keeps.
pub const MAX_ERROR_CAUSES: usize = 5;

// The error types stay in this module, not in a submodule: their type names
// (`pgbus_runtime::error::Timeout`) are what step and run rows store as the
// error class.

/// A plain message error, from [`StepError::msg`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Message(pub String);

/// A step body ran past its `timeout`. Match it in a policy with
/// `on_exception(matching(Timeout), ...)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step ran past its timeout of {after:?}")]
#[non_exhaustive]
pub struct Timeout {
    /// The step's timeout.
    pub after: Duration,
}

/// A step body (or a guard or handler) panicked; the panic is caught and handled
/// as this error, so policies apply and the worker lives on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step panicked: {message}")]
#[non_exhaustive]
pub struct Panicked {
    /// The panic's message, when it was a string.
    pub message: String,
}

/// The run's input did not deserialize into the workflow's input type.
#[derive(Debug, thiserror::Error)]
#[error("the run's input is not a valid `{input_type}`")]
#[non_exhaustive]
pub struct BadInput {
    /// The workflow's input type, as written.
    pub input_type: &'static str,
    /// What serde said.
    #[source]
    pub source: serde_json::Error,
}

/// The attempt's outcome could not be stored as it was (an output or text that
/// Postgres refuses), or the run's stored input, outputs or signals cannot be read back
/// (JSON nested deeper than the driver reads); the run is paused with this error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the step's outcome could not be stored or its data read: {reason}")]
#[non_exhaustive]
pub struct Unstorable {
    /// What Postgres or the driver said.
    pub reason: String,
}

/// The sweep found the attempt stalled: past its `stall_at` (`timeout`) or
/// claimed by a worker that stopped heartbeating (`worker_lost`). Applied with the
/// worker's stall action and a `stall_detected` event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("attempt {attempt} of step `{step}` stalled ({detection})")]
#[non_exhaustive]
pub struct StepStalled {
    /// `timeout` or `worker_lost`.
    pub detection: String,
    /// The step.
    pub step: String,
    /// The attempt.
    pub attempt: i32,
}

/// A `wait_for` step's `wait_timeout` passed with no matching signal. The step
/// row keeps it as its error, whatever `on_timeout` says (`run` excepted: the
/// body runs and its own result is recorded); with `pause`, resuming the run runs
/// a new attempt that waits again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("step `{step}` waited {waited} for signal `{signal}`, which did not come")]
#[non_exhaustive]
pub struct WaitTimedOut {
    /// The step.
    pub step: String,
    /// The signal it waited for.
    pub signal: String,
    /// Its `wait_timeout`, as written in the duration grammar (`1h`, `90s`).
    pub waited: String,
}

/// A fan_out step's batch ended with cancelled children. Applied with the step's
/// `on_batch_failure` (default pause); a resume or reattempt starts a fresh batch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "fan_out step `{step}`: {cancelled} of {total} child runs were cancelled ({finished} finished)"
)]
#[non_exhaustive]
pub struct FanOutFailed {
    /// The step.
    pub step: String,
    /// The batch's id (`batches.id`).
    pub batch_id: i64,
    /// Children in the batch.
    pub total: i32,
    /// Children that finished.
    pub finished: i32,
    /// Children that were cancelled.
    pub cancelled: i32,
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

/// The error of a client, worker or migration call.
///
/// `Display` is one line that says what happened, with the server's own words
/// where the server spoke: `database error: ERROR: canceling statement due to
/// statement timeout (SQLSTATE 57014)`. `Debug` (what `main` prints for an
/// `Err` it returns, and `{:?}`) is that line followed by the error's causes,
/// one per line, as `anyhow` prints a chain. The driver variants carry the
/// driver's error for code that wants to inspect it ([`tokio_postgres::Error::code`],
/// [`tokio_postgres::Error::as_db_error`]) but report no `source()`: their
/// `Display` already says everything the driver knows, so a chain printer
/// would only say it twice.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Postgres refused or failed a statement, or the connection failed.
    #[error("database error: {}", describe_driver_error(.0))]
    Database(tokio_postgres::Error),
    /// The caller's sqlx connection refused or failed a statement (see
    /// [`Client::start_in_sqlx`](crate::Client::start_in_sqlx)); sqlx's own
    /// words end the `Display`, so it is not also a `source()`.
    #[cfg(feature = "sqlx")]
    #[error("{}", describe_sqlx_error(.0))]
    Sqlx(sqlx::Error),
    /// No connection could be had from the pool.
    #[error("{}", describe_pool_error(.0))]
    Pool(deadpool_postgres::PoolError),
    /// The pool could not be built.
    #[error("could not build the connection pool")]
    BuildPool(#[from] deadpool_postgres::BuildError),
    /// The schema name is not a plain identifier.
    #[error(
        "schema name `{0}` is not a valid identifier: use 1 to 57 lowercase letters, digits and `_`, not starting with a digit nor with `pg_` (57 leaves room for the `pgbus_` of the notification channel within Postgres's 63)"
    )]
    InvalidSchema(String),
    /// A migration that was already applied has changed since.
    #[error(
        "migration {version} ({name}) was changed after it was applied (checksum {applied} in the database, {current} now); migrations are append-only, add a new one instead"
    )]
    MigrationChanged {
        /// Its number.
        version: i32,
        /// Its file name.
        name: String,
        /// The checksum recorded when it was applied.
        applied: String,
        /// The checksum of the file now.
        current: String,
    },
    /// The database has migrations this build does not know: a newer version ran.
    #[error(
        "the database has migration {version}, which this build does not know; deploy the newer build"
    )]
    UnknownMigration {
        /// The unknown migration's number.
        version: i32,
    },
    /// No run has this id.
    #[error("run {run_id} does not exist")]
    RunNotFound {
        /// The id asked for.
        run_id: crate::RunId,
    },
    /// An operator action that is not legal from the run's state (pause of a
    /// paused run, resume of a running one, anything on an ended run, ...).
    #[error("cannot {action} run {run_id}: {why}")]
    IllegalMove {
        /// The run.
        run_id: crate::RunId,
        /// What was asked.
        action: crate::engine::Action,
        /// Why it is refused.
        why: crate::engine::IllegalMove,
    },
    /// A signal for a run that has finished or been cancelled; nothing was
    /// stored.
    #[error("run {run_id} has ended ({status}); the signal was not stored")]
    RunEnded {
        /// The run.
        run_id: crate::RunId,
        /// `finished` or `cancelled`.
        status: crate::RunStatus,
    },
    /// A run input (a start's, or a fan-out child's) that cannot be stored
    /// or read back: see [`crate::context::check_input`].
    #[error("invalid input: {reason}")]
    InvalidInput {
        /// What is wrong.
        reason: String,
    },
    /// A signal whose name or payload cannot be stored.
    #[error("invalid signal: {reason}")]
    InvalidSignal {
        /// What is wrong.
        reason: String,
    },
    /// A signal ([`Client::signal`](crate::Client::signal), `TestEnv::signal`,
    /// `pgbus signal`) whose name no step of the run's workflow waits for, in
    /// any definition of it the store knows: the run's own (recorded at
    /// start), any registered by a worker, and the steps of the run parked
    /// now (see [`engine::check_signal_target`](crate::engine::check_signal_target)).
    /// Nothing was stored. A signal meant for a later version of the workflow
    /// goes through [`Client::signal_unchecked`](crate::Client::signal_unchecked)
    /// (`pgbus signal --unchecked`).
    #[error("{}", crate::engine::describe_unknown_signal(*.run_id, .workflow, .name, .waited_for, .suggestion.as_deref()))]
    UnknownSignal {
        /// The run.
        run_id: crate::RunId,
        /// Its workflow.
        workflow: String,
        /// The name sent.
        name: String,
        /// The names the workflow's steps wait for, sorted; empty when none
        /// waits for a signal.
        waited_for: Vec<String>,
        /// The waited-for name closest to `name`, when one is close enough
        /// to be a typo of it.
        suggestion: Option<String>,
    },
    /// An operator action's actor that is empty, over 255 characters, holds
    /// control or invisible formatting characters, or starts or ends with
    /// whitespace.
    #[error(
        "an actor must be 1 to 255 characters of visible text, without whitespace at either end"
    )]
    InvalidActor,
    /// An operator action's reason that is empty, whitespace alone or over
    /// 10,000 characters (see [`crate::client::check_reason`]).
    #[error("a reason must say why: 1 to 10,000 characters, not whitespace alone")]
    InvalidReason,
    /// An idempotency key that is empty or only whitespace.
    #[error("an idempotency key cannot be empty or blank")]
    BlankIdempotencyKey,
    /// An idempotency key longer than [`MAX_IDEMPOTENCY_KEY_CHARS`] or holding
    /// control characters.
    #[error("an idempotency key must be at most 255 characters of visible text")]
    InvalidIdempotencyKey,
    /// An idempotent start in a caller's transaction met a run with the same
    /// key that the transaction cannot see: another transaction committed it
    /// after this one's snapshot was taken (`REPEATABLE READ` or
    /// `SERIALIZABLE`; Postgres reports a serialization failure), or it was
    /// deleted meanwhile. Nothing was started, and the caller's transaction is
    /// aborted: roll it back and run it again, and the start returns that run
    /// (or, at `READ COMMITTED`, this cannot happen for a visible run).
    #[error(
        "a run of `{workflow}` with this idempotency key was committed after this transaction's \
         snapshot was taken, so this transaction cannot see it; roll back and retry the \
         transaction (a serialization conflict: `is_transient` says so)"
    )]
    StartConflict {
        /// The workflow.
        workflow: String,
    },
    /// A start option ([`StartOptions`](crate::StartOptions)) out of bounds:
    /// an `at` more than 36,500 days ahead, a `delay` over 36,500 days, a
    /// `queue` that is empty, over 255 characters or holds whitespace,
    /// control or invisible characters, a `deadline` not after the run's
    /// start time or more than 36,500 days after it (see
    /// [`StartOptions::check`](crate::StartOptions::check)). Nothing was
    /// started. A bad key keeps its own errors
    /// ([`Error::BlankIdempotencyKey`], [`Error::InvalidIdempotencyKey`]).
    #[error("start option `{option}` {problem}")]
    InvalidStartOption {
        /// The option: `at`, `delay`, `queue`, `deadline` or
        /// `deadline_after`.
        option: &'static str,
        /// What is wrong with it, and the rule.
        problem: String,
    },
    /// A bulk start ([`Client::start_many`](crate::Client::start_many)) over
    /// its bounds: more than [`MAX_STARTS_PER_CALL`](crate::MAX_STARTS_PER_CALL)
    /// (1,000) runs, or more than
    /// [`MAX_START_MANY_INPUT_BYTES`](crate::MAX_START_MANY_INPUT_BYTES)
    /// (32 MiB) of input JSON in all. Nothing was started; split the call.
    #[error(
        "a start_many call starts at most {max_runs} runs and {max_bytes} bytes of input JSON; this one has {runs} runs{}: split it",
        .input_bytes.map(|b| format!(" and {b} bytes")).unwrap_or_default()
    )]
    TooManyStarts {
        /// The runs given.
        runs: usize,
        /// Their input JSON in bytes, when counted (not when the count
        /// alone was over).
        input_bytes: Option<usize>,
        /// [`MAX_STARTS_PER_CALL`](crate::MAX_STARTS_PER_CALL).
        max_runs: usize,
        /// [`MAX_START_MANY_INPUT_BYTES`](crate::MAX_START_MANY_INPUT_BYTES).
        max_bytes: usize,
    },
    /// One start of a bulk start ([`Client::start_many`](crate::Client::start_many))
    /// was refused: its input did not serialize ([`Error::Json`]) or broke
    /// the input limits ([`Error::InvalidInput`]), or its options were bad
    /// ([`Error::InvalidStartOption`], a key's errors). Nothing of the call
    /// was started. `source` says why.
    #[error(
        "start {index} of the start_many call (counting from 0) was refused, so none was started"
    )]
    StartRefused {
        /// Its position in the call's inputs, from 0.
        index: usize,
        /// Why.
        #[source]
        source: Box<Error>,
    },
    /// The workflow has no live step to start with.
    #[error("workflow `{workflow}` has no step to run")]
    NoSteps {
        /// The workflow's name.
        workflow: String,
    },
    /// Two registered workflow values share a durable name.
    #[error("workflow `{workflow}` is registered twice")]
    DuplicateWorkflow {
        /// The name.
        workflow: String,
    },
    /// A worker was built with nothing to run.
    #[error("a worker needs at least one registered workflow and one queue")]
    NothingToRun,
    /// A schedule's name, expression, zone, catch-up policy, workflow or
    /// input was refused; `field` names which (`name`, `schedule`,
    /// `timezone`, `catch_up`, `workflow`, `input`), and `reason` says why,
    /// starting with it.
    #[error("schedule `{name}`: {reason}")]
    InvalidSchedule {
        /// The schedule's name as given (cut to 64 characters with `…`).
        name: String,
        /// The field refused.
        field: &'static str,
        /// Why, naming the field first (`` `timezone`: ... ``).
        reason: String,
    },
    /// A per-deployment override ([`Overrides`](crate::Overrides)) was
    /// refused, at registration (a worker's build, `TestEnv::overrides`), when
    /// read ([`Overrides::from_json_str`](crate::Overrides::from_json_str)),
    /// or at a client's first start of the workflow: a value the macro would
    /// refuse in the source, a workflow the worker does not register, a step
    /// the workflow does not have or that is a gravestone, a `wait_timeout`
    /// on a step without `wait_for`. Nothing runs with it. The refusal names
    /// the workflow, the step and the option (boxed: an error is returned
    /// through every call, and this one is rare).
    #[error("{0}")]
    InvalidOverride(Box<crate::overrides::OverrideRefused>),
    /// No schedule has this name.
    #[error("schedule `{name}` does not exist")]
    ScheduleNotFound {
        /// The name asked for.
        name: String,
    },
    /// A schedule of this name exists already.
    #[error("schedule `{name}` exists already; update it, or pick another name")]
    ScheduleExists {
        /// The name.
        name: String,
    },
    /// An update of a schedule declared in code: the next worker to register
    /// its workflow would write the code's values back. Change the code, or
    /// pause the schedule.
    #[error(
        "schedule `{name}` is declared in code by workflow `{workflow}`; change it there (pausing, resuming and deleting work here)"
    )]
    ScheduleDeclaredInCode {
        /// The schedule.
        name: String,
        /// The workflow that declares it.
        workflow: String,
    },
    /// A pause of a paused schedule, or a resume of one that is not paused.
    #[error("cannot change schedule `{name}`: {why}")]
    IllegalScheduleChange {
        /// The schedule.
        name: String,
        /// Why not.
        why: String,
    },
    /// A start in a test environment (the testkit's `TestEnv`) of a workflow
    /// it has not registered: none of its steps would ever run there.
    #[error(
        "workflow `{workflow}` is not registered in this environment; register it first with `TestEnv::register`, as a worker must register every workflow it runs"
    )]
    WorkflowNotRegistered {
        /// The workflow's name.
        workflow: String,
    },
    /// A run cannot go on: it is `ready`, and its due step is one no live
    /// worker can run (see [`Unrunnable`](crate::Unrunnable)): no live worker
    /// registered its workflow, none of their definitions of it has the
    /// step, or none of those that have it claims from the row's queue. The
    /// testkit's `TestEnv::run_to_completion` returns it rather
    /// than end with the run still `ready` and nothing said.
    #[error(
        "run {run_id} cannot go on: {unrunnable} (its step `{}` has been due since {}); {}",
        .unrunnable.step_name,
        .unrunnable.since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        unrunnable_hint(.unrunnable)
    )]
    RunUnrunnable {
        /// The run.
        run_id: crate::RunId,
        /// Which row waits, what is missing and since when.
        unrunnable: Box<crate::Unrunnable>,
    },
    /// A run whose result was asked for ([`Client::result`](crate::Client::result),
    /// the testkit's `TestEnv::result`) was cancelled: by an operator, a step's
    /// `Flow::Cancel` or a policy, a `cancel_if`, the stall action, or its
    /// fan-out parent's cancel. As DBOS's `get_result` raises for a cancelled
    /// workflow.
    #[error("run {run_id} was cancelled{}", describe_reason(.reason.as_deref()))]
    RunCancelled {
        /// The run.
        run_id: crate::RunId,
        /// The reason its `cancelled` event gave, if any.
        reason: Option<String>,
    },
    /// A run whose result was asked for is paused: at once, by default, or
    /// still paused when the wait's timeout came (see
    /// [`OnPause`](crate::engine::OnPause)). It waits for an operator to
    /// resume, skip or cancel it.
    #[error(
        "run {run_id} is paused{}{}; resume, skip or cancel it",
        describe_reason(.reason.as_deref()),
        describe_error(.error_class.as_deref(), .error_message.as_deref())
    )]
    RunPaused {
        /// The run.
        run_id: crate::RunId,
        /// The reason its `paused` event gave, if any.
        reason: Option<String>,
        /// The error it paused on (a policy's pause, a stall), if any.
        error_class: Option<String>,
        /// That error's message.
        error_message: Option<String>,
    },
    /// A wait for a run's result reached its timeout with the run not ended.
    #[error("run {run_id} did not end within {waited:?} (it is {status})")]
    ResultTimeout {
        /// The run.
        run_id: crate::RunId,
        /// Its status when last read: `ready` or `performing`.
        status: crate::RunStatus,
        /// How long the wait lasted (the timeout asked for).
        waited: Duration,
    },
    /// A finished run's result (the output of the attempt that finished it,
    /// or `null` when that attempt recorded none) does not deserialize into
    /// the workflow's `Output` type: the type changed since the run ended, or
    /// the last step writes something else, or nothing.
    #[error(
        "the result of run {run_id}{} is not a valid `{output_type}`",
        .step.as_deref().map(|step| format!(" (the output of step `{step}`)")).unwrap_or_default()
    )]
    ResultDecode {
        /// The run.
        run_id: crate::RunId,
        /// The step whose output it is; `None` when the run has no attempt.
        step: Option<String>,
        /// The workflow's `Output` type, as Rust names it.
        output_type: &'static str,
        /// What serde said.
        #[source]
        source: serde_json::Error,
    },
    /// A definitions document ([`Definitions`](crate::deploy::Definitions):
    /// `Worker::definitions`, a `--print-definitions` hook, the file `pgbus
    /// deploy-check` reads) that is not JSON, is of a format this version does
    /// not read, or does not hold together (a digest that does not match its
    /// entries, a workflow given twice, no queue).
    #[error("invalid definitions document: {reason}")]
    InvalidDefinitions {
        /// What is wrong, and where.
        reason: String,
    },
    /// A run export (`pgbus show --json`, or a `RunView` as JSON) that a
    /// replay cannot read.
    #[error("invalid run export: {reason}")]
    InvalidRunExport {
        /// What is wrong, and where.
        reason: String,
    },
    /// A run filter's input path (`RunFilter::input_path`) that PostgreSQL
    /// does not read as an SQL/JSON path.
    #[error("invalid input path `{path}`: {reason}")]
    InvalidInputPath {
        /// The path as given.
        path: String,
        /// What the parser said.
        reason: String,
    },
    /// An input or output could not be converted to or from JSON.
    #[error("JSON conversion failed")]
    Json(#[from] serde_json::Error),
    /// A row held a value this version cannot read (a status, a negative number).
    #[error("unexpected value in the database: {0}")]
    Corrupt(String),
    /// A statement that must change rows changed a different number of them.
    #[error("statement `{statement}` changed {found} rows, expected {expected}")]
    RowCount {
        /// Which statement.
        statement: &'static str,
        /// Rows expected.
        expected: u64,
        /// Rows changed.
        found: u64,
    },
    /// A connection setting is unknown, ill-formed, out of range or does not
    /// fit with another: in the URL or key-value string, in a libpq
    /// environment variable (then `setting` is the variable's name, e.g.
    /// `PGPORT`), or given to [`crate::DatabaseBuilder`]; or a worker setting
    /// [`crate::WorkerBuilder`] refuses (`setting` names its method, e.g.
    /// `WorkerBuilder::name`); or per-deployment overrides' text that is not
    /// JSON of their shape (`setting` is `overrides`, the environment
    /// variable, or the file it came from; see [`crate::Overrides`]).
    #[error("setting `{setting}` {problem}")]
    InvalidSetting {
        /// The setting to change, as libpq (or the builder method) names it.
        setting: String,
        /// What is wrong with it, and the allowed values.
        problem: String,
    },
    /// A certificate or key file a TLS setting names cannot be read, or holds
    /// nothing usable.
    #[error("cannot use `{setting}` file `{}`: {reason}", path.display())]
    UnreadableFile {
        /// `sslrootcert`, `sslcert` or `sslkey`.
        setting: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// Why: the operating system's error, or what the file lacks.
        reason: String,
    },
    /// Under `sslmode=verify-ca` or `verify-full` (or `require` with a root
    /// certificate), the server's certificate chain does not end at a root of
    /// `sslrootcert`, or is expired or otherwise invalid.
    #[error(
        "the certificate of server {host}:{port} is not trusted: {reason}; point `sslrootcert` at the CA that signed it"
    )]
    CertificateNotTrusted {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// Which check failed, in words.
        reason: String,
        /// The driver's error, with rustls's below it.
        #[source]
        source: tokio_postgres::Error,
    },
    /// Under `sslmode=verify-full`, the server's certificate is trusted but does
    /// not name the host connected to.
    #[error(
        "the certificate of server {host}:{port} does not name host `{host}` (it names {}); connect by a name it lists, or check only the chain with `sslmode=verify-ca`",
        if presented.is_empty() { "other hosts".to_owned() } else { presented.join(", ") }
    )]
    HostNameMismatch {
        /// The host connected to, which the certificate should name.
        host: String,
        /// Its port.
        port: u16,
        /// The names the certificate gives (DNS names and IP addresses), when
        /// rustls reports them.
        presented: Vec<String>,
        /// The driver's error, with rustls's below it.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server does not offer TLS, and `sslmode` requires it.
    #[error(
        "server {host}:{port} does not accept TLS connections and `sslmode={sslmode}` requires TLS; turn `ssl` on in the server, or lower `sslmode` to `prefer`"
    )]
    TlsRefused {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The mode in force.
        sslmode: crate::connection::SslMode,
    },
    /// The server's `pg_hba.conf` lets in only encrypted connections
    /// (`hostssl`), and `sslmode=disable` asked for a plain one.
    #[error(
        "server {host}:{port} accepts only TLS connections and `sslmode={sslmode}` asked for a plain one; set `sslmode=require` (or `verify-full`)"
    )]
    TlsRequired {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The mode in force.
        sslmode: crate::connection::SslMode,
        /// The server's refusal.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The TLS handshake failed for a reason other than the certificate checks
    /// above (no protocol version or cipher in common, the server refused the
    /// client certificate, ...).
    #[error("the TLS handshake with server {host}:{port} failed: {}", driver_cause(.error))]
    Tls {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The driver's error, with rustls's below it; its words end the
        /// `Display`, so it is not also a `source()`.
        error: tokio_postgres::Error,
    },
    /// The server refused the password (SQLSTATE 28P01).
    #[error(
        "password authentication failed for user `{user}` at server {host}:{port}; check the URL's password or `PGPASSWORD`"
    )]
    WrongPassword {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The user.
        user: String,
        /// The server's refusal.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The server asked for a password and none was given.
    #[error(
        "server {host}:{port} asks user `{user}` for a password and none is set; put it in the URL or `PGPASSWORD`"
    )]
    PasswordMissing {
        /// The host connected to.
        host: String,
        /// Its port.
        port: u16,
        /// The user.
        user: String,
    },
    /// No connection could be made to the server: refused, unreachable, the
    /// name does not resolve, or the connection dropped while starting.
    #[error("could not connect to server {host}:{port}: {}", driver_cause(.error))]
    Connect {
        /// The host connected to (the last one tried, of several).
        host: String,
        /// Its port.
        port: u16,
        /// The driver's error; its words (`Connection refused (os error
        /// 111)`) end the `Display`, so it is not also a `source()`.
        error: tokio_postgres::Error,
    },
    /// A pooler or proxy in front of the server (`PgBouncer` says
    /// "unsupported startup parameter") refused a startup parameter pgbus
    /// sends: its session settings go as startup `options` (`jit = off`, the
    /// server's side of the keepalives, a `statement_timeout`) unless
    /// [`crate::DatabaseBuilder::transaction_pooler`] is on.
    #[error(
        "server {host}:{port} refused a startup parameter ({message}); behind PgBouncer or another pooler, connect with `DatabaseBuilder::transaction_pooler(true)` (`pgbus --transaction-pooler`), which sends none, or add it to the pooler's `ignore_startup_parameters`"
    )]
    StartupParameterRefused {
        /// The pooler's host.
        host: String,
        /// Its port.
        port: u16,
        /// What it said.
        message: String,
    },
    /// The server did not finish the connection (TCP, TLS and authentication)
    /// within the connect timeout.
    #[error(
        "server {host}:{port} did not complete the connection within {after:?}; check the server is up, or raise `connect_timeout`"
    )]
    ConnectTimeout {
        /// The host connected to (the last one tried, of several).
        host: String,
        /// Its port.
        port: u16,
        /// The connect timeout.
        after: Duration,
    },
}

#[cfg(test)]
mod tests;
