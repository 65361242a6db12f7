//! Starting runs with options, one or many, as the client does, on the
//! virtual clock; and where their steps go: the queues claimed, queue
//! limits, and a deployment's overrides.

use std::borrow::Borrow;

use pgbus_core::flow::MAX_CONCURRENCY;
use pgbus_runtime::start_options::{check_queue, new_runs};
use pgbus_runtime::{Error, StartOptions, Started, Workflow};

use super::TestEnv;

impl TestEnv {
    /// Claims from `queue` too, as a worker given it with
    /// `WorkerBuilder::queue`: the environment claims from every queue its
    /// registered workflows name, and from these. A run started on a queue
    /// of its own ([`StartOptions::queue`]) runs here only once the
    /// environment claims from that queue; until then it waits, as it would
    /// for workers that do not serve it, and its view says so
    /// (`Missing::Queue`), as `TestEnv::run_to_completion`'s error does.
    #[must_use]
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        let queue = queue.into();
        if !self.queues.contains(&queue) {
            self.queues.push(queue);
        }
        let this = self.claim_queues();
        // The registry lists the queues claimed, as a worker's row does.
        this.announce();
        this
    }

    /// At most `limit` steps of `queue` in progress at once, whatever their
    /// workflow, as `WorkerBuilder::queue_concurrency` declares for a fleet:
    /// the claim holds a due step of the queue back while `limit` are in
    /// progress, and lets it go when one ends. Registered with the
    /// environment's worker, so it is in force at once; given again for the
    /// same queue, the last limit wins.
    ///
    /// The environment runs one step at a time, so a limit shows when steps
    /// stay in progress: an attempt claimed by [`TestEnv::crash_next`] until
    /// the sweep takes it, or a body that is still running while another
    /// task claims.
    ///
    /// # Errors
    /// [`Error::InvalidSetting`] (setting `TestEnv::queue_concurrency`), as
    /// the worker's build refuses them: a limit of 0 or over 100,000
    /// (`pgbus_core::flow::MAX_CONCURRENCY`), a queue name a start would
    /// refuse.
    pub fn queue_concurrency(
        mut self,
        queue: impl Into<String>,
        limit: u32,
    ) -> Result<Self, Error> {
        let queue = queue.into();
        let invalid = |problem: String| Error::InvalidSetting {
            setting: "TestEnv::queue_concurrency".to_owned(),
            problem,
        };
        check_queue(&queue).map_err(|problem| invalid(format!("the queue {problem}")))?;
        if limit == 0 || limit > MAX_CONCURRENCY {
            return Err(invalid(format!(
                "the limit of queue `{queue}` is 1 to {MAX_CONCURRENCY} steps in progress; got {limit}"
            )));
        }
        self.queue_limits.retain(|(named, _)| *named != queue);
        self.queue_limits.push((queue, limit));
        self.announce();
        Ok(self)
    }

    /// Runs the registered workflows with a deployment's overrides, as a
    /// worker given them does (see `pgbus_runtime::overrides`): later steps
    /// with the overridden durations, queues, priorities and limits (on the
    /// virtual clock), runs started here with the first step placed by them,
    /// and the store's registry recording the overridden options digest.
    /// A later [`TestEnv::register`] of an overridden workflow applies them
    /// too; overrides of workflows not registered place the fan_out children
    /// of those workflows, as a worker's do. Replaces overrides given
    /// before.
    ///
    /// ```
    /// use pgbus_runtime::prelude::*;
    /// use pgbus_runtime::Overrides;
    /// use pgbus_testkit::TestEnv;
    ///
    /// struct Remind;
    /// #[workflow(name = "remind")]
    /// impl Remind {
    ///     #[step]
    ///     async fn first(&self, _cx: &mut StepCx<()>) {}
    ///     #[step(wait = "1d")]
    ///     async fn again(&self, _cx: &mut StepCx<()>) {}
    /// }
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let staging = Overrides::new().step("remind", "again", |s| s.wait("1m"));
    /// let env = TestEnv::new().register(Remind).overrides(staging)?;
    /// let run = env.start::<Remind>(&())?.run_id;
    /// env.run_until_idle().await;
    /// env.advance(std::time::Duration::from_secs(60));
    /// env.run_until_idle().await;                 // a minute, not a day
    /// assert_eq!(env.run(run)?.run.status, pgbus_runtime::RunStatus::Finished);
    /// # Ok::<(), pgbus_runtime::Error>(()) }).unwrap();
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidOverride`] naming the workflow, the step and the
    /// option, as `WorkerBuilder::build` refuses them: for a registered
    /// workflow, a step it lacks or a gravestone, a `wait_timeout` on a
    /// step without `wait_for`; for any workflow, a value the macro would
    /// refuse.
    pub fn overrides(mut self, overrides: pgbus_runtime::Overrides) -> Result<Self, Error> {
        self.runner = self.runner.overrides(overrides)?;
        let this = self.claim_queues();
        this.announce();
        Ok(this)
    }

    /// The environment claiming from the registered workflows' queues (their
    /// own and their steps') and those given with [`TestEnv::queue`].
    pub(super) fn claim_queues(mut self) -> Self {
        if self.queues.is_empty() {
            return self;
        }
        let mut queues: Vec<String> = self
            .runner
            .definitions()
            .into_iter()
            .flat_map(|definition| {
                std::iter::once(definition.queue)
                    .chain(definition.entries.iter().filter_map(|e| e.options.queue))
            })
            .map(str::to_owned)
            .chain(self.queues.iter().cloned())
            .collect();
        queues.sort();
        queues.dedup();
        self.runner = self.runner.queues(queues);
        self
    }

    /// Starts a run of `W` as `options` say, as `Client::start_with`: a key,
    /// a start time or delay on the virtual clock (the first step is due at
    /// that time plus its `wait`; [`TestEnv::advance`] brings it), the run's
    /// queue and priority.
    ///
    /// # Errors
    /// [`Error::WorkflowNotRegistered`] unless [`TestEnv::register`] was
    /// given a `W`; [`Error::Json`], [`Error::InvalidInput`]; the errors of
    /// [`StartOptions::check`] (a bad key, [`Error::InvalidStartOption`]);
    /// [`Error::NoSteps`].
    pub fn start_with<W: Workflow>(
        &self,
        input: &W::Input,
        options: &StartOptions,
    ) -> Result<Started, Error> {
        let definition = self.registered::<W>()?;
        let options = keyed::<W>(input, options);
        let input = serde_json::to_value(input)?;
        let (run_id, created) = self.store().rows().start_run(definition, input, &options)?;
        Ok(Started::new(run_id, created))
    }

    /// Starts many runs of `W`, all or none, as `Client::start_many`: each
    /// start's [`Started`] in order; a key repeated in the call or held by a
    /// run already gives that run, `created: false`.
    ///
    /// # Errors
    /// [`Error::WorkflowNotRegistered`]; [`Error::TooManyStarts`] over
    /// [`MAX_STARTS_PER_CALL`](pgbus_runtime::MAX_STARTS_PER_CALL) starts or the bytes bound;
    /// [`Error::StartRefused`] with the index of the first start refused
    /// (its input or its options) and why; [`Error::NoSteps`].
    pub fn start_many<W: Workflow>(
        &self,
        starts: impl IntoIterator<Item = (impl Borrow<W::Input>, StartOptions)>,
    ) -> Result<Vec<Started>, Error> {
        let definition = self.registered::<W>()?;
        let starts = starts.into_iter().map(|(input, options)| {
            let options = keyed::<W>(input.borrow(), &options);
            (input, options)
        });
        let runs = new_runs::<W>(starts)?;
        Ok(self
            .store()
            .rows()
            .start_many(definition, &runs)?
            .into_iter()
            .map(|(run_id, created)| Started::new(run_id, created))
            .collect())
    }
}

/// `options` with the run's concurrency key: the one given at start, else
/// the one the workflow's `key` method derives from `input`, as the client
/// computes it.
fn keyed<W: Workflow>(input: &W::Input, options: &StartOptions) -> StartOptions {
    match (options.run_concurrency_key(), W::concurrency_key(input)) {
        (None, Some(key)) => options.clone().concurrency_key(key),
        _ => options.clone(),
    }
}
