//! Tokens for the list reader: tests on one token, and tokens as
//! messages show them.

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

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

/// Tokens as a message shows them, `Self::opted_out` rather than
/// `Self :: opted_out`; `...` when long.
pub(super) fn compact(trees: &[TokenTree]) -> String {
    if let [one] = trees {
        return show(one);
    }
    let mut text = String::new();
    for (at, tree) in trees.iter().enumerate() {
        let glued = at == 0
            || matches!(&trees[at - 1], TokenTree::Punct(p) if matches!(p.as_char(), ':' | '<' | '&'))
            || matches!(tree, TokenTree::Punct(p) if matches!(p.as_char(), ':' | '<' | '>' | ','))
            || matches!(tree, TokenTree::Group(g) if g.delimiter() == Delimiter::Parenthesis);
        if !glued {
            text.push(' ');
        }
        text.push_str(&show(tree));
    }
    if text.chars().count() > 40 {
        "...".to_owned()
    } else {
        text
    }
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
