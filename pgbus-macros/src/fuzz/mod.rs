//! The property the fuzzer (`fuzz/` at the workspace root) searches for
//! counterexamples to, and the corpus replay test holds in CI: whatever source
//! text `#[workflow]` is given, the expansion does not panic, and every error it
//! reports is spanned inside that text.
//!
//! An error spanned at `Span::call_site()` is one the compiler shows on the
//! whole `#[workflow]` attribute, however far from it the fault is: the user is
//! left to find the offending token alone. Such an error is what this module
//! calls unspanned.
//!
//! Here the module is compiled for tests only. The fuzz crate, which cannot link
//! a proc-macro crate's functions, compiles this file and the pipeline's modules
//! from their paths in this crate, so the fuzzer and the test run the same code.
//! Both need proc-macro2's `span-locations` feature: outside a compiler, spans
//! then carry byte offsets into the text they were lexed from.

use std::fmt;
use std::ops::Range;
use std::str::FromStr;

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};

/// One error of an expansion: its message and the bytes of the input its span
/// covers (`0..0` for `Span::call_site()`).
pub(crate) struct Reported {
    pub(crate) message: String,
    pub(crate) range: Range<usize>,
}

impl Reported {
    /// Whether the span lies inside the input: not empty, not past its end. A
    /// call-site span is `0..0`, empty, where any token lexed from the input is
    /// at least one byte long.
    pub(crate) fn spanned_within(&self, input_len: usize) -> bool {
        self.range.start < self.range.end && self.range.end <= input_len
    }
}

impl fmt::Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} at bytes {:?}", self.message, self.range)
    }
}

/// Expands `text` as an item under `#[workflow]` and returns the errors the
/// expansion reports, each with its byte range in `text`; `None` when `text`
/// does not lex as Rust tokens (the compiler would stop before the macro).
///
/// The first of the item's leading attributes whose path ends in `workflow`
/// (`#[workflow]`, `#[workflow(...)]`, `#[pgbus::workflow(...)]`) is taken off
/// and its arguments passed as the macro's; without one, the arguments are empty
/// and the whole text is the item. Other attributes, before or after it, stay on
/// the item, as the compiler leaves them.
///
/// Every span of this thread is invalidated on the way out, so repeated calls
/// do not grow proc-macro2's source map; no span may be held across a call.
pub(crate) fn expand(text: &str) -> Option<Vec<Reported>> {
    let tokens = TokenStream::from_str(text).ok()?;
    let (args, item) = split_workflow_attribute(tokens);
    let output = crate::expand::workflow(args, item);
    let reported = compile_errors(output);
    proc_macro2::extra::invalidate_current_thread_spans();
    Some(reported)
}

/// The errors of `expand(text)` that are not spanned inside `text`.
pub(crate) fn unspanned(text: &str) -> Vec<Reported> {
    expand(text)
        .unwrap_or_default()
        .into_iter()
        .filter(|reported| !reported.spanned_within(text.len()))
        .collect()
}

/// A message with what the user wrote taken out (code in backticks, numbers),
/// so that errors of one kind share one class however they were triggered.
pub(crate) fn message_class(message: &str) -> String {
    let mut class = String::with_capacity(message.len());
    let mut in_code = false;
    for ch in message.chars() {
        match ch {
            '`' if in_code => {
                in_code = false;
                class.push_str("…`");
            }
            '`' => {
                in_code = true;
                class.push('`');
            }
            _ if in_code => {}
            '0'..='9' => {
                if !class.ends_with('#') {
                    class.push('#');
                }
            }
            _ => class.push(ch),
        }
    }
    class
}

/// `(args, item)`: the arguments of the first leading `#[..workflow(..)]`, and
/// the tokens without that attribute.
fn split_workflow_attribute(tokens: TokenStream) -> (TokenStream, TokenStream) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut at = 0;
    while let (Some(TokenTree::Punct(hash)), Some(TokenTree::Group(body))) =
        (trees.get(at), trees.get(at + 1))
    {
        if hash.as_char() != '#' || body.delimiter() != Delimiter::Bracket {
            break;
        }
        if let Some(args) = workflow_args(&body.stream()) {
            let item = trees[..at].iter().chain(&trees[at + 2..]).cloned();
            return (args, item.collect());
        }
        at += 2;
    }
    (TokenStream::new(), trees.into_iter().collect())
}

/// `Some(args)` when an attribute's contents are a path ending in `workflow`,
/// then nothing or one delimited group: the arguments.
pub(crate) fn workflow_args(contents: &TokenStream) -> Option<TokenStream> {
    let mut last_ident = None;
    let mut args = None;
    for tree in contents.clone() {
        if args.is_some() {
            return None;
        }
        match tree {
            TokenTree::Ident(ident) => last_ident = Some(ident.to_string()),
            TokenTree::Punct(punct) if punct.as_char() == ':' => {}
            TokenTree::Group(group) => args = Some(group.stream()),
            _ => return None,
        }
    }
    (last_ident.as_deref() == Some("workflow")).then(|| args.unwrap_or_default())
}

/// The `::core::compile_error! { "..." }` invocations at the top level of an
/// expansion: the errors, each at the span of its `compile_error` token (the
/// start of the error's span). The user's impl, also in the expansion, is a
/// single item, so its own tokens never match at the top level.
fn compile_errors(output: TokenStream) -> Vec<Reported> {
    let trees: Vec<TokenTree> = output.into_iter().collect();
    let mut reported = Vec::new();
    for (at, tree) in trees.iter().enumerate() {
        let TokenTree::Ident(ident) = tree else {
            continue;
        };
        if ident != "compile_error" {
            continue;
        }
        let Some(TokenTree::Group(group)) = trees.get(at + 2) else {
            continue;
        };
        let message = syn::parse2::<syn::LitStr>(group.stream())
            .map_or_else(|_| group.stream().to_string(), |lit| lit.value());
        reported.push(Reported {
            message,
            range: span_range(ident.span(), group.span()),
        });
    }
    reported
}

/// The bytes from `start` to `end`, as far as they are known: a span from
/// another source (call site) is `0..0`.
fn span_range(start: Span, end: Span) -> Range<usize> {
    let start = start.byte_range();
    let end = end.byte_range();
    if start.is_empty() || end.is_empty() {
        return start;
    }
    start.start..end.end.max(start.end)
}

#[cfg(test)]
mod tests;
