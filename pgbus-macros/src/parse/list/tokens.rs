//! Tokens for the list reader: tests on one token, and tokens as
//! messages show them.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use syn::Token;
use syn::parse::Parser;
use syn::punctuated::Punctuated;

/// The tokens of a list, with the invisible groups a `macro_rules!` leaves
/// around a fragment opened, so `$options` reads as if written in place.
pub(super) fn flatten(tokens: TokenStream) -> Vec<TokenTree> {
    let mut out = Vec::new();
    for tree in tokens {
        match tree {
            TokenTree::Group(group) if group.delimiter() == Delimiter::None => {
                out.extend(flatten(group.stream()));
            }
            other => out.push(other),
        }
    }
    out
}

pub(super) fn is_punct(tree: &TokenTree, c: char) -> bool {
    matches!(tree, TokenTree::Punct(punct) if punct.as_char() == c)
}

pub(super) fn is_joint(tree: &TokenTree, c: char) -> bool {
    matches!(tree, TokenTree::Punct(punct)
        if punct.as_char() == c && punct.spacing() == proc_macro2::Spacing::Joint)
}

/// Where to point at `tree`: a group's opening delimiter, else the token.
pub(super) fn span_open(tree: &TokenTree) -> Span {
    match tree {
        TokenTree::Group(group) => group.span_open(),
        other => other.span(),
    }
}

/// A token as a message shows it: a group as `(...)`, a long literal cut.
pub(super) fn show(tree: &TokenTree) -> String {
    match tree {
        TokenTree::Group(group) => match group.delimiter() {
            Delimiter::Parenthesis => "(...)".to_owned(),
            Delimiter::Bracket => "[...]".to_owned(),
            Delimiter::Brace => "{...}".to_owned(),
            Delimiter::None => "...".to_owned(),
        },
        other => {
            let text = other.to_string();
            if text.chars().count() > 40 {
                let cut: String = text.chars().take(37).collect();
                format!("{cut}...")
            } else {
                text
            }
        }
    }
}

/// The longest code a message echoes; longer code is shown as `...`.
const ECHO_MAX: usize = 80;

/// Tokens as a message shows them, as the user would write them
/// (`Self::opted_out`, `on_exception(action = "pause")`); `...` when long.
pub(super) fn compact(trees: &[TokenTree]) -> String {
    echo(&trees.iter().cloned().collect()).unwrap_or_else(|| "...".to_owned())
}

/// An option list as the user would write it, for a message that gives their
/// own code back, when it reads as one (`name = value`, `name(...)`, separated
/// by commas): a list that does not is reported on its own, and a message
/// that gave it back would suggest it as it is.
pub(in crate::parse) fn echo_options(tokens: &TokenStream) -> Option<String> {
    let options = Punctuated::<syn::Meta, Token![,]>::parse_terminated;
    options.parse2(tokens.clone()).ok()?;
    echo(tokens)
}

/// The error types of `matching(...)` as written, when each reads as a type.
pub(super) fn echo_types(tokens: &TokenStream) -> Option<String> {
    let types = Punctuated::<syn::Type, Token![,]>::parse_terminated;
    types.parse2(tokens.clone()).ok()?;
    echo(tokens)
}

/// A value as written, when it reads as one expression (or, for a type
/// option, one type).
pub(super) fn echo_value(trees: &[TokenTree], takes_type: bool) -> Option<String> {
    let tokens: TokenStream = trees.iter().cloned().collect();
    let is_value = syn::parse2::<syn::Expr>(tokens.clone()).is_ok()
        || (takes_type && syn::parse2::<syn::Type>(tokens.clone()).is_ok());
    if is_value { echo(&tokens) } else { None }
}

/// Tokens as the user would write them; `None` when there are none, or too
/// many to quote.
fn echo(tokens: &TokenStream) -> Option<String> {
    let text = crate::render::code(tokens);
    let text = text.trim();
    (!text.is_empty() && text.chars().count() <= ECHO_MAX).then(|| text.to_owned())
}

pub(super) fn path_text(path: &syn::Path) -> String {
    let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
    let joined = segments.join("::");
    if path.leading_colon.is_some() {
        format!("::{joined}")
    } else {
        joined
    }
}
