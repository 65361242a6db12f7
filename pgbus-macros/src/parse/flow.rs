//! Flow control: `concurrency`, `key`, `key_concurrency`, `slot`,
//! `rate_limit`, `key_rate_limit`, `deadline` and `on_deadline` of
//! `#[workflow(...)]`, and `rate_limit` of a step. The values are read here,
//! each error naming its option and spanned at the value; the rules across
//! options are in `validate::flow`, the `key` method's shape in `key`.

use darling::error::Accumulator;
use darling::{Error, Result};
use pgbus_core::flow::{MAX_CONCURRENCY, Rate};
use pgbus_core::{DeadlineAction, SlotHolder, UnknownWord, did_you_mean};
use syn::{Expr, Lit, UnOp};

use super::options::{FromOption, OptionItem};
use super::values::{DurationMs, PathArg, Vocabulary, Word};

/// The flow control options of `#[workflow(...)]`, before validation.
#[derive(Default)]
pub(crate) struct RawFlow {
    pub(crate) concurrency: Option<Limit>,
    pub(crate) key: Option<PathArg>,
    pub(crate) key_concurrency: Option<Limit>,
    pub(crate) slot: Option<Word<SlotHolder>>,
    pub(crate) rate_limit: Option<RateArg>,
    pub(crate) key_rate_limit: Option<RateArg>,
    pub(crate) deadline: Option<DurationMs>,
    pub(crate) on_deadline: Option<Word<DeadlineAction>>,
    /// Every flow option written, valid or not: a rule about a missing option
    /// stays quiet when it was written and already reported as bad.
    pub(crate) written: Vec<String>,
}

impl RawFlow {
    /// Whether the option was written at all, valid or not.
    pub(crate) fn wrote(&self, option: &str) -> bool {
        self.written.iter().any(|written| written == option)
    }
}

/// Reads `option` into `flow` when it is a flow option; says whether it was.
pub(super) fn workflow_option(
    flow: &mut RawFlow,
    option: &OptionItem<'_>,
    errors: &mut Accumulator,
) -> bool {
    match option.name.as_str() {
        "concurrency" => flow.concurrency = option.parse(errors),
        "key" => flow.key = option.parse(errors),
        "key_concurrency" => flow.key_concurrency = option.parse(errors),
        "slot" => flow.slot = option.parse(errors),
        "rate_limit" => flow.rate_limit = option.parse(errors),
        "key_rate_limit" => flow.key_rate_limit = option.parse(errors),
        "deadline" => flow.deadline = option.parse(errors),
        "on_deadline" => flow.on_deadline = option.parse(errors),
        _ => return false,
    }
    flow.written.push(option.name.clone());
    true
}

/// A concurrency limit: an integer literal from 1 to [`MAX_CONCURRENCY`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limit {
    pub(crate) value: u32,
}

impl FromOption for Limit {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        let name = option.name.as_str();
        let expr = option.expr()?;
        let shape = || {
            Error::custom(format!(
                "`{name}` takes a whole number of slots from 1 to {MAX_CONCURRENCY}, e.g. `{name} = 10`"
            ))
            .with_span(expr)
        };
        let int = match expr {
            Expr::Lit(syn::ExprLit {
                lit: Lit::Int(int), ..
            }) => int,
            Expr::Lit(syn::ExprLit {
                lit: Lit::Str(s), ..
            }) if s.value().parse::<u64>().is_ok() => {
                return Err(Error::custom(format!(
                    "write the number without quotes: `{name} = {}`",
                    s.value()
                ))
                .with_span(s));
            }
            Expr::Unary(unary) if matches!(unary.op, UnOp::Neg(_)) => {
                return Err(negative(name).with_span(expr));
            }
            _ => return Err(shape()),
        };
        if int.base10_digits().starts_with('-') {
            return Err(negative(name).with_span(int));
        }
        if !int.suffix().is_empty() {
            return Err(Error::custom(format!(
                "write the number without a type suffix: `{name} = {}`",
                int.base10_digits()
            ))
            .with_span(int));
        }
        // Past `u128` it is too large all the same: the rule names the bound.
        let value = int.base10_parse::<i128>().unwrap_or(i128::MAX);
        let value = pgbus_core::rules::check_concurrency(name, value)
            .map_err(|message| Error::custom(message).with_span(int))?;
        Ok(Self { value })
    }
}

fn negative(name: &str) -> Error {
    Error::custom(format!(
        "`{name}` cannot be negative: it takes a whole number of slots from 1 to \
         {MAX_CONCURRENCY}, or leave it out for no limit"
    ))
}

/// A rate, `"<count>/<period>"`, read by [`pgbus_core::parse_rate`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct RateArg {
    pub(crate) rate: Rate,
}

impl FromOption for RateArg {
    fn from_option(option: &OptionItem<'_>) -> Result<Self> {
        let name = option.name.as_str();
        let expr = option.expr()?;
        let Expr::Lit(syn::ExprLit {
            lit: Lit::Str(s), ..
        }) = expr
        else {
            return Err(Error::custom(format!(
                "`{name}` is a rate in quotes, `\"<count>/<period>\"`, e.g. `{name} = \"10/1s\"` \
                 (at most 10 step starts in any second)"
            ))
            .with_span(expr));
        };
        pgbus_core::parse_rate(&s.value())
            .map(|rate| Self { rate })
            .map_err(|e| Error::custom(format!("invalid `{name}`: {e}")).with_span(s))
    }
}

impl Vocabulary for SlotHolder {
    fn parse_word(word: &str) -> std::result::Result<Self, UnknownWord> {
        Self::parse(word).ok_or_else(|| unknown(word, Self::ALL))
    }

    fn explain(_name: &str, error: &UnknownWord) -> Option<String> {
        Some(format!(
            "unknown `slot` value `{}`; expected `step` (a slot is held while a step of the run \
             is in progress, the default) or `run` (held from the run's first step to its end){}",
            error.found,
            suggestion(error)
        ))
    }
}

impl Vocabulary for DeadlineAction {
    fn parse_word(word: &str) -> std::result::Result<Self, UnknownWord> {
        Self::parse(word).ok_or_else(|| unknown(word, Self::ALL))
    }

    fn explain(_name: &str, error: &UnknownWord) -> Option<String> {
        Some(format!(
            "unknown `on_deadline` value `{}`; expected `cancel` (the default) or `pause`: \
             what a run past its deadline becomes{}",
            error.found,
            suggestion(error)
        ))
    }
}

fn unknown(word: &str, allowed: &'static [&'static str]) -> UnknownWord {
    UnknownWord {
        found: word.to_owned(),
        allowed,
        suggestion: did_you_mean(word, allowed),
        note: None,
    }
}

fn suggestion(error: &UnknownWord) -> String {
    error
        .suggestion
        .map(|word| format!("; did you mean `{word}`?"))
        .unwrap_or_default()
}
