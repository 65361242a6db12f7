//! Messages in the user's own words: the fix names their type, method,
//! arguments and input; a duplicate shows both places; a `cfg_attr` gets the
//! advice that fits what it changes.

use quote::quote;

use super::errors;

#[test]
fn a_step_signature_fix_uses_the_method_its_arguments_and_the_input() {
    let step = |sig: proc_macro2::TokenStream| {
        errors(
            quote!(input = Order),
            quote! { impl Checkout { #[step] #sig { Ok(Flow::Complete) } } },
        )
    };
    assert_eq!(
        step(quote!(fn pay(&self, order_cx: &mut StepCx<Order>) -> StepResult)),
        [
            "a `#[step]` method must be `async`; write `async fn pay(&self, order_cx: &mut StepCx<Order>)`"
        ]
    );
    assert_eq!(
        step(quote!(async fn pay(&self, cx: StepCx<Order>) -> StepResult)),
        ["a `#[step]` method takes the step context as `cx: &mut StepCx<Order>`, by `&mut`"]
    );
    assert_eq!(
        step(quote!(async fn pay(&self) -> StepResult)),
        [
            "this `#[step]` method is missing an argument; write `async fn pay(&self, cx: &mut StepCx<Order>)`"
        ]
    );
    // Without `input`, the user's own context type is the one shown.
    let fan_out = errors(
        quote!(input = Vec<Order>),
        quote! { impl Checkout { #[fan_out] async fn notify(&self, cx: &mut StepCx<Vec<Order>>) {} } },
    );
    assert_eq!(
        fan_out,
        ["this `#[fan_out]` method is missing an argument; write \
             `async fn notify(&self, cx: &mut StepCx<Vec<Order>>, fan: &mut FanOut)`"]
    );
}

#[test]
fn a_trait_impl_is_told_its_own_type() {
    assert_eq!(
        errors(
            quote!(),
            quote! { impl Charge for Checkout { #[step] async fn a(&self, cx: &mut StepCx<()>) {} } },
        ),
        [
            "`#[workflow]` goes on an inherent impl, `impl Checkout`, not on a trait impl; the \
             macro implements the `Workflow` trait itself"
        ]
    );
}

#[test]
fn a_duplicate_name_is_reported_at_the_second_place_with_a_note_on_the_first() {
    let found = errors(
        quote!(),
        quote! {
            impl W {
                #[step(name = "charge")]
                async fn pay(&self, cx: &mut StepCx<()>) {}
                #[step]
                async fn charge(&self, cx: &mut StepCx<()>) {}
                #[step(name = "charge")]
                async fn charge_2(&self, cx: &mut StepCx<()>) {}
            }
        },
    );
    assert_eq!(
        found,
        [
            // `charge` and `charge_2` are taken: the fix picks a free name.
            "duplicate durable step name `charge`: an earlier step has it; give this one another \
             name, e.g. `name = \"charge_3\"`",
            "note: the first step named `charge` is here",
            // The method's own name is free: the override was the mistake.
            "duplicate durable step name `charge`: an earlier step has it; give this one another \
             name, e.g. `name = \"charge_2\"`",
            "note: the first step named `charge` is here",
        ]
    );
    let gravestones = errors(
        quote!(),
        quote! {
            impl W {
                removed_step!(a);
                removed_step!("a");
                #[step]
                async fn a(&self, cx: &mut StepCx<()>) {}
            }
        },
    );
    assert_eq!(
        gravestones,
        [
            "step `a` is removed twice; keep one `removed_step!`",
            "note: the first `removed_step!` of `a` is here",
            "step `a` is marked removed but is also a live step; delete the `removed_step!` or \
             rename the step",
            "note: the live step named `a` is here",
        ]
    );
}

#[test]
fn cfg_attr_advice_fits_what_it_changes() {
    let method = |attrs: proc_macro2::TokenStream| {
        errors(
            quote!(),
            quote! { impl W { #[step] async fn a(&self, cx: &mut StepCx<()>) {} #attrs async fn b(&self, cx: &mut StepCx<()>) {} } },
        )
    };
    let options = method(quote!(#[step] #[cfg_attr(test, step(wait = "1s"))]));
    assert_eq!(options.len(), 1);
    assert!(
        options[0].starts_with("a `#[cfg_attr]` cannot change a step's options per build")
            && options[0].contains("`pgbus_runtime::Overrides`"),
        "{options:?}"
    );
    let conditional = method(quote!(#[cfg_attr(feature = "beta", step)]));
    assert_eq!(
        conditional,
        [
            "a step cannot be conditional: this `#[cfg_attr]` makes `b` a step in some builds only, \
             and builds would disagree on the step list and digest; write `#[step]` for every \
             build, decide at run time with `skip_if` whether it runs"
        ]
    );
    let policy = method(quote!(#[step] #[cfg_attr(test, on_exception(action = "skip"))]));
    assert_eq!(policy.len(), 1);
    assert!(
        policy[0].starts_with("a `#[cfg_attr]` cannot add a policy in some builds only"),
        "{policy:?}"
    );
}
