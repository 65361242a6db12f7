//! `#[workflow(output = R)]`: parsed as `input` is, `()` when not given,
//! and named in the options digest only when declared.

use proc_macro2::TokenStream;
use quote::{ToTokens as _, quote};

use super::{errors, run};

fn item() -> TokenStream {
    quote! { impl W { #[step] async fn a(&self, cx: &mut StepCx<()>) {} } }
}

#[test]
fn output_is_a_type_or_a_string_holding_one_and_unit_by_default() {
    let output = |args: TokenStream| {
        let (model, errors) = run(args, item());
        assert_eq!(errors, Vec::<String>::new());
        model.expect("model").output.to_token_stream().to_string()
    };
    assert_eq!(output(quote!()), "()");
    assert_eq!(output(quote!(output = Receipt)), "Receipt");
    assert_eq!(output(quote!(output = "Vec<Receipt>")), "Vec < Receipt >");
    assert_eq!(output(quote!(output = Option<u32>)), "Option < u32 >");
}

#[test]
fn a_bad_output_is_an_error_on_it() {
    assert_eq!(
        errors(quote!(output = "Vec<Receipt"), item()),
        [
            "`output` is not a valid type; write e.g. `output = Receipt` or `output = \"Vec<Receipt>\"`"
        ]
    );
    assert_eq!(
        errors(quote!(output), item()),
        ["`output` needs a type, e.g. `output = Receipt`"]
    );
    assert_eq!(
        errors(quote!(output = Receipt, output = Receipt), item()).len(),
        1,
        "given twice"
    );
    let typo = errors(quote!(outptu = Receipt), item());
    assert!(typo[0].contains("did you mean `output`"), "{typo:?}");
}

#[test]
fn the_options_digest_names_output_only_when_declared() {
    let model = |args: TokenStream| run(args, item()).0.expect("model");
    let none = model(quote!());
    assert!(
        !none.options_json.contains("output"),
        "{}",
        none.options_json
    );
    let unit = model(quote!(output = ()));
    let receipt = model(quote!(output = Receipt));
    assert!(
        receipt.options_json.contains(r#""output":"Receipt""#),
        "{}",
        receipt.options_json
    );
    assert_ne!(none.options_digest, receipt.options_digest);
    assert_ne!(unit.options_digest, receipt.options_digest);
    assert_eq!(
        none.digest, receipt.digest,
        "the definition digest is the step list's alone"
    );
}
