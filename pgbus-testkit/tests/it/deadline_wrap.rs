//! A workflow with a declared deadline, for the deadline tests: a
//! `#[workflow]` type's definition with `flow.deadline_ms` and
//! `flow.on_deadline` set, under a wrapper that runs the inner workflow's
//! bodies (what `#[workflow(deadline = "...", on_deadline = "...")]` builds).

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
