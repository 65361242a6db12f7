//! Seed inputs from Rust source files: each item under a `#[workflow]`
//! attribute, as written, with the attributes around it.

use std::ops::Range;
use std::str::FromStr;

use proc_macro2::{Delimiter, TokenStream, TokenTree};

/// The text of every item in `source` that carries a `#[workflow]` attribute
/// (any path ending in `workflow`), from its first outer attribute to its end:
/// its `{ ... }` body or its `;`. Empty when `source` does not lex.
#[must_use]
pub fn workflow_items(source: &str) -> Vec<String> {
    let Ok(tokens) = TokenStream::from_str(source) else {
        return Vec::new();
    };
    let mut ranges = Vec::new();
    find(tokens, &mut ranges);
    proc_macro2::extra::invalidate_current_thread_spans();
    ranges
        .into_iter()
        .filter_map(|range| source.get(range).map(str::to_owned))
        .collect()
}

fn find(tokens: TokenStream, ranges: &mut Vec<Range<usize>>) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut at = 0;
    while at < trees.len() {
        if is_attribute(&trees, at) {
            let start = at;
            let mut marked = false;
            while is_attribute(&trees, at) {
                if let TokenTree::Group(body) = &trees[at + 1] {
                    marked |= crate::property::workflow_args(&body.stream()).is_some();
                }
                at += 2;
            }
            if marked && let Some(end) = item_end(&trees, at) {
                let from = trees[start].span().byte_range().start;
                let to = trees[end].span().byte_range().end;
                ranges.push(from..to);
                at = end + 1;
            }
            continue;
        }
        if let TokenTree::Group(group) = &trees[at] {
            find(group.stream(), ranges);
        }
        at += 1;
    }
}

fn is_attribute(trees: &[TokenTree], at: usize) -> bool {
    matches!(
        (trees.get(at), trees.get(at + 1)),
        (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(body)))
            if hash.as_char() == '#' && body.delimiter() == Delimiter::Bracket
    )
}

/// The index of the item's last token: the first `;` or brace group from `at`.
fn item_end(trees: &[TokenTree], at: usize) -> Option<usize> {
    (at..trees.len()).find(|&i| match &trees[i] {
        TokenTree::Punct(punct) => punct.as_char() == ';',
        TokenTree::Group(group) => group.delimiter() == Delimiter::Brace,
        _ => false,
    })
}
