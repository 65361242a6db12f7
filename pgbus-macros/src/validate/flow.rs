//! The rules across the flow control options of `#[workflow(...)]`: a
//! `deadline` greater than zero, a `slot` only with a concurrency limit to
//! hold, and a `key` only with a per-key limit to count by it. Each value was
//! read and checked on its own in `parse::flow`.

use darling::Error;
use darling::error::Accumulator;

use crate::model::FlowDef;
use crate::parse::RawFlow;

/// The checked flow options; errors are pushed, the model keeps what is valid.
pub(super) fn flow(raw: &RawFlow, errors: &mut Accumulator) -> FlowDef {
    if let Some(deadline) = raw.deadline
        && let Err(message) = pgbus_core::rules::check_deadline_ms(deadline.ms)
    {
        errors.push(Error::custom(message).with_span(&deadline.span));
    }
    if let Some(slot) = &raw.slot
        && !raw.wrote("concurrency")
        && !raw.wrote("key_concurrency")
    {
        errors.push(
            Error::custom(
                "`slot` says what holds a concurrency slot, and no limit is declared, so there \
                 is nothing to hold; add `concurrency = N` or `key_concurrency = N`, or remove `slot`",
            )
            .with_span(&slot.span),
        );
    }
    if let Some(key) = &raw.key
        && !raw.wrote("key_concurrency")
        && !raw.wrote("key_rate_limit")
    {
        errors.push(
            Error::custom(
                "`key` alone limits nothing: `concurrency` and `rate_limit` count all runs of the \
                 workflow together; add a limit for each key on its own, e.g. \
                 `key_concurrency = 1` (one run per key at a time) or `key_rate_limit = \"10/1m\"`",
            )
            // The method's name: `Self::customer` is underlined at `customer`.
            .with_span(&key.0.segments.last().map_or_else(
                || syn::spanned::Spanned::span(&key.0),
                |segment| segment.ident.span(),
            )),
        );
    }
    FlowDef {
        concurrency: raw.concurrency.map(|limit| limit.value),
        key: raw.key.as_ref().map(|path| path.0.clone()),
        key_concurrency: raw.key_concurrency.map(|limit| limit.value),
        slot: raw.slot.map(|word| word.value),
        rate_limit: raw.rate_limit.map(|rate| rate.rate),
        key_rate_limit: raw.key_rate_limit.map(|rate| rate.rate),
        deadline_ms: raw
            .deadline
            .map(|deadline| deadline.ms)
            .filter(|ms| *ms > 0),
        on_deadline: raw.on_deadline.map(|word| word.value),
    }
}
