//! `schedule`, `timezone` and `catch_up` on `parse_quote!` input: the model of
//! a valid schedule, and every error at once.

use darling::Error;
use pgbus_core::schedule::CatchUp;
use quote::quote;

use crate::{parse, validate};

fn run(args: proc_macro2::TokenStream) -> (Option<crate::model::WorkflowDef>, Vec<String>) {
    let mut imp: syn::ItemImpl = syn::parse2(quote! {
        impl W {
            #[step]
            async fn go(&self, cx: &mut StepCx<()>) {}
        }
    })
    .expect("an impl");
    let mut errors = Error::accumulator();
    let raw = parse::workflow(args, &mut imp, &mut errors);
    let model = validate::workflow(raw, &mut errors);
    let messages = match errors.finish() {
        Ok(()) => Vec::new(),
        Err(error) => error.into_iter().map(|e| e.to_string()).collect(),
    };
    (model, messages)
}

#[test]
fn a_valid_schedule_is_normalized_with_its_defaults() {
    let (model, errors) = run(quote!(schedule = "0 */5 * * * *"));
    assert_eq!(errors, Vec::<String>::new());
    let schedule = model.and_then(|m| m.schedule).expect("a schedule");
    assert_eq!(
        (
            schedule.expression.as_str(),
            schedule.timezone.as_str(),
            schedule.catch_up
        ),
        ("0 */5 * * * *", "UTC", CatchUp::One)
    );
    let (model, _) = run(quote!(
        schedule = "@daily",
        timezone = "Asia/Tokyo",
        catch_up = "all"
    ));
    let schedule = model.and_then(|m| m.schedule).expect("a schedule");
    assert_eq!(schedule.timezone, "Asia/Tokyo");
    assert_eq!(schedule.catch_up, CatchUp::All(100));
}

#[test]
fn every_bad_option_is_reported_together() {
    let (_, errors) = run(quote!(
        schedule = "* * *",
        timezone = "Nowhere/Land",
        catch_up = "twice"
    ));
    assert_eq!(errors.len(), 3, "{errors:?}");
    assert!(errors[0].starts_with("`catch_up`: `twice`"), "{errors:?}");
    assert!(
        errors[1].starts_with("`timezone`: `Nowhere/Land`"),
        "{errors:?}"
    );
    assert!(errors[2].starts_with("`schedule`: `* * *`"), "{errors:?}");
    let (model, errors) = run(quote!(catch_up = "skip"));
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with("`catch_up` needs `schedule`"),
        "{errors:?}"
    );
    assert!(model.is_some_and(|m| m.schedule.is_none()));
}
