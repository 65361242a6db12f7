//! Option values: newtypes read by [`FromOption`], which keep the span of the
//! literal, so a bad value is reported on the value itself, and whose messages
//! name the option and the shape its place expects.

use darling::ast::NestedMeta;
use darling::{Error, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, Lit, Meta, UnOp};

use super::options::{FromOption, OptionItem};

/// A string literal: names, queues, signal names.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub(crate) value: String,
    pub(crate) span: Span,
}

impl FromOption for Text {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        match option.expr()? {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(Self {
                value: s.value(),
                span: s.span(),
            }),
            other => Err(unquoted(option, other, |_| true)),
        }
    }
}

/// A value that is not a string where one is needed: a bare word the option
/// takes gets the same word back in quotes, anything else the option's shape.
fn unquoted(option: &OptionItem<'_>, expr: &Expr, takes: impl Fn(&str) -> bool) -> Error {
    match bare_word(expr).filter(|word| takes(word)) {
        // `name = NAME`: a constant's name in quotes would be the wrong value.
        Some(word) if reads_as_constant(&word) => Error::custom(format!(
            "`{name}` needs {needs}: a macro reads the attribute's tokens, not the value of the \
             constant `{word}`; write that value itself, e.g. `{example}`",
            name = option.name,
            needs = option.shape().needs,
            example = option.shape().example,
        )),
        Some(word) => Error::custom(format!(
            "`{name}` needs {needs}: write `{name} = \"{word}\"`",
            name = option.name,
            needs = option.shape().needs,
        )),
        None => option.needs(),
    }
    .with_span(expr)
}

/// Whether a bare word is written as Rust writes a constant (`ORDERS_QUEUE`).
fn reads_as_constant(word: &str) -> bool {
    word.chars().any(|c| c.is_ascii_uppercase()) && !word.chars().any(char::is_lowercase)
}

/// The identifier of a path expression of one segment (`payments`).
fn bare_word(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Path(path) if path.qself.is_none() => path
            .path
            .get_ident()
            .map(|ident| syn::ext::IdentExt::unraw(ident).to_string()),
        _ => None,
    }
}

/// Which type option a [`TypeArg`] is: the name and the examples its
/// messages give.
pub(crate) trait TypeOption {
    /// The option's name, e.g. `input`.
    const NAME: &'static str;
    /// A plain type to write, e.g. `Order`.
    const PLAIN: &'static str;
    /// A generic type, e.g. `Vec<Order>`.
    const GENERIC: &'static str;
}

/// `input = T`: the run's input type.
#[derive(Debug, Clone)]
pub(crate) struct Input;

impl TypeOption for Input {
    const NAME: &'static str = "input";
    const PLAIN: &'static str = "Order";
    const GENERIC: &'static str = "Vec<Order>";
}

/// `output = R`: the run's result type.
#[derive(Debug, Clone)]
pub(crate) struct Output;

impl TypeOption for Output {
    const NAME: &'static str = "output";
    const PLAIN: &'static str = "Receipt";
    const GENERIC: &'static str = "Vec<Receipt>";
}

/// A workflow's type option (`input`, `output`): written as a type
/// (`input = Order`, `input = Vec<Order>`) or as a string holding one
/// (`input = "Vec<Order>"`).
#[derive(Debug, Clone)]
pub(crate) struct TypeArg<K>(pub(crate) syn::Type, std::marker::PhantomData<K>);

/// The workflow's `input` type.
pub(crate) type InputType = TypeArg<Input>;
/// The workflow's `output` type.
pub(crate) type OutputType = TypeArg<Output>;

impl<K: TypeOption> TypeArg<K> {
    fn parse(tokens: proc_macro2::TokenStream, span: Span) -> Result<Self> {
        let ty: syn::Type = syn::parse2(tokens).map_err(|_| {
            Error::custom(format!(
                "`{name}` is not a valid type; write e.g. `{name} = {plain}` or `{name} = \"{generic}\"`",
                name = K::NAME,
                plain = K::PLAIN,
                generic = K::GENERIC,
            ))
            .with_span(&span)
        })?;
        if let Some((at, what)) = not_nameable(&ty) {
            return Err(Error::custom(format!(
                "`{name}` needs a named type the run stores as JSON, and {what} names none; \
                 write the type itself, e.g. `{name} = {plain}`",
                name = K::NAME,
                plain = K::PLAIN,
            ))
            .with_span(&at));
        }
        Ok(Self(ty, std::marker::PhantomData))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        match expr {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => {
                let tokens = s.parse::<proc_macro2::TokenStream>().map_err(|_| {
                    Error::custom(format!(
                        "`{name}` is not a valid type; write e.g. `{name} = \"{generic}\"`",
                        name = K::NAME,
                        generic = K::GENERIC,
                    ))
                    .with_span(s)
                })?;
                Self::parse(crate::span::respan(tokens, s.span()), s.span())
            }
            other => Self::parse(quote::ToTokens::to_token_stream(other), other.span()),
        }
    }
}

/// Where `ty` holds something an associated type cannot be (an `impl
/// Trait` or a `_`), with how to say it: what rustc would otherwise report
/// inside the expansion, at the `#[workflow]` attribute.
fn not_nameable(ty: &syn::Type) -> Option<(Span, &'static str)> {
    use syn::Type;
    match ty {
        Type::ImplTrait(part) => Some((part.span(), "`impl Trait`")),
        Type::Infer(part) => Some((part.span(), "`_`")),
        Type::Path(path) => path.path.segments.iter().find_map(|segment| {
            let syn::PathArguments::AngleBracketed(args) = &segment.arguments else {
                return None;
            };
            args.args.iter().find_map(|arg| match arg {
                syn::GenericArgument::Type(inner) => not_nameable(inner),
                _ => None,
            })
        }),
        Type::Reference(reference) => not_nameable(&reference.elem),
        Type::Slice(slice) => not_nameable(&slice.elem),
        Type::Array(array) => not_nameable(&array.elem),
        Type::Paren(paren) => not_nameable(&paren.elem),
        Type::Group(group) => not_nameable(&group.elem),
        Type::Tuple(tuple) => tuple.elems.iter().find_map(not_nameable),
        _ => None,
    }
}

impl<K: TypeOption> FromOption for TypeArg<K> {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        match option.item {
            // A type that is not an expression (`Vec<Order>`), kept as the
            // list reader found it; an empty value is a malformed one.
            NestedMeta::NameValueInvalidExpr(invalid) if !invalid.value.is_empty() => {
                let span = invalid
                    .value
                    .clone()
                    .into_iter()
                    .next()
                    .map_or_else(|| invalid.path.span(), |t| t.span());
                Self::parse(invalid.value.clone(), span)
            }
            _ => Self::from_expr(option.expr()?),
        }
    }
}

/// A duration string in the shared grammar, normalized to milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DurationMs {
    pub(crate) ms: u64,
    pub(crate) span: Span,
}

impl FromOption for DurationMs {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        let name = &option.name;
        let expr = option.expr()?;
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) = expr
        else {
            let written = match expr {
                Expr::Lit(syn::ExprLit {
                    lit: Lit::Int(int), ..
                }) => format!(
                    "`{name} = \"{n}s\"` or `{name} = \"{n}ms\"`",
                    n = int.base10_digits()
                ),
                _ => format!("`{name} = \"5s\"`, `\"250ms\"` or `\"1h30m\"`"),
            };
            return Err(Error::custom(format!(
                "`{name}` needs a duration in quotes with a unit, e.g. {written}"
            ))
            .with_span(expr));
        };
        pgbus_core::parse_duration_ms(&s.value())
            .map(|ms| Self { ms, span: s.span() })
            .map_err(|e| Error::custom(format!("invalid `{name}`: {e}")).with_span(s))
    }
}

/// An integer literal, possibly negative, kept wide so range errors can name the
/// range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Int {
    pub(crate) value: i128,
    pub(crate) span: Span,
}

impl FromOption for Int {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        let name = &option.name;
        let expr = option.expr()?;
        let (negative, inner) = match expr {
            Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => {
                (true, strip_group(&unary.expr))
            }
            other => (false, other),
        };
        let int = match inner {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(int), ..
            }) => int,
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) if s.value().trim().parse::<i128>().is_ok() => {
                return Err(Error::custom(format!(
                    "write the number without quotes: `{name} = {}`",
                    s.value().trim()
                ))
                .with_span(s));
            }
            _ => return Err(option.needs().with_span(expr)),
        };
        if !int.suffix().is_empty() {
            return Err(Error::custom(format!(
                "write the number without a type suffix: `{name} = {}`",
                int.base10_digits()
            ))
            .with_span(int));
        }
        let magnitude = int.base10_parse::<i128>().map_err(|_| {
            Error::custom(format!(
                "`{name}` needs {}; `{}` is far out of range",
                option.shape().needs,
                int.base10_digits()
            ))
            .with_span(int)
        })?;
        Ok(Self {
            value: if negative { -magnitude } else { magnitude },
            // `-1`: the range errors point at the sign and the number.
            span: if negative { expr.span() } else { int.span() },
        })
    }
}

/// A word from one of the DSL's vocabularies, as a string literal.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Word<T> {
    pub(crate) value: T,
    pub(crate) span: Span,
}

/// The vocabularies a [`Word`] can hold.
pub(crate) trait Vocabulary: Sized {
    fn parse_word(word: &str) -> std::result::Result<Self, pgbus_core::UnknownWord>;
    /// A message for a word that is valid elsewhere but not here, or that
    /// needs more than the list of allowed words; `name` is the option.
    fn explain(_name: &str, _error: &pgbus_core::UnknownWord) -> Option<String> {
        None
    }
}

macro_rules! vocabulary {
    ($($ty:ident),* $(,)?) => {$(
        impl Vocabulary for pgbus_core::$ty {
            fn parse_word(word: &str) -> std::result::Result<Self, pgbus_core::UnknownWord> {
                Self::parse(word)
            }
        }
    )*};
}

vocabulary! { ExceptionAction, Report, OnTimeout }

impl Vocabulary for pgbus_core::FailureAction {
    fn parse_word(word: &str) -> std::result::Result<Self, pgbus_core::UnknownWord> {
        Self::parse(word)
    }

    fn explain(name: &str, error: &pgbus_core::UnknownWord) -> Option<String> {
        (error.found == "reattempt").then(|| {
            format!(
                "`reattempt` is not allowed for `{name}`: this is what happens when reattempts \
                 run out (or when a batch fails); use `pause`, `cancel` or `skip`"
            )
        })
    }
}

/// "unknown `action` value `retry`; expected ...; did you mean ...?".
fn unknown_word(name: &str, error: &pgbus_core::UnknownWord) -> String {
    let note = error
        .note
        .map(|note| format!("; {note}"))
        .unwrap_or_default();
    let suggestion = error
        .suggestion
        .map(|word| format!("; did you mean `{word}`?"))
        .unwrap_or_default();
    format!(
        "unknown `{name}` value `{}`; expected {}{note}{suggestion}",
        error.found,
        pgbus_core::backticked(error.allowed)
    )
}

impl<T: Vocabulary> FromOption for Word<T> {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        let expr = option.expr()?;
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) = expr
        else {
            return Err(unquoted(option, expr, |word| T::parse_word(word).is_ok()));
        };
        T::parse_word(&s.value())
            .map(|value| Self {
                value,
                span: s.span(),
            })
            .map_err(|e| {
                let message =
                    T::explain(&option.name, &e).unwrap_or_else(|| unknown_word(&option.name, &e));
                Error::custom(message).with_span(s)
            })
    }
}

/// A path to a method of the workflow (`cancel_if = Self::is_void`, or a bare
/// `is_void`), or to the runtime crate (`crate = "pgbus"`).
#[derive(Debug, Clone)]
pub(crate) struct PathArg(pub(crate) syn::Path);

impl FromOption for PathArg {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        match option.expr()? {
            Expr::Path(path) if path.qself.is_none() => Ok(Self(path.path.clone())),
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => s
                .parse::<syn::Path>()
                .map(Self)
                .map_err(|_| option.needs().with_span(s)),
            other => Err(option.needs().with_span(other)),
        }
    }
}

/// `matching(T1, T2)`: error types, any Rust type (`CardDeclined`,
/// `std::io::Error`, `my::Error<u8>`); whether each is an error is checked by the
/// compiler at the type.
#[derive(Debug, Clone)]
pub(crate) struct Matching(pub(crate) Vec<syn::Type>);

impl FromOption for Matching {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        let list = match option.item {
            NestedMeta::Meta(Meta::List(list)) => list,
            NestedMeta::NameValueInvalidExpr(invalid) => {
                return Err(invalid.error.clone().with_span(&invalid.eq_token));
            }
            other => {
                return Err(Error::custom(
                    "write error types in parentheses, e.g. `matching(CardDeclined, Timeout)`",
                )
                .with_span(other));
            }
        };
        let mut errors_of_list = Error::accumulator();
        let (types, reported) = super::nested(&mut errors_of_list, |errors| {
            super::list::read_types(list.tokens.clone(), errors)
        });
        let mut errors = errors_of_list;
        if types.is_empty() && !reported {
            errors.push(
                Error::custom(
                    "`matching()` names no error type; list at least one, or leave `matching` out to match every error",
                )
                .with_span(&list.path),
            );
        }
        // The list with every reference dropped: the fix of a `&E` below.
        let owned: Vec<String> = types
            .iter()
            .map(|ty| match ty {
                syn::Type::Reference(reference) => crate::render::code(&reference.elem),
                other => crate::render::code(other),
            })
            .collect();
        let mut seen: Vec<String> = Vec::new();
        for ty in &types {
            let text = quote::ToTokens::to_token_stream(ty).to_string();
            if seen.contains(&text) {
                errors.push(
                    Error::custom("this error type is already listed; give it once").with_span(ty),
                );
            }
            seen.push(text);
            // `error.is::<&E>()` is never true: a step's error is owned, so a
            // policy of `&E` would compile and never match.
            if let syn::Type::Reference(reference) = ty {
                errors.push(
                    Error::custom(format!(
                        "`matching` takes the error type itself, not a reference: a step's error \
                         is owned, so `{}` never matches; write `matching({})`",
                        crate::render::code(ty),
                        owned.join(", ")
                    ))
                    .with_span(&reference.and_token),
                );
            }
        }
        errors.finish_with(Self(types))
    }
}

pub(super) fn strip_group(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(group) => strip_group(&group.expr),
        other => other,
    }
}
