//! How an invocation's errors reach the user: notes that point at a second
//! place, and every error in the order of the source it is about.
//!
//! A proc macro on stable Rust cannot attach a note to an error, so a note is
//! an error of its own whose text starts with `note: `, spanned where it
//! points, and emitted right after the error it belongs to.

use darling::Error;
use proc_macro2::Span;

/// What a note's text starts with.
const NOTE: &str = "note: ";

/// A note at `span`, e.g. "note: the first step named `charge` is here"; push
/// it right after the error it explains.
pub(crate) fn note(text: &str, span: Span) -> Error {
    Error::custom(format!("{NOTE}{text}")).with_span(&span)
}

/// Every error, flattened, in the order of the source: by the line and
/// column where its span starts, a stable sort. An error without a span is
/// reported at the `#[workflow]` attribute, which comes before the impl, so
/// it goes first; a note stays right after the error it belongs to.
pub(crate) fn in_source_order(errors: Vec<Error>) -> Vec<Error> {
    let mut keyed: Vec<((usize, usize), usize, Error)> = Vec::new();
    let mut primary = (0, 0);
    for (index, error) in errors.into_iter().flat_map(Error::flatten).enumerate() {
        let key = if error.to_string().starts_with(NOTE) {
            primary
        } else {
            let at = error.explicit_span().map_or((0, 0), |span| {
                let start = span.start();
                (start.line, start.column)
            });
            primary = at;
            at
        };
        keyed.push((key, index, error));
    }
    keyed.sort_by_key(|(key, index, _)| (*key, *index));
    keyed.into_iter().map(|(_, _, error)| error).collect()
}

#[cfg(test)]
mod tests;
