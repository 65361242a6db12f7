//! The error types of `matching(...)`: types separated by commas.

use darling::Error;
use darling::error::Accumulator;
use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};

use super::tokens::{compact, flatten, is_joint, is_punct, show, span_open};

/// Reads the error types of `matching(...)`: types separated by commas, each
/// malformed one reported and skipped.
pub(in crate::parse) fn read_types(
    tokens: TokenStream,
    errors: &mut Accumulator,
) -> Vec<syn::Type> {
    let trees = flatten(tokens);
    if let Some(first) = trees
        .first()
        .filter(|_| trees.iter().all(|t| is_punct(t, ',')))
    {
        errors.push(
            Error::custom(
                "`matching(...)` holds only `,` and names no error type; list at least one, \
                 or leave `matching` out to match every error",
            )
            .with_span(&first.span()),
        );
        return Vec::new();
    }
    let mut types = Vec::new();
    let mut pos = 0;
    // The type before a doubled comma, and the comma: reported with the type
    // after it, so the message shows the two as they should be written.
    let mut doubled: Option<(String, proc_macro2::Span)> = None;
    let mut before: Option<String> = None;
    while let Some(tree) = trees.get(pos) {
        if is_punct(tree, ',') {
            if pos == 0 {
                errors.push(
                    Error::custom("`matching(...)` starts with a `,`; remove it")
                        .with_span(&tree.span()),
                );
            } else {
                report_doubled(errors, doubled.take(), None);
                doubled = Some((before.clone().unwrap_or_default(), tree.span()));
            }
            pos += 1;
            continue;
        }
        let end = type_end(&trees, pos);
        let tokens: TokenStream = trees[pos..end].iter().cloned().collect();
        let parsed = (|input: ParseStream<'_>| {
            let ty = input.parse::<syn::Type>()?;
            Ok((ty, input.parse::<TokenStream>()?))
        })
        .parse2(tokens);
        match parsed {
            Ok((ty, rest)) => {
                // The type is at least one token: `rest` is shorter.
                let split = end.saturating_sub(rest.into_iter().count()).max(pos + 1);
                let written = compact(&trees[pos..split]);
                report_doubled(errors, doubled.take(), Some(&written));
                before = Some(written.clone());
                types.push(ty);
                match trees.get(split).filter(|_| split < end) {
                    // `matching(A A)`: one type written twice, with no comma.
                    Some(next) if starts_type(next) && compact(&trees[split..end]) == written => {
                        errors.push(
                            Error::custom(format!(
                                "`{written}` is written twice in `matching(...)`; give it once"
                            ))
                            .with_span(&next.span()),
                        );
                    }
                    // `matching(A B)`: the next type, with no comma before it.
                    Some(next) if starts_type(next) => {
                        errors.push(
                            Error::custom(format!(
                                "expected `,` between error types: `{}, {}`",
                                compact(&trees[pos..split]),
                                compact(&trees[split..end])
                            ))
                            .with_span(&next.span()),
                        );
                        pos = split;
                        continue;
                    }
                    Some(next) => {
                        errors.push(
                            Error::custom(format!(
                                "unexpected `{}` after an error type; `matching` lists error \
                                 types separated by `,`, e.g. `matching(CardDeclined, Timeout)`",
                                show(next)
                            ))
                            .with_span(&span_open(next)),
                        );
                    }
                    None => {}
                }
            }
            Err(_) => {
                report_doubled(errors, doubled.take(), None);
                before = None;
                errors.push(not_a_type(&trees[pos]));
            }
        }
        pos = end + 1;
    }
    report_doubled(errors, doubled, None);
    types
}

/// "two `,` in a row; remove one: `CardDeclined, Timeout`", for the comma
/// after the type written `before`, once the type `after` it is read.
fn report_doubled(
    errors: &mut Accumulator,
    doubled: Option<(String, proc_macro2::Span)>,
    after: Option<&str>,
) {
    let Some((before, span)) = doubled else {
        return;
    };
    let message = match after {
        Some(after) if !before.is_empty() => {
            format!("two `,` in a row; remove one: `{before}, {after}`")
        }
        _ => "two `,` in a row; remove one".to_owned(),
    };
    errors.push(Error::custom(message).with_span(&span));
}

/// The message for an error type that does not parse, at its first token.
fn not_a_type(first: &TokenTree) -> Error {
    let quoted = match first {
        TokenTree::Literal(literal) => match syn::Lit::new(literal.clone()) {
            syn::Lit::Str(s) => s.parse::<syn::Type>().ok().map(|_| s.value()),
            _ => None,
        },
        _ => None,
    };
    match quoted {
        Some(ty) => Error::custom(format!(
            "write the error type without quotes: `matching({ty})`"
        )),
        None => {
            Error::custom("expected error types, e.g. `matching(CardDeclined, std::io::Error)`")
        }
    }
    .with_span(&span_open(first))
}

/// The end of the type that starts at `from`: the next comma outside `<...>`.
fn type_end(trees: &[TokenTree], from: usize) -> usize {
    let mut depth = 0_usize;
    for at in from..trees.len() {
        if let TokenTree::Punct(punct) = &trees[at] {
            match punct.as_char() {
                ',' if depth == 0 => return at,
                '<' => depth += 1,
                '>' if at == 0 || !is_joint(&trees[at - 1], '-') => {
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
        }
    }
    trees.len()
}

/// Whether a type may start with `tree`: a name, `::`, `&`, `*`, `(`, `[`, `dyn`.
fn starts_type(tree: &TokenTree) -> bool {
    match tree {
        TokenTree::Ident(_) => true,
        TokenTree::Group(group) => matches!(
            group.delimiter(),
            Delimiter::Parenthesis | Delimiter::Bracket
        ),
        TokenTree::Punct(punct) => matches!(punct.as_char(), ':' | '&' | '*'),
        TokenTree::Literal(_) => false,
    }
}
