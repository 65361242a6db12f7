//! Starting runs with options, one or many, as the client does, on the
//! virtual clock.

use std::borrow::Borrow;

use pgbus_runtime::start_options::new_runs;
use pgbus_runtime::{Error, StartOptions, Started, Workflow};

use super::TestEnv;

impl TestEnv {
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
        self.registered::<W>()?;
        let input = serde_json::to_value(input)?;
        let (run_id, created) = self
            .store()
            .rows()
            .start_run(W::DEFINITION, input, options)?;
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
        self.registered::<W>()?;
        let runs = new_runs::<W>(starts)?;
        Ok(self
            .store()
            .rows()
            .start_many(W::DEFINITION, &runs)?
            .into_iter()
            .map(|(run_id, created)| Started::new(run_id, created))
            .collect())
    }
}
