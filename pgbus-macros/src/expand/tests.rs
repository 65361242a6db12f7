//! Snapshots of a few expansions, pretty-printed: what the macro generates is
//! reviewed like any other code. `cargo insta review` after an intended change.

use proc_macro2::TokenStream;
use quote::quote;

fn pretty(tokens: TokenStream) -> String {
    let file: syn::File = syn::parse2(tokens).expect("expansion parses as a file");
    prettyplease::unparse(&file)
}

#[test]
fn minimal_workflow() {
    let out = super::workflow(
        quote!(input = Order),
        quote! {
            impl Fulfil {
                #[step]
                async fn charge(&self, cx: &mut StepCx<Order>) -> StepResult { Ok(Flow::Complete) }
            }
        },
    );
    insta::assert_snapshot!(pretty(out));
}

#[test]
fn guards_handlers_signals_and_fan_out() {
    let out = super::workflow(
        quote!(
            name = "orders.fulfil",
            input = Order,
            cancel_if = Self::void
        ),
        quote! {
            #[on_exception(matching(CardDeclined), handler = triage, report = "never")]
            impl Fulfil {
                #[step(skip_if = small, wait = "5s", on_exception(action = "reattempt", max_reattempts = 2))]
                async fn charge(&self, cx: &mut StepCx<Order>) -> Result<(), CardDeclined> { Ok(()) }
                removed_step!(old);
                #[step(wait_for(name = "paid", matches = mine), wait_timeout = "1h", on_timeout = "run")]
                async fn ship(&self, cx: &mut StepCx<Order>) {}
                #[fan_out(on_batch_failure = "skip")]
                async fn notify(&self, cx: &mut StepCx<Order>, fan: &mut FanOut) -> StepResult { Ok(Flow::Complete) }
            }
        },
    );
    insta::assert_snapshot!(pretty(out));
}

#[test]
fn errors_come_with_the_cleaned_impl() {
    let out = super::workflow(
        quote!(input = Order),
        quote! {
            impl Fulfil {
                #[step(wiat = "5s")]
                async fn charge(&self, cx: &mut StepCx<Order>) -> StepResult { Ok(Flow::Complete) }
            }
        },
    );
    insta::assert_snapshot!(pretty(out));
}

#[test]
fn flow_control() {
    let out = super::workflow(
        quote!(
            input = Order,
            concurrency = 50,
            key = Self::customer,
            key_concurrency = 1,
            slot = "run",
            key_rate_limit = "10/1m",
            deadline = "2h",
            on_deadline = "pause"
        ),
        quote! {
            impl Fulfil {
                fn customer(order: &Order) -> &str { &order.customer }
                #[step(rate_limit = "5/1s")]
                async fn charge(&self, cx: &mut StepCx<Order>) {}
            }
        },
    );
    insta::assert_snapshot!(pretty(out));
}

#[test]
fn an_impl_that_does_not_parse_loses_only_our_attributes() {
    let out = super::workflow(
        quote!(input = Order),
        quote! {
            #[on_exception(action = "pause")]
            impl Fulfil {
                #[step(wait = "1s")]
                async fn a(&self, cx: &mut StepCx<Order>) { let x = ; }
                removed_step!(gone);
                #[inline]
                fn helper(&self) {}
            }
        },
    );
    let text = out.to_string();
    assert!(!text.contains("# [step"), "{text}");
    assert!(!text.contains("removed_step"), "{text}");
    assert!(!text.contains("on_exception"), "{text}");
    assert!(text.contains("# [inline]"), "{text}");
    assert!(
        text.contains("let x = ;"),
        "the syntax error is left for the compiler: {text}"
    );
    assert!(
        text.contains("type Input = Order"),
        "a stand-in keeps use sites compiling: {text}"
    );
}

#[test]
fn crate_option_replaces_the_runtime_path_everywhere() {
    let out = super::workflow(
        quote!(
            crate = "pgbus",
            cancel_if = g,
            on_exception(matching(E), handler = h)
        ),
        quote! {
            impl Fulfil {
                #[step(skip_if = g)]
                async fn charge(&self, cx: &mut StepCx<()>) {}
            }
        },
    )
    .to_string();
    assert!(out.contains("pgbus :: __private :: Workflow"), "{out}");
    assert!(!out.contains("pgbus_runtime"), "{out}");
}
