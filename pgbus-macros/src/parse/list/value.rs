//! The value of `name = value`: up to the next comma of the list, one
//! expression (or, for a type option, one type), else reported.

use darling::Error;
use darling::ast::{MetaNameValueInvalidExpr, NestedMeta};
use proc_macro2::{Span, TokenStream, TokenTree};
use syn::parse::{ParseStream, Parser};
use syn::{Expr, Meta, Token};

use super::Reader;
use super::tokens::{compact, echo_value, is_joint, is_punct, path_text, show, span_open};
use crate::parse::options::needs;

impl Reader<'_> {
    /// The value after `name =`, up to the next comma of the list.
    pub(super) fn value(&mut self, path: syn::Path, eq_span: Span) -> String {
        let name = path_text(&path);
        let takes_type = self.place.takes_type(&name);
        let end = self.value_end(takes_type);
        let from = self.pos;
        let shape = self.place.shape(&name);
        let Some(first) = self.trees.get(from).filter(|_| from < end).cloned() else {
            // `name =` and then nothing, or a comma.
            self.pos = end;
            self.malformed(path, eq_span, needs(&name, &shape).with_span(&eq_span));
            return format!("{name} =");
        };
        if is_punct(&first, '=') {
            self.pos = end;
            let message = match echo_value(&self.trees[from + 1..end], takes_type) {
                Some(value) => format!("`=` is written twice; write `{name} = {value}`"),
                None => format!(
                    "`=` is written twice; `{name}` needs {}, e.g. `{}`",
                    shape.needs, shape.example
                ),
            };
            let error = Error::custom(message).with_span(&first.span());
            self.malformed(path, eq_span, error);
            return format!("{name} =");
        }
        let tokens: TokenStream = self.trees[from..end].iter().cloned().collect();
        let rest = prefix(tokens, takes_type);
        let Some(rest) = rest else {
            // Not even the start of a value: `wait = ;`, `input = Vec<`.
            self.pos = end;
            if takes_type {
                let value = self.trees[from..end].iter().cloned().collect();
                self.push_invalid(
                    path,
                    eq_span,
                    value,
                    needs(&name, &shape).with_span(&first.span()),
                );
            } else {
                self.malformed(path, eq_span, needs(&name, &shape).with_span(&first.span()));
            }
            return format!("{name} = ...");
        };
        // The prefix is at least one token: `rest` is shorter than the value.
        let split = end.saturating_sub(rest.into_iter().count()).max(from + 1);
        let written = format!("{name} = {}", compact(&self.trees[from..split]));
        let extra = self.trees.get(split).filter(|_| split < end).cloned();
        match extra {
            // A value, then the next option with no comma between, or a `;`:
            // `after_item` says so and reads the next option.
            Some(tree) if is_punct(&tree, ';') || self.starts_option(split) => {
                self.complete(path, eq_span, from, split);
                self.pos = split;
            }
            Some(tree) => {
                self.pos = end;
                let error = Error::custom(format!(
                    "unexpected `{}` after the value of `{name}`; it takes one value, {}, e.g. `{}`",
                    show(&tree),
                    shape.needs,
                    shape.example
                ))
                .with_span(&span_open(&tree));
                self.malformed(path, eq_span, error);
            }
            None => {
                self.complete(path, eq_span, from, end);
                self.pos = end;
            }
        }
        written
    }

    /// `name = value` with the value `trees[from..to]`, which starts with a
    /// whole expression or type.
    fn complete(&mut self, path: syn::Path, eq_span: Span, from: usize, to: usize) {
        let tokens: TokenStream = self.trees[from..to].iter().cloned().collect();
        match syn::parse2::<Expr>(tokens.clone()) {
            Ok(Expr::Assign(assign)) => {
                let shape = self.place.shape(&path_text(&path));
                let error = Error::custom(format!(
                    "unexpected `=` in the value of `{}`; it takes one value, {}, e.g. `{}`",
                    path_text(&path),
                    shape.needs,
                    shape.example
                ))
                .with_span(&assign.eq_token);
                self.malformed(path, eq_span, error);
            }
            Ok(value) => self
                .items
                .push(NestedMeta::Meta(Meta::NameValue(syn::MetaNameValue {
                    path,
                    eq_token: Token![=](eq_span),
                    value,
                }))),
            // A type that is not an expression: `input = Vec<Order>`.
            Err(_) => {
                let shape = self.place.shape(&path_text(&path));
                let error = needs(&path_text(&path), &shape).with_span(&eq_span);
                self.push_invalid(path, eq_span, tokens, error);
            }
        }
    }

    /// Keeps `name = <malformed>` as an item with no value and our `error`:
    /// see the module's documentation.
    pub(super) fn malformed(&mut self, path: syn::Path, eq_span: Span, error: Error) {
        self.push_invalid(path, eq_span, TokenStream::new(), error);
    }

    fn push_invalid(&mut self, path: syn::Path, eq_span: Span, value: TokenStream, error: Error) {
        self.items
            .push(NestedMeta::NameValueInvalidExpr(MetaNameValueInvalidExpr {
                path,
                eq_token: Token![=](eq_span),
                value,
                error,
            }));
    }

    /// The value that starts at `at`, up to the next comma of the list, as
    /// the user would write it, for a message that gives it back; `None`
    /// when there is none.
    pub(super) fn value_text(&self, at: usize, takes_type: bool) -> Option<String> {
        let end = self.end_from(at, takes_type);
        echo_value(self.trees.get(at..end)?, takes_type)
    }

    /// The end of the value that starts at `self.pos`: the next comma of the
    /// list, or its end. A type's commas inside `<...>` are its own.
    pub(super) fn value_end(&self, takes_type: bool) -> usize {
        self.end_from(self.pos, takes_type)
    }

    fn end_from(&self, from: usize, takes_type: bool) -> usize {
        let mut depth = 0_usize;
        let mut previous: Option<&TokenTree> = None;
        for (at, tree) in self.trees.iter().enumerate().skip(from) {
            if let TokenTree::Punct(punct) = tree {
                match punct.as_char() {
                    ',' if depth == 0 => return at,
                    '<' if takes_type => depth += 1,
                    // `->` in `fn() -> T` closes nothing.
                    '>' if takes_type && !previous.is_some_and(|p| is_joint(p, '-')) => {
                        depth = depth.saturating_sub(1);
                    }
                    _ => {}
                }
            }
            previous = Some(tree);
        }
        self.trees.len()
    }
}

/// What is left of a value after its longest prefix that is an expression
/// (or, for a type option, a type); `None` when no prefix is.
fn prefix(tokens: TokenStream, takes_type: bool) -> Option<TokenStream> {
    if takes_type {
        let rest = (|input: ParseStream<'_>| {
            input.parse::<syn::Type>()?;
            input.parse::<TokenStream>()
        })
        .parse2(tokens.clone());
        if let Ok(rest) = rest {
            return Some(rest);
        }
    }
    (|input: ParseStream<'_>| {
        input.parse::<Expr>()?;
        input.parse::<TokenStream>()
    })
    .parse2(tokens)
    .ok()
}
