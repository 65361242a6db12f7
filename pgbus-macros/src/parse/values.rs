//! Option values: darling `FromMeta` newtypes that keep the span of the literal,
//! so a bad value is reported on the value itself.

use darling::{Error, FromMeta, Result};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, Lit, UnOp};

/// A string literal: names, queues, signal names.
#[derive(Debug, Clone)]
pub(crate) struct Text {
    pub(crate) value: String,
    pub(crate) span: Span,
}

impl FromMeta for Text {
    fn from_list(_items: &[darling::ast::NestedMeta]) -> Result<Self> {
        Err(value_in_parentheses())
    }

    fn from_word() -> Result<Self> {
        Err(Error::custom(
            "this option needs a value in quotes: `= \"...\"`",
        ))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        match strip_group(expr) {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => Ok(Self {
                value: s.value(),
                span: s.span(),
            }),
            other => Err(
                Error::custom("expected a string literal in quotes: `\"...\"`").with_span(other),
            ),
        }
    }
}

/// Which type option a [`TypeArg`] is: the name and the examples its
/// messages give.
pub(crate) trait TypeOption {
    /// The option's name, e.g. `input`.
    const NAME: &'static str;
    /// A plain type to write, e.g. `Order`.
    const PLAIN: &'static str;
    /// A type that is not a valid expression, e.g. `Vec<Order>`.
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
        syn::parse2(tokens)
            .map(|ty| Self(ty, std::marker::PhantomData))
            .map_err(|_| {
                Error::custom(format!(
                    "`{name}` is not a valid type; write e.g. `{name} = {plain}` or `{name} = \"{generic}\"`",
                    name = K::NAME,
                    plain = K::PLAIN,
                    generic = K::GENERIC,
                ))
                .with_span(&span)
            })
    }
}

impl<K: TypeOption> FromMeta for TypeArg<K> {
    fn from_list(_items: &[darling::ast::NestedMeta]) -> Result<Self> {
        Err(value_in_parentheses())
    }

    fn from_word() -> Result<Self> {
        Err(Error::custom(format!(
            "`{name}` needs a type, e.g. `{name} = {plain}`",
            name = K::NAME,
            plain = K::PLAIN,
        )))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        match strip_group(expr) {
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

    fn from_invalid_expr(value: &darling::ast::MetaNameValueInvalidExpr) -> Result<Self> {
        let span = value
            .value
            .clone()
            .into_iter()
            .next()
            .map_or_else(|| value.path.span(), |t| t.span());
        Self::parse(value.value.clone(), span)
    }
}

/// A duration string in the shared grammar, normalized to milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DurationMs {
    pub(crate) ms: u64,
    pub(crate) span: Span,
}

impl FromMeta for DurationMs {
    fn from_list(_items: &[darling::ast::NestedMeta]) -> Result<Self> {
        Err(value_in_parentheses())
    }

    fn from_word() -> Result<Self> {
        Err(Error::custom("expected a duration, e.g. `= \"5s\"`"))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        let expr = strip_group(expr);
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) = expr
        else {
            return Err(Error::custom(
                "expected a duration string with a unit, e.g. `\"5s\"`, `\"250ms\"` or `\"1h30m\"`",
            )
            .with_span(expr));
        };
        pgbus_core::parse_duration_ms(&s.value())
            .map(|ms| Self { ms, span: s.span() })
            .map_err(|e| Error::custom(format!("invalid duration: {e}")).with_span(s))
    }
}

/// An integer literal, possibly negative, kept wide so range errors can name the
/// range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Int {
    pub(crate) value: i128,
    pub(crate) span: Span,
}

impl FromMeta for Int {
    fn from_list(_items: &[darling::ast::NestedMeta]) -> Result<Self> {
        Err(value_in_parentheses())
    }

    fn from_word() -> Result<Self> {
        Err(Error::custom("expected an integer, e.g. `= 5`"))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        let expr = strip_group(expr);
        let (negative, inner) = match expr {
            Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => {
                (true, strip_group(&unary.expr))
            }
            other => (false, other),
        };
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Int(int), ..
        }) = inner
        else {
            return Err(Error::custom("expected an integer literal, e.g. `5`").with_span(expr));
        };
        if !int.suffix().is_empty() {
            return Err(Error::custom(format!(
                "write the number without a type suffix: `{}`",
                int.base10_digits()
            ))
            .with_span(int));
        }
        let magnitude = int
            .base10_parse::<i128>()
            .map_err(|_| {
                Error::custom("integer literal is out of range: `priority` fits `i16`, `max_reattempts` fits `u32`")
                    .with_span(int)
            })?;
        Ok(Self {
            value: if negative { -magnitude } else { magnitude },
            span: int.span(),
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
    fn example() -> &'static str;
    /// A message for a word that is valid elsewhere but not here.
    fn explain(_error: &pgbus_core::UnknownWord) -> Option<String> {
        None
    }
}

macro_rules! vocabulary {
    ($($ty:ident => $example:literal),* $(,)?) => {$(
        impl Vocabulary for pgbus_core::$ty {
            fn parse_word(word: &str) -> std::result::Result<Self, pgbus_core::UnknownWord> {
                Self::parse(word)
            }
            fn example() -> &'static str {
                $example
            }
        }
    )*};
}

vocabulary! {
    ExceptionAction => "\"pause\"",
    Report => "\"always\"",
    OnTimeout => "\"pause\"",
}

impl Vocabulary for pgbus_core::FailureAction {
    fn parse_word(word: &str) -> std::result::Result<Self, pgbus_core::UnknownWord> {
        Self::parse(word)
    }

    fn example() -> &'static str {
        "\"pause\""
    }

    fn explain(error: &pgbus_core::UnknownWord) -> Option<String> {
        (error.found == "reattempt").then(|| {
            "`reattempt` is not allowed here: this is what happens when reattempts run out \
             (or when a batch fails); use `pause`, `cancel` or `skip`"
                .to_owned()
        })
    }
}

impl<T: Vocabulary> FromMeta for Word<T> {
    fn from_list(_items: &[darling::ast::NestedMeta]) -> Result<Self> {
        Err(value_in_parentheses())
    }

    fn from_word() -> Result<Self> {
        Err(Error::custom(format!(
            "expected a value, e.g. `= {}`",
            T::example()
        )))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        let expr = strip_group(expr);
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) = expr
        else {
            return Err(Error::custom(format!(
                "expected a string literal, e.g. `{}`",
                T::example()
            ))
            .with_span(expr));
        };
        T::parse_word(&s.value())
            .map(|value| Self {
                value,
                span: s.span(),
            })
            .map_err(|e| {
                Error::custom(T::explain(&e).unwrap_or_else(|| e.to_string())).with_span(s)
            })
    }
}

/// A path to a method of the workflow (`cancel_if = Self::is_void`, or a bare
/// `is_void`), or to an error type in `matching(...)`.
#[derive(Debug, Clone)]
pub(crate) struct PathArg(pub(crate) syn::Path);

impl FromMeta for PathArg {
    fn from_list(_items: &[darling::ast::NestedMeta]) -> Result<Self> {
        Err(value_in_parentheses())
    }

    fn from_word() -> Result<Self> {
        Err(Error::custom(
            "expected a method, e.g. `= Self::is_cancelled`",
        ))
    }

    fn from_expr(expr: &Expr) -> Result<Self> {
        match strip_group(expr) {
            Expr::Path(path) if path.qself.is_none() => Ok(Self(path.path.clone())),
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) => s.parse::<syn::Path>().map(Self).map_err(|_| {
                Error::custom("expected a path to a method, e.g. `Self::is_cancelled`").with_span(s)
            }),
            other => Err(
                Error::custom("expected a path to a method, e.g. `Self::is_cancelled`")
                    .with_span(other),
            ),
        }
    }
}

/// `matching(T1, T2)`: error types, any Rust type (`CardDeclined`,
/// `std::io::Error`, `my::Error<u8>`); whether each is an error is checked by the
/// compiler at the type.
#[derive(Debug, Clone)]
pub(crate) struct Matching(pub(crate) Vec<syn::Type>);

impl FromMeta for Matching {
    fn from_meta(item: &syn::Meta) -> Result<Self> {
        let syn::Meta::List(list) = item else {
            return Err(Error::custom(
                "write error types in parentheses, e.g. `matching(CardDeclined, Timeout)`",
            )
            .with_span(item));
        };
        let types = list
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Type, syn::Token![,]>::parse_terminated,
            )
            .map_err(|e| {
                Error::custom("expected error types, e.g. `matching(CardDeclined, std::io::Error)`")
                    .with_span(&e.span())
            })?;
        if types.is_empty() {
            return Err(Error::custom(
                "`matching()` names no error type; list at least one, or leave `matching` out to match every error",
            )
            .with_span(&list.path));
        }
        let mut errors = Error::accumulator();
        let mut seen: Vec<String> = Vec::new();
        for ty in &types {
            let text = quote::ToTokens::to_token_stream(ty).to_string();
            if seen.contains(&text) {
                errors.push(
                    Error::custom("this error type is already listed; give it once").with_span(ty),
                );
            }
            seen.push(text);
        }
        errors.finish_with(Self(types.into_iter().collect()))
    }

    fn from_nested_meta(item: &darling::ast::NestedMeta) -> Result<Self> {
        match item {
            darling::ast::NestedMeta::Meta(meta) => Self::from_meta(meta),
            other => Err(Error::custom(
                "write error types in parentheses, e.g. `matching(CardDeclined, Timeout)`",
            )
            .with_span(other)),
        }
    }
}

/// `option(value)` where `option = value` was meant.
pub(super) fn value_in_parentheses() -> Error {
    Error::custom(
        "write this option as `option = value`; parentheses are only for `on_exception(...)`, \
         `wait_for(...)` and `matching(...)`",
    )
}

pub(super) fn strip_group(expr: &Expr) -> &Expr {
    match expr {
        Expr::Group(group) => strip_group(&group.expr),
        other => other,
    }
}
