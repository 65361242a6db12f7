//! Parse and validate on `parse_quote!` input: the error count and text of each
//! rule, and the normalized model of valid input.

// Token streams are cheap to move and the tests read better without `&`.
#![allow(clippy::needless_pass_by_value)]

use darling::Error;
use proc_macro2::TokenStream;
use quote::quote;

use crate::model::{ActionDef, WorkflowDef};
use crate::{parse, validate};

fn run(args: TokenStream, item: TokenStream) -> (Option<WorkflowDef>, Vec<String>) {
    let mut imp: syn::ItemImpl = syn::parse2(item).expect("test input is an impl");
    let mut errors = Error::accumulator();
    let raw = parse::workflow(args, &mut imp, &mut errors);
    let model = validate::workflow(raw, &mut errors);
    let messages = match errors.finish() {
        Ok(()) => Vec::new(),
        Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
    };
    (model, messages)
}

fn errors(args: TokenStream, item: TokenStream) -> Vec<String> {
    run(args, item).1
}

fn step(attr: &TokenStream) -> TokenStream {
    quote! {
        impl W {
            #attr
            async fn charge(&self, cx: &mut StepCx<()>) -> StepResult { Ok(Flow::Complete) }
        }
    }
}

#[test]
fn valid_input_gives_no_error_and_a_normalized_model() {
    let (model, errors) = run(
        quote!(name = "w", queue = "q", priority = -2),
        step(&quote!(#[step(wait = "1m30s", on_exception = "reattempt")])),
    );
    assert_eq!(errors, Vec::<String>::new());
    let model = model.expect("model");
    assert_eq!(
        (model.name.as_str(), model.queue.as_str(), model.priority),
        ("w", "q", -2)
    );
    assert_eq!(model.entries[0].options.wait_ms, 90_000);
    assert!(matches!(
        model.entries[0].options.policies[0].action,
        ActionDef::Reattempt {
            wait_ms: 1_000,
            max_reattempts: 3,
            ..
        }
    ));
    assert_eq!(
        model.digest,
        pgbus_core::definition_digest([("charge", pgbus_core::EntryKind::Step)])
    );
}

#[test]
fn defaults_fill_what_is_left_out() {
    let (model, errors) = run(quote!(), step(&quote!(#[step])));
    assert!(errors.is_empty(), "{errors:?}");
    let model = model.expect("model");
    assert_eq!(model.name, "W");
    assert_eq!(model.queue, "default");
    assert_eq!(model.priority, 0);
    assert_eq!(
        quote::ToTokens::to_token_stream(&model.input).to_string(),
        "()"
    );
}

#[test]
fn unknown_options_get_a_did_you_mean_at_every_level() {
    assert_eq!(
        errors(quote!(nmae = "w"), step(&quote!(#[step]))),
        ["unknown `#[workflow]` option `nmae`; did you mean `name`?"]
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wiat = "5s")]))),
        ["unknown `#[step]` option `wiat`; did you mean `wait`?"]
    );
    assert_eq!(
        errors(
            quote!(),
            step(&quote!(#[step(on_exception(actoin = "pause"))]))
        ),
        ["unknown `on_exception(...)` option `actoin`; did you mean `action`?"]
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for(nam = "x"))]))),
        ["unknown `wait_for(...)` option `nam`; did you mean `name`?"]
    );
    // Another engine's word for one of ours.
    assert_eq!(
        errors(quote!(task_queue = "orders"), step(&quote!(#[step]))),
        ["unknown `#[workflow]` option `task_queue`; did you mean `queue`?"]
    );
    assert_eq!(
        errors(
            quote!(),
            step(&quote!(#[step(start_to_close_timeout = "1m")]))
        ),
        ["unknown `#[step]` option `start_to_close_timeout`; did you mean `timeout`?"]
    );
    let far = errors(quote!(), step(&quote!(#[step(zzz = 1)])));
    assert_eq!(far.len(), 1);
    assert!(
        far[0].starts_with("unknown `#[step]` option `zzz`; expected `name`, `wait`"),
        "{far:?}"
    );
}

#[test]
fn misplaced_options_say_where_they_belong() {
    let on_step = errors(quote!(), step(&quote!(#[step(on_batch_failure = "skip")])));
    assert_eq!(
        on_step,
        [
            "`on_batch_failure` only applies to a `#[fan_out]` method; write \
             `#[fan_out(on_batch_failure = \"skip\")]`"
        ]
    );
    let on_workflow = errors(quote!(wait = "5s"), step(&quote!(#[step])));
    assert_eq!(
        on_workflow,
        [
            "`wait` is a step option: a step waits that long before it runs; write it on the \
             `#[step]` that needs it, e.g. `#[step(wait = \"5s\")]`; the wait between reattempts \
             is `on_exception(action = \"reattempt\", wait = \"5s\")`"
        ]
    );
}

#[test]
fn all_errors_of_one_impl_are_reported_together() {
    let item = quote! {
        impl W {
            #[step(wait = "5", timeout = "0s")]
            async fn a(&self, cx: &mut StepCx<()>) -> StepResult { Ok(Flow::Complete) }
            #[step(name = "a", wait_timeout = "1h")]
            fn b(&self, cx: &mut StepCx<()>) -> StepResult { Ok(Flow::Complete) }
            removed_step!(a);
        }
    };
    let errors = errors(quote!(queue = "two words", priority = 70000), item);
    // Eight errors, two of them with a note on the first place.
    assert_eq!(errors.len(), 10, "{errors:#?}");
    for expected in [
        "invalid `wait`: `5` has no unit",
        "`timeout` must be greater than zero",
        "`wait_timeout` needs `wait_for`",
        "must be `async`",
        "duplicate durable step name `a`",
        "step `a` is marked removed but is also a live step",
        "note: the first step named `a` is here",
        "note: the live step named `a` is here",
        "`queue` cannot contain whitespace",
        "`priority` must fit in `i16`",
    ] {
        assert!(
            errors.iter().any(|e| e.contains(expected)),
            "missing {expected:?} in {errors:#?}"
        );
    }
}

#[test]
fn wait_options_need_their_prerequisites() {
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(on_timeout = "skip")]))),
        [
            "`on_timeout` needs `wait_for` and `wait_timeout`: it says what happens when the \
             signal does not come in time; add them, e.g. `wait_for = \"payment.settled\", \
             wait_timeout = \"1h\"`, or remove `on_timeout`"
        ]
    );
    assert_eq!(
        errors(
            quote!(),
            step(&quote!(#[step(wait_for = "x", on_timeout = "skip")]))
        ),
        [
            "`on_timeout` needs `wait_timeout`, e.g. `wait_timeout = \"1h\"`; without it the step waits forever"
        ]
    );
    assert_eq!(
        errors(
            quote!(),
            step(&quote!(#[step(wait_for = "x", wait_timeout = "0s")]))
        ),
        ["`wait_timeout` must be greater than zero; leave it out to wait without a limit"]
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for = " ")]))),
        ["a signal name cannot be empty or only whitespace; write e.g. `\"payment.settled\"`"]
    );
    let run_bang = errors(
        quote!(),
        step(&quote!(#[step(wait_for = "x", wait_timeout = "1s", on_timeout = "run!")])),
    );
    assert_eq!(
        run_bang,
        [
            "unknown `on_timeout` value `run!`; expected `pause`, `cancel`, `skip` or `run`; \
          the `!` spelling is accepted on `pause!`, `cancel!` and `skip!` only; did you mean `run`?"
        ]
    );
}

#[test]
fn wait_for_names_follow_the_signal_rule() {
    let long = "x".repeat(pgbus_core::MAX_SIGNAL_NAME_CHARS + 17);
    let longest = "é".repeat(pgbus_core::MAX_SIGNAL_NAME_CHARS);
    let too_long = [
        "a signal name is at most 255 characters, and this one has 272: \
         `Client::signal` rejects such a name, so the step could only time out",
    ];
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for = #long)]))),
        too_long
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for(name = #long))]))),
        too_long
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for = #longest)]))),
        Vec::<String>::new()
    );
    let invisible = "a signal name cannot hold invisible formatting characters \
         (zero-width spaces and joiners, direction marks, the byte-order mark, soft hyphens)";
    assert_eq!(
        errors(
            quote!(),
            step(&quote!(#[step(wait_for = "pay\u{200b}ment")]))
        ),
        [format!("{invisible}; found U+200B at character 4")]
    );
    assert_eq!(
        errors(
            quote!(),
            step(&quote!(#[step(wait_for(name = "\u{feff}paid", matches = m))]))
        ),
        [format!("{invisible}; found U+FEFF at character 1")]
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for = "a\u{200b}\tb")]))),
        [
            "a signal name cannot hold control characters (tabs, newlines, NUL); \
             found U+0009 at character 3"
        ]
    );
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for = "paid ")]))),
        ["a signal name cannot start or end with whitespace; write `\"paid\"`"]
    );
}

#[test]
fn wait_for_needs_a_name() {
    assert_eq!(
        errors(quote!(), step(&quote!(#[step(wait_for(matches = m))]))),
        ["`wait_for(...)` needs the signal's name, e.g. \
             `wait_for(name = \"payment.settled\", matches = m)`"]
    );
}

#[test]
fn policy_rules() {
    let policy =
        |inner: TokenStream| errors(quote!(), step(&quote!(#[step(on_exception(#inner))])));
    assert_eq!(
        policy(quote!(report = "never")),
        [
            "`on_exception` needs `action = \"pause\" | \"reattempt\" | \"cancel\" | \"skip\"` or \
             `handler = method`, e.g. `on_exception(action = \"pause\")`"
        ]
    );
    assert_eq!(
        policy(quote!(matching(CardDeclined, io::Error))),
        [
            "`on_exception` needs `action = \"pause\" | \"reattempt\" | \"cancel\" | \"skip\"` or \
             `handler = method`, e.g. `on_exception(matching(CardDeclined, io::Error), action = \"pause\")`"
        ]
    );
    assert_eq!(
        policy(quote!(action = "pause", handler = h)),
        ["give either `action` or `handler`, not both: a handler decides the action itself"]
    );
    assert_eq!(
        policy(quote!(
            action = "pause",
            wait = "1s",
            max_reattempts = 2,
            terminal_action = "skip"
        )),
        [
            "`wait` only applies to `action = \"reattempt\"`; remove it or use `action = \"reattempt\"`",
            "`max_reattempts` only applies to `action = \"reattempt\"`; remove it or use `action = \"reattempt\"`",
            "`terminal_action` only applies to `action = \"reattempt\"`; remove it or use `action = \"reattempt\"`",
        ]
    );
    assert_eq!(
        policy(quote!(action = "reattempt", max_reattempts = 0)),
        [
            "`max_reattempts` must be between 1 and 4294967295 (the default is 3); to never \
             reattempt, use another `action`, e.g. `action = \"pause\"`"
        ]
    );
    assert_eq!(
        policy(quote!(action = "reattempt", terminal_action = "reattempt")),
        [
            "`reattempt` is not allowed for `terminal_action`: this is what happens when reattempts run out (or when a batch fails); \
          use `pause`, `cancel` or `skip`"
        ]
    );
    assert_eq!(
        policy(quote!(action = "retry")),
        [
            "unknown `action` value `retry`; expected `pause`, `reattempt`, `cancel` or `skip`; did you mean `reattempt`?"
        ]
    );
    assert_eq!(
        policy(quote!(matching("CardDeclined"), action = "skip")),
        ["write the error type without quotes: `matching(CardDeclined)`"]
    );
}

#[test]
fn signatures_are_checked() {
    let method = |sig: TokenStream| {
        errors(
            quote!(),
            quote! { impl W { #[step] #sig { Ok(Flow::Complete) } } },
        )
    };
    assert_eq!(
        method(quote!(async fn a(&mut self, cx: &mut StepCx<()>) -> StepResult)).len(),
        1
    );
    assert_eq!(
        method(quote!(async fn a(self, cx: &mut StepCx<()>) -> StepResult)).len(),
        1
    );
    assert_eq!(
        method(quote!(async fn a(cx: &mut StepCx<()>) -> StepResult)).len(),
        1
    );
    assert_eq!(method(quote!(async fn a(&self) -> StepResult)).len(), 1);
    assert_eq!(
        method(quote!(async fn a(&self, cx: &mut StepCx<()>, x: u8) -> StepResult)).len(),
        1
    );
    assert_eq!(
        method(quote!(async fn a(&self, cx: StepCx<()>) -> StepResult)).len(),
        1
    );
    assert_eq!(
        method(quote!(async fn a<T>(&self, cx: &mut StepCx<()>) -> StepResult)).len(),
        1
    );
    assert!(method(quote!(async fn a(&self, cx: &mut StepCx<()>) -> StepResult)).is_empty());
}

#[test]
fn impl_shape_is_checked() {
    let generic = errors(
        quote!(),
        quote! { impl<T> W<T> { #[step] async fn a(&self, cx: &mut StepCx<()>) {} } },
    );
    assert_eq!(generic.len(), 1);
    assert!(generic[0].starts_with("a workflow cannot be generic"));
    let trait_impl = errors(
        quote!(),
        quote! { impl Tr for W { #[step] async fn a(&self, cx: &mut StepCx<()>) {} } },
    );
    assert_eq!(trait_impl.len(), 1);
    assert!(trait_impl[0].starts_with("`#[workflow]` goes on an inherent impl"));
    let empty = errors(
        quote!(),
        quote! { impl W { removed_step!(x); fn helper(&self) {} } },
    );
    assert_eq!(empty.len(), 1);
    assert!(empty[0].starts_with("this workflow has no step"));
}

#[test]
fn pgbus_attributes_are_stripped_even_on_error() {
    let mut imp: syn::ItemImpl = syn::parse2(quote! {
        #[on_exception(action = "bogus")]
        #[derive_something_else]
        impl W {
            #[step(wiat = "1s")]
            #[inline]
            async fn a(&self, cx: &mut StepCx<()>) {}
            removed_step!(b);
        }
    })
    .expect("impl");
    let mut errors = Error::accumulator();
    let _ = parse::workflow(quote!(), &mut imp, &mut errors);
    assert_eq!(errors.into_inner().len(), 2);
    let text = quote::ToTokens::to_token_stream(&imp).to_string();
    assert!(
        !text.contains("on_exception") && !text.contains("step") && !text.contains("removed_step"),
        "{text}"
    );
    assert!(
        text.contains("derive_something_else") && text.contains("inline"),
        "{text}"
    );
}

#[test]
fn a_bad_value_is_reported_once_not_again_as_missing() {
    let once = |attr: TokenStream| errors(quote!(), step(&attr));
    assert_eq!(
        once(
            quote!(#[step(wait_for = payment_settled, wait_timeout = "1h", on_timeout = "cancel")])
        )
        .len(),
        1
    );
    assert_eq!(
        once(quote!(#[step(wait_for = "x", wait_timeout = "1 h", on_timeout = "skip")])).len(),
        1
    );
    assert_eq!(
        once(quote!(#[step(on_exception(action = "reatempt", wait = "15s", max_reattempts = 5))]))
            .len(),
        1
    );
}

#[test]
fn options_written_elsewhere_say_where_they_go() {
    let on_step = |attr: TokenStream| errors(quote!(), step(&attr));
    assert_eq!(
        on_step(quote!(#[step(max_reattempts = 3)])),
        [
            "`max_reattempts` is an `on_exception(...)` option: it applies to a policy that \
             reattempts; write `on_exception(action = \"reattempt\", max_reattempts = 3)`"
        ]
    );
    assert_eq!(
        on_step(quote!(#[step(matches = g)])),
        [
            "`matches` is a `wait_for(...)` option: it picks which signal ends the wait; write \
             `wait_for(name = \"...\", matches = g)`"
        ]
    );
    assert_eq!(
        on_step(quote!(#[step(retries = 3)])),
        [
            "unknown `#[step]` option `retries`; pgbus calls it `max_reattempts`, which is an \
          `on_exception(...)` option: it applies to a policy that reattempts; write \
          `on_exception(action = \"reattempt\", max_reattempts = 3)`"
        ]
    );
    assert_eq!(
        on_step(quote!(#[step(wait_for(name = "x", wait_timeout = "1s"))])),
        [
            "`wait_timeout` is a step option, not part of the signal wait; write it in \
             `#[step(...)]` beside `wait_for(...)`: `wait_for(...), wait_timeout = \"1s\"`"
        ]
    );
    assert_eq!(
        on_step(quote!(#[step(wait = ("5s"))])).len(),
        1,
        "a parenthesized value is one error"
    );
    assert_eq!(
        on_step(quote!(#[step(wait("5s"))])),
        [
            "write `wait = \"5s\"`, not `wait(...)`: parentheses are only for `on_exception(...)`, \
          `wait_for(...)` and `matching(...)`"
        ]
    );
}

#[test]
fn policies_that_can_never_apply_are_refused() {
    let on_step = |attr: TokenStream| errors(quote!(), step(&attr));
    assert_eq!(
        on_step(
            quote!(#[step(on_exception(action = "cancel"), on_exception(matching(E), action = "skip"))])
        ),
        [
            "this policy can never apply: an earlier `on_exception` without `matching` already answers every \
          error; move this one above it or remove it"
        ]
    );
    assert_eq!(
        on_step(quote!(#[step(on_exception(matching(E), action = "cancel"), on_exception(matching(E), action = "skip"))])).len(),
        1
    );
    assert_eq!(
        on_step(quote!(#[step(on_exception(matching(E, E), action = "cancel"))])),
        ["this error type is already listed; give it once"]
    );
    // `&E` would compile, and a step's owned error never downcasts to it.
    assert_eq!(
        on_step(quote!(#[step(on_exception(matching(&E, F), action = "cancel"))])),
        [
            "`matching` takes the error type itself, not a reference: a step's error is owned, \
             so `&E` never matches; write `matching(E, F)`"
        ]
    );
    // At workflow level, policies naming types are tried before blanket ones.
    let item = step(&quote!(#[step]));
    let workflow_level = quote!(
        on_exception(action = "pause"),
        on_exception(matching(E), action = "skip")
    );
    assert!(errors(workflow_level, item.clone()).is_empty());
    let twice = quote!(cancel_if = g, cancel_if = Self::g);
    assert_eq!(
        errors(twice, item),
        ["this `cancel_if` guard is already listed; give it once"]
    );
}

#[test]
fn durable_names_are_visible_text() {
    let named = |name: &str| errors(quote!(name = #name), step(&quote!(#[step])));
    assert!(named("orders.fulfil").is_empty());
    assert!(named("café_über").is_empty());
    assert_eq!(
        named("orders\0fulfil"),
        [
            "workflow `name` cannot contain control characters (tabs, newlines, NUL); write e.g. `\"orders.fulfil\"`"
        ]
    );
    assert_eq!(
        named(" padded "),
        ["workflow `name` cannot start or end with whitespace; write `\"padded\"`"]
    );
    let raw_type = run(
        quote!(),
        quote! { impl r#Fulfil { #[step] async fn r#type(&self, cx: &mut StepCx<()>) {} } },
    );
    let model = raw_type.0.expect("model");
    assert_eq!(model.name, "Fulfil");
    assert_eq!(model.entries[0].name, "type");
}

#[test]
fn a_missing_input_is_named() {
    assert_eq!(
        errors(
            quote!(),
            quote! { impl W { #[step] async fn a(&self, cx: &mut StepCx<Order>) {} } }
        ),
        [
            "this step takes `StepCx<Order>` but the workflow names no `input`; add `input = Order` to `#[workflow(...)]`"
        ]
    );
}

#[test]
fn options_digest_ignores_spelling() {
    let digest =
        |args: TokenStream, item: TokenStream| run(args, item).0.expect("model").options_digest;
    let bare = digest(
        quote!(),
        quote! { impl W { #[step(skip_if = g)] async fn a(&self, cx: &mut StepCx<()>) {} } },
    );
    let with_self = digest(
        quote!(),
        quote! { impl W { #[step(skip_if = Self::g)] async fn a(&self, cx: &mut StepCx<()>) {} } },
    );
    let with_type = digest(
        quote!(),
        quote! { impl W { #[step(skip_if = W::g)] async fn a(&self, cx: &mut StepCx<()>) {} } },
    );
    let renamed = digest(
        quote!(),
        quote! { impl W { #[step(name = "a", skip_if = g)] async fn a_renamed(&self, cx: &mut StepCx<()>) {} } },
    );
    assert_eq!(bare, with_self);
    assert_eq!(bare, with_type);
    assert_eq!(bare, renamed, "the method name is not an option");
    let other = digest(
        quote!(),
        quote! { impl W { #[step(skip_if = h)] async fn a(&self, cx: &mut StepCx<()>) {} } },
    );
    assert_ne!(bare, other);
}

// `output = R` (issue 20).
mod flow;
mod output;
mod own_words;
