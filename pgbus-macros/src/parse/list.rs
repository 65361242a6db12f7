//! Our reader of an option list (`name = value, other(...)`): it walks the
//! tokens itself, splits them at the commas of the list, and sorts each item
//! into `name`, `name = value`, `name(...)` or a literal, the `NestedMeta`
//! items the rest of the parser reads. Every malformed item is reported in the
//! project's words, spanned at the token where it goes wrong (never at the
//! macro), and reading goes on with the next item, so one compile shows every
//! mistake of the list.
//!
//! A malformed value of a named option (`skip_if = ` with nothing after it) is
//! kept as an item whose value is empty and whose error is ours: the option's
//! value parser reports it when the option is known here, and `options::read`
//! reports the name instead when it is not, so each item gets one message.

use darling::Error;
use darling::ast::NestedMeta;
use darling::error::Accumulator;
use proc_macro2::{Delimiter, Group, Span, TokenStream, TokenTree};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Meta, Token};

use super::options::{Place, example};
use tokens::{echo_types, flatten, is_joint, is_punct, path_text, show, span_open};

pub(super) use tokens::echo_options;
pub(super) use types::read_types;

/// Reads the option list `tokens`, written at `place`, into its well-formed
/// items; every malformed one is reported into `errors`.
pub(super) fn read(tokens: TokenStream, place: Place, errors: &mut Accumulator) -> Vec<NestedMeta> {
    let mut reader = Reader {
        trees: flatten(tokens),
        pos: 0,
        place,
        errors,
        items: Vec::new(),
        gap: None,
    };
    reader.run();
    reader.items
}

struct Reader<'e> {
    trees: Vec<TokenTree>,
    pos: usize,
    place: Place,
    errors: &'e mut Accumulator,
    items: Vec<NestedMeta>,
    /// A separator found wrong between two items, reported once the item
    /// after it is read, so its message shows both as they should be written.
    gap: Option<Gap>,
}

/// A missing, doubled or wrong separator after the item written `before`.
struct Gap {
    /// The rule, e.g. "expected `,` between options".
    rule: &'static str,
    before: Option<String>,
    span: Span,
    /// Where the item after the gap starts.
    at: usize,
}

impl Reader<'_> {
    fn run(&mut self) {
        // How the last item was written, for a doubled comma after it.
        let mut before: Option<String> = None;
        while let Some(tree) = self.trees.get(self.pos) {
            if is_punct(tree, ',') {
                let span = tree.span();
                self.close_gap(None);
                if self.pos == 0 {
                    let message = format!(
                        "the {} options start with a `,`; remove it",
                        self.place.label()
                    );
                    self.error(message, span);
                } else {
                    self.gap = Some(Gap {
                        rule: "two `,` in a row; remove one",
                        before: before.clone(),
                        span,
                        at: self.pos + 1,
                    });
                }
                self.pos += 1;
                continue;
            }
            let written = self.item();
            self.close_gap(written.as_deref());
            if let Some(written) = &written {
                self.after_item(written);
            } else {
                self.skip_past_comma();
            }
            before = written;
        }
        self.close_gap(None);
    }

    /// Reports the pending gap, now that the item after it, written `after`,
    /// is read: "expected `,` between options: `wait = "5s", timeout = "1m"`".
    fn close_gap(&mut self, after: Option<&str>) {
        let Some(gap) = self.gap.take() else {
            return;
        };
        let after = after.map(str::to_owned).or_else(|| {
            self.starts_option(gap.at)
                .then(|| self.option_start(gap.at))
        });
        let message = match (&gap.before, after) {
            (Some(before), Some(after)) => format!("{}: `{before}, {after}`", gap.rule),
            _ => gap.rule.to_owned(),
        };
        self.error(message, gap.span);
    }

    /// Reads one item from `self.pos`; returns how it was written, for
    /// messages about what follows it, or `None` when it was reported and
    /// skipped.
    fn item(&mut self) -> Option<String> {
        let tree = self.trees[self.pos].clone();
        match &tree {
            TokenTree::Literal(literal) => self.literal(literal),
            TokenTree::Ident(_) => self.named(),
            TokenTree::Punct(punct) if punct.as_char() == ':' && self.is_path_sep(self.pos) => {
                self.named()
            }
            TokenTree::Punct(punct) if punct.as_char() == '=' => {
                self.error(
                    format!(
                        "`=` with no option name before it; write e.g. {}",
                        example(self.place)
                    ),
                    punct.span(),
                );
                None
            }
            TokenTree::Group(group) if group.delimiter() != Delimiter::None => {
                let fix = echo_options(&group.stream()).map_or_else(
                    || format!("e.g. {}", example(self.place)),
                    |inner| format!("write `{inner}`"),
                );
                self.error(
                    format!(
                        "expected an option name, found `{}`; {} options are written \
                         `name = value`, with no brackets around them; {fix}",
                        show(&tree),
                        self.place.label(),
                    ),
                    group.span_open(),
                );
                None
            }
            other => {
                self.error(
                    format!(
                        "expected an option name, found `{}`; {} options are written \
                         `name = value`, e.g. {}",
                        show(other),
                        self.place.label(),
                        example(self.place)
                    ),
                    span_open(other),
                );
                None
            }
        }
    }

    /// A literal: an item of its own (which `options::read` refuses with its
    /// message), or an option name written in quotes (`"wait" = "5s"`).
    fn literal(&mut self, literal: &proc_macro2::Literal) -> Option<String> {
        let lit = syn::Lit::new(literal.clone());
        if !self.is_punct_at(self.pos + 1, '=') {
            self.pos += 1;
            self.items.push(NestedMeta::Lit(lit));
            return Some(literal.to_string());
        }
        let text = match &lit {
            syn::Lit::Str(s) => s.value(),
            _ => String::new(),
        };
        let known = self.place.allowed().iter().find(|name| **name == text);
        let written = known.map_or_else(
            || example(self.place).to_owned(),
            |name| {
                let value = self.value_text(self.pos + 2, self.place.takes_type(name));
                format!("`{name} = {}`", value.as_deref().unwrap_or("..."))
            },
        );
        self.error(
            format!("option names are written without quotes: {written}"),
            literal.span(),
        );
        let ident = known.and_then(|name| {
            syn::ext::IdentExt::parse_any
                .parse_str(name)
                .ok()
                .map(|mut ident: syn::Ident| {
                    ident.set_span(literal.span());
                    ident
                })
        })?;
        self.pos += 1;
        Some(self.after_name(syn::Path::from(ident)))
    }

    /// An item that starts with a name: `name`, `name = value`, `name(...)`.
    fn named(&mut self) -> Option<String> {
        let path = self.path()?;
        let path = self.one_word(path);
        Some(self.after_name(path))
    }

    /// `name` or `a::b::name`; `None`, reported, when a `::` has no name after it.
    fn path(&mut self) -> Option<syn::Path> {
        let mut path = syn::Path {
            leading_colon: None,
            segments: Punctuated::new(),
        };
        if self.is_path_sep(self.pos) {
            path.leading_colon = Some(self.path_sep());
        }
        loop {
            match self.trees.get(self.pos) {
                Some(TokenTree::Ident(ident)) => {
                    path.segments
                        .push_value(syn::PathSegment::from(ident.clone()));
                    self.pos += 1;
                }
                other => {
                    let span = other
                        .or_else(|| self.trees.last())
                        .map_or_else(Span::call_site, span_open);
                    self.error(
                        "expected a name after `::`; option names are single words",
                        span,
                    );
                    return None;
                }
            }
            if !self.is_path_sep(self.pos) {
                return Some(path);
            }
            let sep = self.path_sep();
            path.segments.push_punct(sep);
        }
    }

    /// Consumes the two `:` of a `::` at `self.pos`.
    fn path_sep(&mut self) -> Token![::] {
        let first = self.trees[self.pos].span();
        let second = self.trees[self.pos + 1].span();
        self.pos += 2;
        Token![::]([first, second])
    }

    /// `self::wait`, `pgbus::wait`: an option of this place under a path is
    /// read as its last word, with an error; any other path is left for
    /// `options::read` to call unknown.
    fn one_word(&mut self, path: syn::Path) -> syn::Path {
        if path.get_ident().is_some() {
            return path;
        }
        let Some(last) = path.segments.last().map(|s| s.ident.clone()) else {
            return path;
        };
        let name = last.to_string();
        if !self.place.allowed().contains(&name.as_str()) {
            return path;
        }
        let written = quote::ToTokens::to_token_stream(&path)
            .to_string()
            .replace(' ', "");
        let span = path
            .leading_colon
            .map_or_else(|| path.segments[0].ident.span(), |colon| colon.spans[0]);
        let prefix = written.strip_suffix(name.as_str()).unwrap_or_default();
        self.error(
            format!("an option name is one word: write `{name}`, without `{prefix}`"),
            span,
        );
        syn::Path::from(last)
    }

    /// What follows an option's name: nothing, `= value`, `(...)`, or a
    /// mistake.
    fn after_name(&mut self, path: syn::Path) -> String {
        let name = path_text(&path);
        let Some(tree) = self.trees.get(self.pos).cloned() else {
            self.items.push(NestedMeta::Meta(Meta::Path(path)));
            return name;
        };
        match &tree {
            TokenTree::Punct(punct) if punct.as_char() == ',' => {
                self.items.push(NestedMeta::Meta(Meta::Path(path)));
                name
            }
            // `wait => "1s"`, as in a `match` arm.
            TokenTree::Punct(punct)
                if punct.as_char() == '='
                    && punct.spacing() == proc_macro2::Spacing::Joint
                    && self.is_punct_at(self.pos + 1, '>') =>
            {
                let shape = self.place.shape(&name);
                let written = match self.value_text(self.pos + 2, self.place.takes_type(&name)) {
                    Some(value) => format!("{name} = {value}"),
                    None if !shape.name.is_empty() => shape.example.to_owned(),
                    None => format!("{name} = ..."),
                };
                self.error(
                    format!("write `{written}` with `=`, not `=>`"),
                    punct.span(),
                );
                self.pos += 2;
                self.value(path, punct.span())
            }
            TokenTree::Punct(punct) if punct.as_char() == '=' => {
                self.pos += 1;
                self.value(path, punct.span())
            }
            TokenTree::Group(group) => self.list(path, group),
            TokenTree::Punct(punct) if punct.as_char() == ':' && !self.is_path_sep(self.pos) => {
                let shape = self.place.shape(&name);
                let written = match self.value_text(self.pos + 1, self.place.takes_type(&name)) {
                    Some(value) => format!("{name} = {value}"),
                    None if !shape.name.is_empty() => shape.example.to_owned(),
                    None => format!("{name} = ..."),
                };
                self.error(format!("write `{written}` with `=`, not `:`"), punct.span());
                self.pos += 1;
                self.value(path, punct.span())
            }
            TokenTree::Ident(_) if self.starts_option(self.pos) => {
                self.items.push(NestedMeta::Meta(Meta::Path(path)));
                name
            }
            TokenTree::Literal(_) | TokenTree::Ident(_) => {
                self.error(
                    format!(
                        "expected `=` between `{name}` and its value: `{name} = {}`",
                        show(&tree)
                    ),
                    tree.span(),
                );
                self.value(path, tree.span())
            }
            TokenTree::Punct(punct) => {
                let shape = self.place.shape(&name);
                let message = if shape.name.is_empty() {
                    format!(
                        "unexpected `{}` after `{name}`; options are written `name = value`, e.g. {}",
                        punct.as_char(),
                        example(self.place)
                    )
                } else {
                    format!(
                        "unexpected `{}` after `{name}`; write `{}`",
                        punct.as_char(),
                        shape.example
                    )
                };
                self.malformed(
                    path,
                    punct.span(),
                    Error::custom(message).with_span(&punct.span()),
                );
                self.skip_to_comma();
                name
            }
        }
    }

    /// `name(...)`, in parentheses; `[...]` and `{...}` are reported and read as
    /// if in parentheses, so the options inside are checked too.
    fn list(&mut self, path: syn::Path, group: &Group) -> String {
        let name = path_text(&path);
        if group.delimiter() != Delimiter::Parenthesis {
            let (open, close) = match group.delimiter() {
                Delimiter::Bracket => ('[', ']'),
                Delimiter::Brace => ('{', '}'),
                Delimiter::Parenthesis | Delimiter::None => ('(', ')'),
            };
            let inner = echo_options(&group.stream()).unwrap_or_else(|| "...".to_owned());
            self.error(
                format!("write `{name}({inner})` with parentheses, not `{name}{open}...{close}`"),
                group.span_open(),
            );
        }
        self.pos += 1;
        self.items.push(NestedMeta::Meta(Meta::List(syn::MetaList {
            path,
            delimiter: syn::MacroDelimiter::Paren(syn::token::Paren(group.delim_span())),
            tokens: group.stream(),
        })));
        // `matching(...)` holds types, not options: given back as written.
        let inner = if name == "matching" {
            echo_types(&group.stream())
        } else {
            echo_options(&group.stream())
        };
        let written = format!("{name}({})", inner.as_deref().unwrap_or("..."));
        if let Some(tree) = self.trees.get(self.pos).filter(|tree| is_punct(tree, '=')) {
            let span = tree.span();
            let message = match self.value_text(self.pos + 1, false) {
                Some(value) => format!(
                    "`{name}(...)` takes no `= value` after it; remove `= {value}`, or write \
                     `{name} = {value}` instead of the list"
                ),
                None => format!("`{name}(...)` takes no `= value` after it; remove the `=`"),
            };
            self.error(message, span);
            self.skip_to_comma();
        }
        written
    }

    /// After an item: the end, a comma, or a mistake.
    fn after_item(&mut self, written: &str) {
        let Some(tree) = self.trees.get(self.pos).cloned() else {
            return;
        };
        if is_punct(&tree, ',') {
            self.pos += 1;
        } else if is_punct(&tree, ';') {
            self.pos += 1;
            self.gap = Some(Gap {
                rule: "options are separated by `,`, not `;`",
                before: Some(written.to_owned()),
                span: tree.span(),
                at: self.pos,
            });
        } else if self.starts_option(self.pos) {
            self.gap = Some(Gap {
                rule: "expected `,` between options",
                before: Some(written.to_owned()),
                span: tree.span(),
                at: self.pos,
            });
        } else {
            self.error(
                format!(
                    "unexpected `{}` after `{written}`; options are separated by `,`",
                    show(&tree)
                ),
                span_open(&tree),
            );
            self.skip_past_comma();
        }
    }

    /// Whether the tokens at `at` start an option: a name followed by `=` or
    /// `(...)`, or a name of this place alone.
    fn starts_option(&self, at: usize) -> bool {
        let Some(TokenTree::Ident(ident)) = self.trees.get(at) else {
            return false;
        };
        match self.trees.get(at + 1) {
            Some(TokenTree::Punct(punct)) if punct.as_char() == '=' => true,
            Some(TokenTree::Group(group)) => group.delimiter() != Delimiter::None,
            None => self.is_known(ident),
            Some(tree) if is_punct(tree, ',') || is_punct(tree, ';') => self.is_known(ident),
            Some(_) => false,
        }
    }

    fn is_known(&self, ident: &proc_macro2::Ident) -> bool {
        let name = ident.to_string();
        self.place.allowed().contains(&name.as_str())
    }

    /// How the option at `at` starts, for a message when it cannot be read
    /// whole: `timeout = ...`, `on_exception(...)`, `skip_if`.
    fn option_start(&self, at: usize) -> String {
        let name = self.trees[at].to_string();
        match self.trees.get(at + 1) {
            Some(TokenTree::Group(_)) => format!("{name}(...)"),
            Some(tree) if is_punct(tree, '=') => format!("{name} = ..."),
            _ => name,
        }
    }

    fn skip_to_comma(&mut self) {
        while let Some(tree) = self.trees.get(self.pos) {
            if is_punct(tree, ',') {
                return;
            }
            self.pos += 1;
        }
    }

    fn skip_past_comma(&mut self) {
        self.skip_to_comma();
        if self.pos < self.trees.len() {
            self.pos += 1;
        }
    }

    fn is_punct_at(&self, at: usize, c: char) -> bool {
        self.trees.get(at).is_some_and(|tree| is_punct(tree, c))
    }

    /// A `::` at `at`: a joint `:` and a `:`.
    fn is_path_sep(&self, at: usize) -> bool {
        self.trees.get(at).is_some_and(|tree| is_joint(tree, ':')) && self.is_punct_at(at + 1, ':')
    }

    fn error(&mut self, message: impl std::fmt::Display, span: Span) {
        self.errors.push(Error::custom(message).with_span(&span));
    }
}

mod tokens;
mod types;
mod value;

#[cfg(test)]
mod tests;
