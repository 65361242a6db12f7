//! One harness over any store: a scenario is a function generic over [`Rig`],
//! and everything it does goes through the store contract ([`Store`]'s verbs),
//! the runtime's one step loop ([`Runner`]) and its sweep ([`sweep`]); what
//! the contract has no verb for is the [`Rig`]'s.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use pgbus_runtime::engine::SignalCheck;
use pgbus_runtime::store::{
    Attempted, Claim, Claimer, Ended, Observe, Registration, Runner, Store, SweepSettings, sweep,
};
use pgbus_runtime::worker::{
    DEFAULT_EAGER_STEPS, DEFAULT_RETENTION, DEFAULT_UNDEFINED_STEP_GRACE, RETENTION_BATCH,
    RETENTION_BATCHES, capped_ms,
};
use pgbus_runtime::{
    Action, Error, RunFilter, RunId, RunRead, RunStatus, RunView, SignalId, StallAction,
    SweepReport, Workflow,
};
use tokio::task::JoinSet;

use super::rigs::Rig;

/// The id the harness's runner claims under.
pub(super) const WORKER: &str = "diff-worker";

/// How many attempts one `run_until_idle` runs before it calls the loop a
/// runaway, as `TestEnv`'s does.
const MAX_ATTEMPTS: usize = pgbus_testkit::MAX_ATTEMPTS_PER_CALL;

/// How a harness's step loop takes steps. The suite drives the memory store
/// the way `TestEnv` does and Postgres the way a worker does, as it did when
/// each store had a driver of its own, so it still holds a step handed on in
/// an outcome's own transition to the history a claim of it leaves.
#[derive(Debug, Clone, Copy)]
pub(super) struct Pace {
    /// At most this many claims at once, each attempt in a task of its own.
    width: usize,
    /// How many handed-on steps in a row one claim runs (0: never handed on).
    eager: usize,
}

impl Pace {
    /// `TestEnv::run_next`'s: one claim at a time, one attempt per claim.
    pub(super) const STEPWISE: Self = Self { width: 1, eager: 0 };
    /// A worker's: as many claims at once as its default concurrency (8), each
    /// going on with its run's next step when the outcome hands it on, up to
    /// `DEFAULT_EAGER_STEPS` in a row (`Worker::run_until_idle`; `run_once`
    /// is the same claim without the handoff).
    pub(super) const WORKER: Self = Self {
        width: 8,
        eager: DEFAULT_EAGER_STEPS,
    };
}

/// The step loop of a harness, cloned into the tasks it spawns.
struct Steps<S> {
    runner: Arc<Runner<S>>,
    pace: Pace,
    /// Outcomes recorded late (their attempt had lost its claim).
    late: Arc<AtomicUsize>,
}

impl<S> Clone for Steps<S> {
    fn clone(&self) -> Self {
        Self {
            runner: Arc::clone(&self.runner),
            pace: self.pace,
            late: Arc::clone(&self.late),
        }
    }
}

/// Counts the outcomes that lost their fence.
struct Seen(Arc<AtomicUsize>);

impl Observe for Seen {
    type Tracked = ();

    fn track(&self, _claim: &Claim) {}

    fn attempted(&self, attempted: &Attempted<'_>) {
        if matches!(attempted.ended, Some(Ended::Late)) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

impl<S: Store> Steps<S> {
    /// Claims up to the pace's width for the runner's worker, or for `dead`.
    async fn claim(&self, dead: Option<&str>) -> Vec<Claim> {
        let runner = &self.runner;
        let claimer = runner.claimer(runner.claimed_queues());
        let (claimer, limit) = match dead {
            Some(worker_id) => (
                Claimer {
                    worker_id,
                    ..claimer
                },
                1,
            ),
            None => (claimer, self.pace.width),
        };
        runner
            .store()
            .claim(&claimer, limit)
            .await
            .expect("a claim")
    }

    /// Runs each claim in a task of its own, going on with up to `eager`
    /// handed-on steps; how many attempts ran.
    async fn run(&self, claims: Vec<Claim>, eager: usize) -> usize {
        let mut tasks = JoinSet::new();
        for claim in claims {
            let (runner, seen) = (Arc::clone(&self.runner), Seen(Arc::clone(&self.late)));
            tasks.spawn(async move {
                let stopping = AtomicBool::new(eager == 0);
                runner.run_claim(claim, (), &seen, eager, &stopping).await
            });
        }
        let mut ran = 0;
        while let Some(done) = tasks.join_next().await {
            ran += done.expect("an attempt's task");
        }
        ran
    }

    /// One claim at the pace's width, without handoffs; how many attempts ran.
    async fn run_once(&self) -> usize {
        let claims = self.claim(None).await;
        self.run(claims, 0).await
    }
}

/// A store, its rig, the step loop over it with the scenario's workflows, and
/// the sweep's settings.
pub(super) struct Harness<R: Rig> {
    rig: Arc<R>,
    steps: Steps<R::S>,
    sweep: SweepSettings,
    /// How many workers the scenario has killed.
    dead: Arc<AtomicUsize>,
}

impl<R: Rig> Harness<R> {
    /// Nothing registered; the sweep's settings a worker's default.
    pub(super) fn new(rig: R, pace: Pace) -> Self {
        let runner = Runner::new(rig.store().clone(), WORKER);
        Self {
            rig: Arc::new(rig),
            steps: Steps {
                runner: Arc::new(runner),
                pace,
                late: Arc::new(AtomicUsize::new(0)),
            },
            sweep: SweepSettings {
                stall_action: StallAction::Pause,
                lost_ms: capped_ms(Duration::from_secs(30)),
                retention_ms: Some(capped_ms(DEFAULT_RETENTION)),
                stalled_limit: 100,
                batch_limit: 100,
                retention_batch: RETENTION_BATCH,
                retention_batches: RETENTION_BATCHES,
                undefined_grace_ms: Some(capped_ms(DEFAULT_UNDEFINED_STEP_GRACE)),
                undefined_limit: 100,
                deadline_limit: 100,
            },
            dead: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Registers a workflow (a second of the same name replaces the first).
    pub(super) fn register<W: Workflow>(mut self, workflow: W) -> Self {
        let runner = Arc::try_unwrap(self.steps.runner).expect("registered before anything runs");
        self.steps.runner = Arc::new(runner.register(workflow));
        self
    }

    /// What the sweep does with a stalled attempt.
    pub(super) const fn stall_action(mut self, action: StallAction) -> Self {
        self.sweep.stall_action = action;
        self
    }

    /// How long a dead worker stays silent before the sweep takes its
    /// attempts for lost.
    pub(super) fn lost_worker_threshold(mut self, threshold: Duration) -> Self {
        self.sweep.lost_ms = capped_ms(threshold);
        self
    }

    /// How long the sweep keeps ended runs (`None`: for ever).
    pub(super) fn retention(mut self, retention: Option<Duration>) -> Self {
        self.sweep.retention_ms = retention.map(capped_ms);
        self
    }

    /// A new deploy over the same store: a runner with nothing registered (the
    /// old one runs nothing more), the same settings.
    pub(super) fn redeploy(&self) -> Self {
        Self {
            rig: Arc::clone(&self.rig),
            steps: Steps {
                runner: Arc::new(Runner::new(self.store().clone(), WORKER)),
                ..self.steps.clone()
            },
            sweep: self.sweep,
            dead: Arc::clone(&self.dead),
        }
    }

    pub(super) fn store(&self) -> &R::S {
        self.rig.store()
    }

    /// Registers the harness's worker in the store's registry with the
    /// runner's definitions, as a worker does before its first claim: the
    /// sweep's grace rule counts it live.
    pub(super) async fn announce(&self) {
        let runner = &self.steps.runner;
        let definitions = runner.definitions();
        let registration = Registration {
            worker_id: WORKER,
            name: WORKER,
            host: "test",
            pid: 0,
            queues: runner.claimed_queues(),
            concurrency: self.steps.pace.width,
            definitions: &definitions,
            queue_limits: &[],
        };
        self.store()
            .register_worker(&registration)
            .await
            .expect("a registration");
    }

    pub(super) async fn start<W: Workflow>(&self, input: &W::Input) -> RunId {
        self.start_run::<W>(input, None).await
    }

    pub(super) async fn start_keyed<W: Workflow>(&self, input: &W::Input, key: &str) -> RunId {
        self.start_run::<W>(input, Some(key)).await
    }

    async fn start_run<W: Workflow>(&self, input: &W::Input, key: Option<&str>) -> RunId {
        let mut options = key.map_or_else(pgbus_runtime::StartOptions::new, |key| {
            pgbus_runtime::StartOptions::new().key(key)
        });
        // The concurrency key the client derives from the input.
        if let Some(key) = W::concurrency_key(input) {
            options = options.concurrency_key(key);
        }
        let input = serde_json::to_value(input).expect("an input");
        let (run, _) = self
            .store()
            .start_run(W::DEFINITION, &input, &options)
            .await
            .expect("start");
        run
    }

    /// Claims and runs until nothing is due now; how many attempts ran.
    pub(super) async fn run_until_idle(&self) -> usize {
        let mut total = 0;
        loop {
            let claims = self.steps.claim(None).await;
            let ran = self.steps.run(claims, self.steps.pace.eager).await;
            if ran == 0 {
                return total;
            }
            total += ran;
            assert!(total < MAX_ATTEMPTS, "a runaway loop");
        }
    }

    pub(super) fn advance(&self, by: Duration) {
        self.rig.advance(by);
    }

    pub(super) async fn view(&self, run: RunId) -> RunView {
        self.view_with(run, RunRead::default()).await
    }

    pub(super) async fn view_with(&self, run: RunId, read: RunRead) -> RunView {
        self.store().run(run, read).await.expect("run")
    }

    /// Whether the run still exists.
    pub(super) async fn exists(&self, run: RunId) -> bool {
        match self.store().run(run, RunRead::default()).await {
            Ok(_) => true,
            Err(Error::RunNotFound { .. }) => false,
            Err(other) => panic!("reading run {run}: {other}"),
        }
    }

    /// An operator action by `ops`; the error, if refused, as text both
    /// stores must share.
    pub(super) async fn act(
        &self,
        run: RunId,
        action: Action,
        reason: &str,
    ) -> Result<RunStatus, String> {
        let result = self.store().act(run, action, "ops", reason).await;
        result.map_err(|e| e.to_string())
    }

    /// Sends a signal, checked against the definitions as `Client::signal`
    /// does; the error as text.
    pub(super) async fn signal<T: serde::Serialize + ?Sized>(
        &self,
        run: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, String> {
        self.send(run, name, payload, SignalCheck::Waited).await
    }

    /// Sends a signal whatever the definitions wait for; the error as text.
    pub(super) async fn signal_unchecked<T: serde::Serialize + ?Sized>(
        &self,
        run: RunId,
        name: &str,
        payload: &T,
    ) -> Result<SignalId, String> {
        self.send(run, name, payload, SignalCheck::Unchecked).await
    }

    async fn send<T: serde::Serialize + ?Sized>(
        &self,
        run: RunId,
        name: &str,
        payload: &T,
        check: SignalCheck,
    ) -> Result<SignalId, String> {
        let payload = serde_json::to_value(payload).expect("a payload");
        let result = self.store().signal(run, name, &payload, check).await;
        result.map_err(|e| e.to_string())
    }

    /// Sweeps once: (repaired, runs deleted).
    pub(super) async fn sweep(&self) -> (usize, u64) {
        let report = self.sweep_report().await;
        (report.repaired, report.runs_deleted)
    }

    /// Sweeps once: the whole report.
    pub(super) async fn sweep_report(&self) -> SweepReport {
        let runner = &self.steps.runner;
        sweep(
            self.store(),
            &self.sweep,
            |workflow| runner.definition(workflow),
            |_| {},
        )
        .await
        .expect("sweep")
    }

    /// Every run the store holds, by id.
    pub(super) async fn all_views(&self) -> std::collections::BTreeMap<i64, RunView> {
        let filter = RunFilter::new().limit(1_000);
        let summaries = self.store().list_runs(&filter).await.expect("list");
        assert!(
            summaries.len() < 1_000,
            "a scenario keeps to a page of runs"
        );
        let mut views = std::collections::BTreeMap::new();
        for summary in summaries {
            views.insert(summary.id.0, self.view(summary.id).await);
        }
        views
    }

    /// The fan_out children of `run`: its batches in order, each batch's runs
    /// oldest first.
    pub(super) async fn children(&self, run: RunId) -> Vec<RunId> {
        let views = self.all_views().await;
        let batches = &views.get(&run.0).expect("the parent exists").batches;
        batches
            .iter()
            .flat_map(|batch| {
                views
                    .values()
                    .filter(move |view| view.parent_batch_id == Some(batch.id))
                    .map(|view| view.run.id)
            })
            .collect()
    }

    /// Runs what is due now, one attempt: call it with a single row due, so
    /// that a worker's claim (up to its concurrency) and `TestEnv`'s (the
    /// first due row) take the same one.
    pub(super) async fn run_one(&self) {
        let claims = self.steps.claim(None).await;
        assert_eq!(claims.len(), 1, "one step due");
        assert_eq!(self.steps.run(claims, 0).await, 1);
    }

    /// Runs what is due now (as [`Harness::run_one`], one attempt per claim)
    /// in the background; the task yields how many attempts ran.
    pub(super) fn spawn_next(&self) -> tokio::task::JoinHandle<usize> {
        let steps = self.steps.clone();
        tokio::spawn(async move { steps.run_once().await })
    }

    /// How many outcomes were recorded late, their attempt having lost its
    /// claim while it ran.
    pub(super) fn late_completions(&self) -> usize {
        self.steps.late.load(Ordering::SeqCst)
    }

    /// Takes the claim on `run`'s in-progress step away while its body runs
    /// (see [`Rig::lose_claim`]).
    pub(super) async fn lose_claim(&self, run: RunId) -> bool {
        self.rig.lose_claim(run).await
    }

    /// Claims the next due step for a worker that dies at once, before any
    /// body runs (as a claim the batch or the gate decides would): the claim
    /// verb under a worker of its own, declared dead as it claims, and the
    /// claim dropped. Returns the run.
    pub(super) async fn claim_and_die(&self) -> RunId {
        let run = self.claim_for_a_dead_worker().await.run_id;
        let view = self.view(run).await;
        assert_eq!(view.run.status, RunStatus::Performing, "the run moved");
        assert_eq!(
            view.events.last().map(|e| e.event.as_str()),
            Some("step_started"),
            "the event written"
        );
        run
    }

    /// Claims the next due step for a worker that dies mid-body: the body (which
    /// signals `entered` and then hangs on a first attempt) runs, and is dropped
    /// mid-flight, as a SIGKILL would; its worker never heartbeats after its
    /// claim.
    pub(super) async fn crash_next(&self, entered: &tokio::sync::Notify) {
        let claim = self.claim_for_a_dead_worker().await;
        // The body runs on the live runner's registry; it never reaches its
        // outcome, so the id that outcome would be fenced on does not matter.
        let steps = self.steps.clone();
        let running = tokio::spawn(async move { steps.run(vec![claim], 0).await });
        entered.notified().await;
        running.abort();
        assert!(running.await.is_err_and(|e| e.is_cancelled()));
    }

    /// The next due step, claimed by a worker that died as it claimed.
    async fn claim_for_a_dead_worker(&self) -> Claim {
        let worker = format!("dead-{}", self.dead.fetch_add(1, Ordering::SeqCst) + 1);
        self.rig.worker_died(&worker).await;
        let mut claims = self.steps.claim(Some(&worker)).await;
        claims.pop().expect("a step was due")
    }
}

/// Runs a scenario on the memory store (at `TestEnv`'s pace), then on Postgres
/// (at a worker's): `on_each_store!(|h| h.register(W), scenario(args))` makes a
/// blank harness `h` on each store, sets it up with the expression after it,
/// and calls `scenario(&harness, args)`; it yields `((memory harness, its
/// result), (postgres harness, its result))`. The setup and the arguments are
/// expanded once per store: each store gets workflow values of its own.
macro_rules! on_each_store {
    (|$h:ident| $setup:expr, $scenario:ident($($arg:expr),* $(,)?)) => {{
        let memory = {
            let $h = Harness::new(Memory::new(), Pace::STEPWISE);
            let harness = $setup;
            let out = $scenario(&harness $(, $arg)*).await;
            (harness, out)
        };
        let postgres = {
            let $h = Harness::new(Pinned::new().await, Pace::WORKER);
            let harness = $setup;
            let out = $scenario(&harness $(, $arg)*).await;
            (harness, out)
        };
        (memory, postgres)
    }};
}

/// [`on_each_store!`] for a scenario that returns its runs: compares them on
/// the two stores (see `compare`) and yields the memory store's projections.
macro_rules! both {
    ($($scenario:tt)*) => {{
        let (memory, postgres) = on_each_store!($($scenario)*);
        compare(memory, postgres).await
    }};
}
