//! `on_exception(...)`: inside a step's options, or as its own attribute on the
//! impl.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::ExceptionAction;
use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::{Attribute, Meta};

use super::options::{self, OptionItem, Place};
use super::step::parenthesized;
use super::values::{Matching, Word};
use super::{RawPolicy, list, nested};

/// `on_exception(...)` or the shorthand `on_exception = "reattempt"` inside an
/// option list.
pub(super) fn policy(option: &OptionItem<'_>, errors: &mut Accumulator) -> Option<RawPolicy> {
    let span = option.name_span();
    match option.list() {
        Some(list) => Some(policy_options(span, list.tokens.clone(), errors)),
        None => {
            let action = option.parse::<Word<ExceptionAction>>(errors)?;
            Some(RawPolicy {
                span,
                matching: Vec::new(),
                action: Some(action),
                handler: None,
                wait: None,
                max_reattempts: None,
                terminal_action: None,
                report: None,
                reported: false,
                action_written: true,
            })
        }
    }
}

/// A separate `#[on_exception(...)]` attribute on the impl.
pub(super) fn policy_attribute(attr: &Attribute, errors: &mut Accumulator) -> Option<RawPolicy> {
    let span = attr.path().span();
    match &attr.meta {
        Meta::List(list) => {
            parenthesized(list, errors);
            Some(policy_options(span, list.tokens.clone(), errors))
        }
        Meta::Path(_) | Meta::NameValue(_) => {
            errors.push(
                Error::custom(
                    "`#[on_exception]` needs options, e.g. `#[on_exception(matching(CardDeclined), action = \"cancel\")]`",
                )
                .with_span(attr),
            );
            None
        }
    }
}

fn policy_options(span: Span, tokens: TokenStream, errors: &mut Accumulator) -> RawPolicy {
    let mut policy = RawPolicy {
        span,
        matching: Vec::new(),
        action: None,
        handler: None,
        wait: None,
        max_reattempts: None,
        terminal_action: None,
        report: None,
        reported: false,
        action_written: false,
    };
    let ((), reported) = nested(errors, |errors| {
        let metas = list::read(tokens, Place::OnException, errors);
        for option in options::read(&metas, Place::OnException, errors) {
            let name_span = option.name_span();
            match option.name.as_str() {
                "matching" => {
                    policy.matching = option
                        .parse::<Matching>(errors)
                        .map(|m| m.0)
                        .unwrap_or_default();
                }
                "action" => {
                    policy.action_written = true;
                    policy.action = option.parse(errors);
                }
                "handler" => policy.handler = option.parse(errors),
                "wait" => policy.wait = option.parse(errors).map(|v| (name_span, v)),
                "max_reattempts" => {
                    policy.max_reattempts = option.parse(errors).map(|v| (name_span, v));
                }
                "terminal_action" => {
                    policy.terminal_action = option.parse(errors).map(|v| (name_span, v));
                }
                "report" => policy.report = option.parse(errors),
                _ => {}
            }
        }
    });
    policy.reported = reported;
    policy
}
