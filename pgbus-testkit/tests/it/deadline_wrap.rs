//! Workflows with flow options the tests set by hand: a `#[workflow]`
//! type's definition with `flow` changed, under a wrapper that runs the inner
//! workflow's bodies (what the macro's flow options build). `with_deadline!`
//! for the deadline tests; `with_flow!` for the flow-control ones.

/// `with_deadline!(Wrapper, DEFINITION_STATIC, Inner, deadline_ms, action)`:
/// `Wrapper(Inner)` is `Inner` with that deadline.
macro_rules! with_deadline {
    ($wrapper:ident, $definition:ident, $inner:ty, $ms:expr, $action:expr) => {
        static $definition: ::pgbus_runtime::WorkflowDefinition =
            ::pgbus_runtime::WorkflowDefinition {
                flow: ::pgbus_runtime::FlowControl {
                    deadline_ms: Some($ms),
                    on_deadline: $action,
                    ..::pgbus_runtime::FlowControl::NONE
                },
                ..*<$inner as ::pgbus_runtime::Workflow>::DEFINITION
            };

        // Some tests start runs of the definition alone.
        #[allow(dead_code)]
        struct $wrapper($inner);

        impl ::pgbus_runtime::Workflow for $wrapper {
            type Input = <$inner as ::pgbus_runtime::Workflow>::Input;
            type Output = <$inner as ::pgbus_runtime::Workflow>::Output;
            const DEFINITION: &'static ::pgbus_runtime::WorkflowDefinition = &$definition;

            fn run_step<'a>(
                &'a self,
                entry: usize,
                cx: &'a mut ::pgbus_runtime::StepCx<Self::Input>,
                fan: &'a mut ::pgbus_runtime::FanOut,
            ) -> ::pgbus_runtime::StepFuture<'a> {
                self.0.run_step(entry, cx, fan)
            }

            fn check_guard(
                &self,
                guard: ::pgbus_runtime::GuardRef,
                cx: &::pgbus_runtime::StepCx<Self::Input>,
            ) -> Result<bool, ::pgbus_runtime::StepError> {
                self.0.check_guard(guard, cx)
            }

            fn signal_matches(
                &self,
                guard: ::pgbus_runtime::GuardRef,
                cx: &::pgbus_runtime::StepCx<Self::Input>,
                signal: &::pgbus_runtime::Signal,
            ) -> Result<bool, ::pgbus_runtime::StepError> {
                self.0.signal_matches(guard, cx, signal)
            }

            fn handle_error(
                &self,
                handler: ::pgbus_runtime::HandlerRef,
                cx: &::pgbus_runtime::StepCx<Self::Input>,
                error: &::pgbus_runtime::StepError,
            ) -> Result<Option<::pgbus_runtime::Flow>, ::pgbus_runtime::StepError> {
                self.0.handle_error(handler, cx, error)
            }
        }
    };
}

/// `with_flow!(Wrapper, DEFINITION_STATIC, Inner, "prefix", flow)`: a unit
/// struct `Wrapper` that is the unit struct `Inner` under a definition with
/// `flow`, whose concurrency key for input `n` is `<prefix><n>`.
macro_rules! with_flow {
    ($wrapper:ident, $definition:ident, $inner:ident, $prefix:literal, $flow:expr) => {
        static $definition: ::pgbus_runtime::WorkflowDefinition =
            ::pgbus_runtime::WorkflowDefinition {
                flow: $flow,
                ..*<$inner as ::pgbus_runtime::Workflow>::DEFINITION
            };

        struct $wrapper;

        impl ::pgbus_runtime::Workflow for $wrapper {
            type Input = <$inner as ::pgbus_runtime::Workflow>::Input;
            type Output = <$inner as ::pgbus_runtime::Workflow>::Output;
            const DEFINITION: &'static ::pgbus_runtime::WorkflowDefinition = &$definition;

            fn concurrency_key(input: &Self::Input) -> Option<String> {
                Some(format!(concat!($prefix, "{}"), input))
            }

            fn run_step<'a>(
                &'a self,
                entry: usize,
                cx: &'a mut ::pgbus_runtime::StepCx<Self::Input>,
                fan: &'a mut ::pgbus_runtime::FanOut,
            ) -> ::pgbus_runtime::StepFuture<'a> {
                $inner.run_step(entry, cx, fan)
            }

            fn check_guard(
                &self,
                guard: ::pgbus_runtime::GuardRef,
                cx: &::pgbus_runtime::StepCx<Self::Input>,
            ) -> Result<bool, ::pgbus_runtime::StepError> {
                $inner.check_guard(guard, cx)
            }

            fn signal_matches(
                &self,
                guard: ::pgbus_runtime::GuardRef,
                cx: &::pgbus_runtime::StepCx<Self::Input>,
                signal: &::pgbus_runtime::Signal,
            ) -> Result<bool, ::pgbus_runtime::StepError> {
                $inner.signal_matches(guard, cx, signal)
            }

            fn handle_error(
                &self,
                handler: ::pgbus_runtime::HandlerRef,
                cx: &::pgbus_runtime::StepCx<Self::Input>,
                error: &::pgbus_runtime::StepError,
            ) -> Result<Option<::pgbus_runtime::Flow>, ::pgbus_runtime::StepError> {
                $inner.handle_error(handler, cx, error)
            }
        }
    };
}
