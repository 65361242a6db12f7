//! Errors come out in source order, notes right after their error.

use darling::Error;
use proc_macro2::{Span, TokenStream, TokenTree};

use super::{in_source_order, note};

/// The spans of the words of `source`, which the parser gives real positions.
fn spans(source: &str) -> Vec<Span> {
    let tokens: TokenStream = source.parse().expect("test source lexes");
    tokens
        .into_iter()
        .map(|tree: TokenTree| tree.span())
        .collect()
}

fn texts(errors: &[Error]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn errors_are_sorted_by_where_they_start() {
    let at = spans("first\nsecond third\nfourth");
    let errors = vec![
        Error::custom("fourth").with_span(&at[3]),
        Error::multiple(vec![
            Error::custom("third").with_span(&at[2]),
            Error::custom("first").with_span(&at[0]),
        ]),
        Error::custom("unspanned"),
        Error::custom("second").with_span(&at[1]),
    ];
    assert_eq!(
        texts(&in_source_order(errors)),
        ["unspanned", "first", "second", "third", "fourth"]
    );
}

#[test]
fn a_note_stays_after_its_error() {
    let at = spans("first second third");
    let errors = vec![
        Error::custom("duplicate").with_span(&at[2]),
        note("the first is here", at[0]),
        Error::custom("other").with_span(&at[1]),
    ];
    assert_eq!(
        texts(&in_source_order(errors)),
        ["other", "duplicate", "note: the first is here"]
    );
}

#[test]
fn errors_at_one_place_keep_their_order() {
    let at = spans("one");
    let errors = vec![
        Error::custom("b").with_span(&at[0]),
        Error::custom("a").with_span(&at[0]),
    ];
    assert_eq!(texts(&in_source_order(errors)), ["b", "a"]);
}
