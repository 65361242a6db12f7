//! Every option of every place, written in every other place, says where it
//! belongs: the whole matrix, through the parser, so no option falls through
//! to the generic "unknown option" message.

use darling::Error;
use pgbus_core::vocab::options::{FAN_OUT, ON_EXCEPTION, STEP, WAIT_FOR, WORKFLOW};
use proc_macro2::TokenStream;
use quote::{format_ident, quote};

use crate::parse::options::Place;

const PLACES: [(Place, &[&str]); 5] = [
    (Place::Workflow, WORKFLOW),
    (Place::Step, STEP),
    (Place::FanOut, FAN_OUT),
    (Place::OnException, ON_EXCEPTION),
    (Place::WaitFor, WAIT_FOR),
];

/// The messages of `option` written at `place`, through the whole parser.
fn messages(place: Place, option: &TokenStream) -> Vec<String> {
    let (args, attr) = match place {
        Place::Workflow => (option.clone(), quote!(#[step])),
        Place::Step => (quote!(), quote!(#[step(#option)])),
        Place::FanOut => (quote!(), quote!(#[fan_out(#option)])),
        Place::OnException => (
            quote!(),
            quote!(#[step(on_exception(action = "pause", #option))]),
        ),
        Place::WaitFor => (quote!(), quote!(#[step(wait_for(name = "x", #option))])),
    };
    let fan = (place == Place::FanOut).then(|| quote!(, fan: &mut FanOut));
    let mut imp: syn::ItemImpl = syn::parse_quote! {
        impl W {
            #attr
            async fn a(&self, cx: &mut StepCx<()> #fan) {}
        }
    };
    let mut errors = Error::accumulator();
    let _ = crate::parse::workflow(args, &mut imp, &mut errors);
    errors
        .into_inner()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn every_option_of_another_place_says_where_it_belongs() {
    let mut every: Vec<&str> = PLACES
        .iter()
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    every.sort_unstable();
    every.dedup();
    let mut checked = 0;
    for (place, allowed) in PLACES {
        for name in every.iter().filter(|name| !allowed.contains(name)) {
            let ident = format_ident!("{}", name);
            // A bare word, a value and a list: each shape gets the message.
            for option in [quote!(#ident), quote!(#ident = 5), quote!(#ident(Thing))] {
                let found = messages(place, &option);
                let placed: Vec<&String> = found
                    .iter()
                    .filter(|m| m.starts_with(&format!("`{name}` ")))
                    .collect();
                assert_eq!(
                    placed.len(),
                    1,
                    "`{option}` at {place:?} gives no placement message: {found:#?}"
                );
                assert!(
                    placed[0].contains("write") || placed[0].contains("move"),
                    "`{option}` at {place:?} says no fix: {}",
                    placed[0]
                );
                assert!(
                    !found.iter().any(|m| m.starts_with("unknown")),
                    "`{option}` at {place:?}: {found:#?}"
                );
                checked += 1;
            }
        }
    }
    // 5 places, 3 shapes each: a guard against an empty walk.
    assert!(checked > 150, "{checked}");
}

#[test]
fn a_policy_option_gets_a_policy_that_compiles() {
    let on_workflow = messages(Place::Workflow, &quote!(max_reattempts = 5));
    assert_eq!(
        on_workflow,
        [
            "`max_reattempts` is an `on_exception(...)` option: it applies to a policy that \
             reattempts; write `on_exception(action = \"reattempt\", max_reattempts = 5)` in \
             `#[workflow(...)]`, or `#[on_exception(action = \"reattempt\", max_reattempts = 5)]` \
             below `#[workflow]`"
        ]
    );
    let matching = messages(Place::Step, &quote!(matching(CardDeclined)));
    assert_eq!(
        matching,
        ["`matching` is an `on_exception(...)` option; write \
             `on_exception(matching(CardDeclined), action = \"pause\")`, with the `action` (or \
             `handler`) you mean: a policy needs one"]
    );
    let cancel_if = messages(Place::OnException, &quote!(cancel_if = Self::void));
    assert_eq!(
        cancel_if,
        [
            "`cancel_if` is a workflow option: it cancels the whole run; write it in \
             `#[workflow(...)]`, e.g. `#[workflow(cancel_if = Self::void)]`; to cancel the run \
             when an error matches, write `action = \"cancel\"`"
        ]
    );
    let synonym = messages(Place::Step, &quote!(retries = 5));
    assert_eq!(
        synonym,
        [
            "unknown `#[step]` option `retries`; pgbus calls it `max_reattempts`, which is an \
             `on_exception(...)` option: it applies to a policy that reattempts; write \
             `on_exception(action = \"reattempt\", max_reattempts = 5)`"
        ]
    );
}
