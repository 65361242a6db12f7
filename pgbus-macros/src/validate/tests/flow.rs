//! Flow control options on `parse_quote!` input: the model of valid options,
//! each error's text, and the options digest naming them only when written.

use pgbus_core::{DeadlineAction, Rate, SlotHolder};
use proc_macro2::TokenStream;
use quote::quote;

use super::{errors, run};
use crate::model::WorkflowDef;

fn item() -> TokenStream {
    quote! {
        impl W {
            fn customer(input: &Order) -> String { input.customer.clone() }
            #[step]
            async fn a(&self, cx: &mut StepCx<Order>) {}
        }
    }
}

fn model(args: TokenStream) -> WorkflowDef {
    let (model, errors) = run(args, item());
    assert_eq!(errors, Vec::<String>::new());
    model.expect("model")
}

fn step_errors(attr: TokenStream) -> Vec<String> {
    errors(
        quote!(input = Order),
        quote! {
            impl W {
                #attr
                async fn a(&self, cx: &mut StepCx<Order>) {}
            }
        },
    )
}

#[test]
fn every_flow_option_is_read_into_the_model() {
    let def = model(quote!(
        input = Order,
        concurrency = 5,
        key = Self::customer,
        key_concurrency = 1,
        slot = "run",
        rate_limit = "100/1m",
        key_rate_limit = "10/1s",
        deadline = "2h",
        on_deadline = "pause"
    ));
    let flow = &def.flow;
    assert_eq!(flow.concurrency, Some(5));
    assert!(flow.key.is_some());
    assert_eq!(flow.key_concurrency, Some(1));
    assert_eq!(flow.slot, Some(SlotHolder::Run));
    assert_eq!(
        flow.rate_limit,
        Some(Rate {
            count: 100,
            period_ms: 60_000
        })
    );
    assert_eq!(
        flow.key_rate_limit,
        Some(Rate {
            count: 10,
            period_ms: 1_000
        })
    );
    assert_eq!(flow.deadline_ms, Some(7_200_000));
    assert_eq!(flow.on_deadline, Some(DeadlineAction::Pause));
}

#[test]
fn a_workflow_without_flow_options_has_none_and_keeps_its_options_digest() {
    let def = model(quote!(input = Order));
    assert!(def.flow.is_empty());
    assert!(!def.options_json.contains("flow"), "{}", def.options_json);
    assert!(
        !def.options_json.contains("rate_limit"),
        "{}",
        def.options_json
    );
}

#[test]
fn the_options_digest_names_flow_options_only_when_written() {
    let none = model(quote!(input = Order));
    let limited = model(quote!(input = Order, concurrency = 5));
    assert!(
        limited.options_json.contains(r#""flow":{"concurrency":5}"#),
        "{}",
        limited.options_json
    );
    assert_ne!(none.options_digest, limited.options_digest);
    assert_eq!(none.digest, limited.digest, "the step list did not change");
    // However a rate is spelled, and however the key method is named.
    let a = model(quote!(
        input = Order,
        key = customer,
        key_rate_limit = "10/1s"
    ));
    let b = model(quote!(
        input = Order,
        key = W::customer,
        key_rate_limit = "10/1000ms"
    ));
    assert_eq!(a.options_json, b.options_json);
    assert!(
        a.options_json
            .contains(r#""key_rate_limit":{"count":10,"period_ms":1000}"#),
        "{}",
        a.options_json
    );
}

#[test]
fn a_step_rate_limit_is_read_and_named_in_the_options_digest() {
    let (def, errors) = run(
        quote!(input = Order),
        quote! {
            impl W {
                #[step(rate_limit = "5/250ms")]
                async fn a(&self, cx: &mut StepCx<Order>) {}
                #[fan_out(rate_limit = "1/1d")]
                async fn b(&self, cx: &mut StepCx<Order>, fan: &mut FanOut) {}
                #[step]
                async fn c(&self, cx: &mut StepCx<Order>) {}
            }
        },
    );
    assert_eq!(errors, Vec::<String>::new());
    let def = def.expect("model");
    let rates: Vec<_> = def.entries.iter().map(|e| e.options.rate_limit).collect();
    assert_eq!(
        rates,
        [
            Some(Rate {
                count: 5,
                period_ms: 250
            }),
            Some(Rate {
                count: 1,
                period_ms: 86_400_000
            }),
            None
        ]
    );
    assert_eq!(def.options_json.matches("rate_limit").count(), 2);
}

#[test]
fn limits_are_whole_numbers_from_one_to_the_maximum() {
    let max = pgbus_core::flow::MAX_CONCURRENCY;
    assert_eq!(
        errors(quote!(input = Order, concurrency = 0), item()),
        [format!(
            "a limit of 0 would never run a step; `concurrency` takes 1 to {max}, or leave it out for no limit"
        )]
    );
    assert_eq!(
        errors(quote!(input = Order, key_concurrency = 100001), item()),
        [format!(
            "`key_concurrency` is at most {max} (100001 given); leave it out for no limit"
        )]
    );
    assert_eq!(
        errors(
            quote!(input = Order, concurrency = 99999999999999999999999),
            item()
        ),
        [format!(
            "`concurrency` is at most {max} (99999999999999999999999 given); leave it out for no limit"
        )]
    );
    assert_eq!(
        errors(quote!(input = Order, concurrency = 2.5), item()),
        [format!(
            "`concurrency` takes a whole number of slots from 1 to {max}, e.g. `concurrency = 10`"
        )]
    );
    assert_eq!(
        errors(quote!(input = Order, concurrency = "10"), item()),
        ["write the number without quotes: `concurrency = 10`"]
    );
    assert_eq!(
        errors(quote!(input = Order, concurrency = 10u32), item()),
        ["write the number without a type suffix: `concurrency = 10`"]
    );
    let negative = errors(quote!(input = Order, concurrency = -1), item());
    assert!(
        negative[0].starts_with("`concurrency` cannot be negative"),
        "{negative:?}"
    );
    assert_eq!(
        errors(quote!(input = Order, concurrency), item()),
        ["`concurrency` needs a whole number of slots, e.g. `concurrency = 10`"]
    );
}

#[test]
fn each_bad_rate_is_reported_with_the_grammar_s_own_words() {
    for (rate, error) in [
        ("10", pgbus_core::RateError::NoSlash),
        ("0/1s", pgbus_core::RateError::ZeroCount),
        ("1001/1s", pgbus_core::RateError::CountTooLarge(1001)),
        ("10/0s", pgbus_core::RateError::ZeroPeriod),
    ] {
        assert_eq!(
            errors(quote!(input = Order, rate_limit = #rate), item()),
            [format!("invalid `rate_limit`: {error}")]
        );
    }
    assert_eq!(
        step_errors(quote!(#[step(rate_limit = "x/1s")])),
        [format!(
            "invalid `rate_limit`: {}",
            pgbus_core::RateError::BadCount("x".into())
        )]
    );
    let unquoted = errors(quote!(input = Order, key_rate_limit = 10), item());
    assert!(
        unquoted[0].starts_with("`key_rate_limit` is a rate in quotes"),
        "{unquoted:?}"
    );
}

#[test]
fn slot_and_on_deadline_words_get_a_did_you_mean() {
    assert_eq!(
        errors(
            quote!(input = Order, concurrency = 1, slot = "runs"),
            item()
        ),
        [
            "unknown `slot` value `runs`; expected `step` (a slot is held while a step of the run is in progress, \
             the default) or `run` (held from the run's first step to its end); did you mean `run`?"
        ]
    );
    assert_eq!(
        errors(quote!(input = Order, on_deadline = "abort"), item()),
        [
            "unknown `on_deadline` value `abort`; expected `cancel` (the default) or `pause`: \
             what a run past its deadline becomes; did you mean `cancel`?"
        ]
    );
}

#[test]
fn rules_across_flow_options() {
    assert_eq!(
        errors(quote!(input = Order, deadline = "0s"), item()),
        [
            "`deadline` must be greater than zero: a run would be past it as it starts; leave it out for no deadline"
        ]
    );
    let slot = errors(quote!(input = Order, slot = "run"), item());
    assert_eq!(slot.len(), 1);
    assert!(
        slot[0].starts_with("`slot` says what holds a concurrency slot, and no limit is declared"),
        "{slot:?}"
    );
    // A limit written but refused is reported once, not again through `slot`.
    assert_eq!(
        errors(quote!(input = Order, concurrency = 0, slot = "run"), item()).len(),
        1
    );
    assert!(
        errors(
            quote!(input = Order, key_concurrency = 2, slot = "run"),
            item()
        )
        .is_empty()
    );
    let key = errors(
        quote!(input = Order, key = customer, concurrency = 1),
        item(),
    );
    assert_eq!(key.len(), 1);
    assert!(key[0].starts_with("`key` alone limits nothing"), "{key:?}");
    // A per-key limit without `key`: the start gives the key.
    assert!(errors(quote!(input = Order, key_concurrency = 1), item()).is_empty());
    assert!(errors(quote!(input = Order, key_rate_limit = "1/1s"), item()).is_empty());
    // `on_deadline` alone applies to a deadline a start gives.
    assert!(errors(quote!(input = Order, on_deadline = "pause"), item()).is_empty());
    assert_eq!(
        errors(
            quote!(input = Order, concurrency = 1, concurrency = 2),
            item()
        ),
        ["duplicate `#[workflow]` option `concurrency`; give it once"]
    );
}

#[test]
fn workflow_flow_options_on_a_step_say_where_they_belong() {
    for option in [
        "concurrency",
        "key_concurrency",
        "slot",
        "key_rate_limit",
        "on_deadline",
        "key",
    ] {
        let ident = syn::Ident::new(option, proc_macro2::Span::call_site());
        let found = step_errors(quote!(#[step(#ident = 1)]));
        // `key` and `slot` need a limit on the workflow too: the fix has one.
        let fix = match option {
            "key" => "key = 1, key_concurrency = 1".to_owned(),
            "slot" => "concurrency = 1, slot = 1".to_owned(),
            _ => format!("{option} = 1"),
        };
        assert_eq!(
            found,
            [format!(
                "`{option}` is a workflow option: flow control is declared for the whole workflow, \
                 and a step takes only its own `rate_limit`; write it in `#[workflow(...)]`, e.g. \
                 `#[workflow({fix})]`"
            )]
        );
    }
    assert_eq!(
        errors(
            quote!(input = Order),
            quote! {
                impl W {
                    #[fan_out(deadline = "1h")]
                    async fn a(&self, cx: &mut StepCx<Order>, fan: &mut FanOut) {}
                }
            },
        ),
        [
            "`deadline` is a workflow option: it bounds the whole run, from its start; write it in \
             `#[workflow(...)]`, e.g. `#[workflow(deadline = \"1h\")]`; a step's own bound is \
             `timeout = \"1h\"`"
        ]
    );
    assert_eq!(
        step_errors(quote!(#[step(max_concurrency = 1)])),
        [
            "unknown `#[step]` option `max_concurrency`; pgbus calls it `concurrency`, which is a workflow \
             option: flow control is declared for the whole workflow, and a step takes only its own \
             `rate_limit`; write it in `#[workflow(...)]`, e.g. `#[workflow(concurrency = 1)]`"
        ]
    );
    assert_eq!(
        errors(quote!(input = Order, timeout = "1h"), item()),
        [
            "`timeout` is a step option: it bounds one step's body; write it on the `#[step]` that needs it, \
             e.g. `#[step(timeout = \"1h\")]`, or bound the whole run with `deadline = \"1h\"`"
        ]
    );
    assert_eq!(
        errors(quote!(input = Order, throttle = "1/1s"), item()),
        ["unknown `#[workflow]` option `throttle`; did you mean `rate_limit`?"]
    );
}

#[test]
fn the_key_method_takes_the_input_and_no_self() {
    let key_errors = |method: TokenStream| {
        errors(
            quote!(input = Order, key = Self::customer, key_concurrency = 1),
            quote! {
                impl W {
                    #method
                    #[step]
                    async fn a(&self, cx: &mut StepCx<Order>) {}
                }
            },
        )
    };
    let shape = "a `key` method takes the input by reference and returns the key: \
                 `fn customer(input: &Order) -> String`";
    assert_eq!(
        key_errors(quote!(
            fn customer(&self, input: &Order) -> String {
                String::new()
            }
        )),
        [format!(
            "{shape}, with no `self`: the client computes the key when it starts a run, where no workflow value exists"
        )]
    );
    assert_eq!(
        key_errors(quote!(
            fn customer() -> String {
                String::new()
            }
        )),
        [format!("{shape}; this one takes none")]
    );
    assert_eq!(
        key_errors(quote!(
            fn customer(a: &Order, b: u8) -> String {
                String::new()
            }
        )),
        // The message uses the method's own name for the input.
        [format!(
            "{}; this one takes 2 arguments",
            shape.replace("(input:", "(a:")
        )]
    );
    assert_eq!(
        key_errors(quote!(
            async fn customer(a: &Order) -> String {
                String::new()
            }
        )),
        [format!(
            "{}; not `async`: the key is computed when a run starts",
            shape.replace("(input:", "(a:")
        )]
    );
    assert!(
        key_errors(quote!(
            fn customer(order: &Order) -> &str {
                &order.customer
            }
        ))
        .is_empty()
    );
    // A method elsewhere, or one not found, is left to the compiler.
    assert!(
        errors(
            quote!(
                input = Order,
                key = crate::keys::customer,
                key_concurrency = 1
            ),
            item()
        )
        .is_empty()
    );
    assert!(
        errors(
            quote!(input = Order, key = Self::missing, key_concurrency = 1),
            item()
        )
        .is_empty()
    );
}
