//! `removed_step!(...)`: a gravestone for a step that is gone.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::EntryKind;
use proc_macro2::{Span, TokenTree};

use super::conditional;
use super::values::Text;
use super::{RawEntry, RawStepArgs};

/// `removed_step!(name)` or `removed_step!("durable.name")`.
pub(super) fn gravestone(mac: &syn::ImplItemMacro, errors: &mut Accumulator) -> Option<RawEntry> {
    let name = gravestone_name(&mac.mac, errors)?;
    for attr in &mac.attrs {
        if attr.path().is_ident("cfg") {
            errors.push(conditional::cfg_gravestone(attr));
        } else {
            errors.push(
                Error::custom(format!(
                    "`removed_step!` takes no attributes; remove `#[{}]`",
                    crate::render::code(attr.path())
                ))
                .with_span(attr.path()),
            );
        }
    }
    Some(RawEntry {
        kind: EntryKind::Removed,
        method: None,
        removed_name: Some(name),
        args: RawStepArgs::default(),
        signature: None,
    })
}

const SHAPE: &str = "`removed_step!` takes the removed step's durable name, e.g. \
                     `removed_step!(legacy_check)` or `removed_step!(\"legacy.check\")`";

/// The one name of `removed_step!(...)`, each mistake reported at its token.
fn gravestone_name(mac: &syn::Macro, errors: &mut Accumulator) -> Option<Text> {
    let trees: Vec<TokenTree> = mac.tokens.clone().into_iter().collect();
    let Some(first) = trees.first() else {
        errors.push(Error::custom(SHAPE).with_span(&mac.path));
        return None;
    };
    let name = match first {
        TokenTree::Ident(ident) => Text {
            value: syn::ext::IdentExt::unraw(ident).to_string(),
            span: ident.span(),
        },
        TokenTree::Literal(literal) => match syn::Lit::new(literal.clone()) {
            syn::Lit::Str(s) => Text {
                value: s.value(),
                span: s.span(),
            },
            _ => {
                errors.push(
                    Error::custom(format!(
                        "{SHAPE}; a name is an identifier or a string in quotes, not `{literal}`"
                    ))
                    .with_span(&literal.span()),
                );
                return None;
            }
        },
        other => {
            errors.push(Error::custom(SHAPE).with_span(&open_span(other)));
            return None;
        }
    };
    let Some(next) = trees.get(1) else {
        return Some(name);
    };
    let message = match (next, trees.get(2)) {
        (TokenTree::Punct(punct), None) if punct.as_char() == ',' => {
            format!(
                "`removed_step!` takes one name; remove the trailing `,`: `removed_step!({first})`"
            )
        }
        (TokenTree::Punct(punct), Some(second)) if punct.as_char() == ',' => {
            return report(
                errors,
                format!(
                    "`removed_step!` takes one name; write one `removed_step!` for each removed \
                     step: `removed_step!({first}); removed_step!({second});`"
                ),
                open_span(second),
            );
        }
        (TokenTree::Punct(punct), _) if punct.as_char() == '=' => format!(
            "`removed_step!` takes the name alone, with no `=`: `removed_step!({})`",
            trees
                .get(2)
                .map_or_else(|| first.to_string(), ToString::to_string)
        ),
        (TokenTree::Punct(punct), _) if punct.as_char() == ':' => {
            "`removed_step!` takes the step's durable name, not a path, e.g. \
             `removed_step!(legacy_check)` or `removed_step!(\"legacy.check\")`"
                .to_owned()
        }
        _ => format!("{SHAPE}; it takes one name, and `{next}` follows `{first}`"),
    };
    report(errors, message, open_span(next))
}

fn report(errors: &mut Accumulator, message: String, span: Span) -> Option<Text> {
    errors.push(Error::custom(message).with_span(&span));
    None
}

fn open_span(tree: &TokenTree) -> Span {
    match tree {
        TokenTree::Group(group) => group.span_open(),
        other => other.span(),
    }
}
