//! Walks an option list (`name = value, other(...)`), rejecting unknown and
//! duplicate options with the house diagnostics before any value is parsed.

use darling::ast::NestedMeta;
use darling::error::Accumulator;
use darling::{Error, FromMeta};
use pgbus_core::vocab::{backticked, did_you_mean, options};
use proc_macro2::Span;
use syn::spanned::Spanned;

use super::placement::{Written, misplaced};

/// Where an option list is written; decides the vocabulary and the wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    Workflow,
    Step,
    FanOut,
    OnException,
    WaitFor,
}

impl Place {
    fn label(self) -> &'static str {
        match self {
            Self::Workflow => "`#[workflow]`",
            Self::Step => "`#[step]`",
            Self::FanOut => "`#[fan_out]`",
            Self::OnException => "`on_exception(...)`",
            Self::WaitFor => "`wait_for(...)`",
        }
    }

    fn allowed(self) -> &'static [&'static str] {
        match self {
            Self::Workflow => options::WORKFLOW,
            Self::Step => options::STEP,
            Self::FanOut => options::FAN_OUT,
            Self::OnException => options::ON_EXCEPTION,
            Self::WaitFor => options::WAIT_FOR,
        }
    }

    fn repeatable(self, name: &str) -> bool {
        match self {
            Self::Workflow => matches!(name, "cancel_if" | "on_exception"),
            Self::Step | Self::FanOut => name == "on_exception",
            Self::OnException | Self::WaitFor => false,
        }
    }
}

/// One known option, ready for its value to be parsed.
pub(crate) struct OptionItem<'a> {
    pub(crate) name: String,
    pub(crate) item: &'a NestedMeta,
}

impl OptionItem<'_> {
    /// Parses the value with `T`'s `FromMeta`; errors land on the value.
    pub(crate) fn parse<T: FromMeta>(&self, errors: &mut Accumulator) -> Option<T> {
        errors.handle(T::from_nested_meta(self.item))
    }

    /// Parses the value with `T`, whose messages name this option.
    pub(crate) fn parse_named<T: super::flow::FromOption>(
        &self,
        errors: &mut Accumulator,
    ) -> Option<T> {
        errors.handle(T::from_option(&self.name, self.item))
    }

    /// The span of the option's name.
    pub(crate) fn name_span(&self) -> Span {
        match self.item {
            NestedMeta::Meta(meta) => meta.path().span(),
            NestedMeta::NameValueInvalidExpr(invalid) => invalid.path.span(),
            NestedMeta::Lit(lit) => lit.span(),
        }
    }

    /// The nested list of `name(...)`, if written that way.
    pub(crate) fn list(&self) -> Option<&syn::MetaList> {
        match self.item {
            NestedMeta::Meta(syn::Meta::List(list)) => Some(list),
            _ => None,
        }
    }
}

/// Splits `tokens` into option items; literals, unknown names and duplicates are
/// reported and left out.
pub(crate) fn read<'a>(
    items: &'a [NestedMeta],
    place: Place,
    errors: &mut Accumulator,
) -> Vec<OptionItem<'a>> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for item in items {
        let path = match item {
            NestedMeta::Meta(meta) => meta.path(),
            NestedMeta::NameValueInvalidExpr(invalid) => &invalid.path,
            NestedMeta::Lit(lit) => {
                errors.push(
                    Error::custom(format!(
                        "unexpected literal; {} options are written `name = value`, e.g. {}",
                        place.label(),
                        example(place)
                    ))
                    .with_span(lit),
                );
                continue;
            }
        };
        let name = path
            .segments
            .iter()
            .map(|s| s.ident.to_string())
            .collect::<Vec<_>>()
            .join("::");
        let allowed = place.allowed();
        if !allowed.contains(&name.as_str()) || path.get_ident().is_none() {
            errors.push(unknown(place, &name, item).with_span(path));
            continue;
        }
        if seen.contains(&name) && !place.repeatable(&name) {
            errors.push(
                Error::custom(format!(
                    "duplicate {} option `{name}`; give it once",
                    place.label()
                ))
                .with_span(path),
            );
            continue;
        }
        seen.push(name.clone());
        out.push(OptionItem { name, item });
    }
    out
}

fn unknown(place: Place, name: &str, item: &NestedMeta) -> Error {
    let written = Written::of(item);
    if let Some(why) = misplaced(place, name, &written) {
        return Error::custom(format!("`{name}` {why}"));
    }
    // A word from another engine whose pgbus spelling lives elsewhere, e.g.
    // `retries` on a step: point at where `max_reattempts` goes.
    if let Some(word) = pgbus_core::vocab::synonym(name)
        && !place.allowed().contains(&word)
        && let Some(why) = misplaced(place, word, &written)
    {
        return Error::custom(format!(
            "unknown {} option `{name}`; pgbus calls it `{word}`, which {why}",
            place.label()
        ));
    }
    let allowed = place.allowed();
    match did_you_mean(name, allowed) {
        Some(suggestion) => Error::custom(format!(
            "unknown {} option `{name}`; did you mean `{suggestion}`?",
            place.label()
        )),
        None => Error::custom(format!(
            "unknown {} option `{name}`; expected {}",
            place.label(),
            backticked(allowed)
        )),
    }
}

fn example(place: Place) -> &'static str {
    match place {
        Place::Workflow => "`name = \"orders.fulfil\"`",
        Place::Step | Place::FanOut => "`wait = \"5s\"`",
        Place::OnException => "`action = \"pause\"`",
        Place::WaitFor => "`name = \"payment.settled\"`",
    }
}
