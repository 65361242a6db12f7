//! Walks an option list (`name = value, other(...)`), rejecting unknown and
//! duplicate options with the house diagnostics before any value is parsed.

use darling::ast::NestedMeta;
use darling::error::Accumulator;
use darling::{Error, Result};
use pgbus_core::vocab::options::Shape;
use pgbus_core::vocab::{backticked, did_you_mean, options};
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Expr, Meta};

use super::values::strip_group;

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
    /// Every place, for tests that walk them all.
    #[cfg(test)]
    pub(super) const ALL: [Self; 5] = [
        Self::Workflow,
        Self::Step,
        Self::FanOut,
        Self::OnException,
        Self::WaitFor,
    ];

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Workflow => "`#[workflow]`",
            Self::Step => "`#[step]`",
            Self::FanOut => "`#[fan_out]`",
            Self::OnException => "`on_exception(...)`",
            Self::WaitFor => "`wait_for(...)`",
        }
    }

    pub(super) fn allowed(self) -> &'static [&'static str] {
        match self {
            Self::Workflow => options::WORKFLOW,
            Self::Step => options::STEP,
            Self::FanOut => options::FAN_OUT,
            Self::OnException => options::ON_EXCEPTION,
            Self::WaitFor => options::WAIT_FOR,
        }
    }

    /// The shape of each option, in the order of [`Self::allowed`].
    pub(super) fn shapes(self) -> &'static [Shape] {
        match self {
            Self::Workflow => options::WORKFLOW_SHAPES,
            Self::Step => options::STEP_SHAPES,
            Self::FanOut => options::FAN_OUT_SHAPES,
            Self::OnException => options::ON_EXCEPTION_SHAPES,
            Self::WaitFor => options::WAIT_FOR_SHAPES,
        }
    }

    /// What option `name` takes here, for messages; a plain "a value" for a
    /// name that is not an option here.
    pub(super) fn shape(self, name: &str) -> Shape {
        options::shape(self.shapes(), name)
            .copied()
            .unwrap_or(Shape {
                name: "",
                needs: "a value",
                example: "name = value",
            })
    }

    /// Whether option `name` takes a type, which may be written unquoted with
    /// commas inside its `<...>`: `input = HashMap<String, u32>`.
    pub(super) fn takes_type(self, name: &str) -> bool {
        self == Self::Workflow && matches!(name, "input" | "output")
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
    pub(crate) place: Place,
    pub(crate) item: &'a NestedMeta,
}

/// A value read for one option: its messages name the option and say the
/// shape its place expects (`skip_if` needs a method path, ...).
pub(crate) trait FromOption: Sized {
    /// Reads the value of `option`; errors are spanned inside the attribute.
    fn from_option(option: &OptionItem<'_>) -> Result<Self>;
}

impl OptionItem<'_> {
    /// Parses the value with `T`, whose messages name this option.
    pub(crate) fn parse<T: FromOption>(&self, errors: &mut Accumulator) -> Option<T> {
        errors.handle(T::from_option(self))
    }

    /// What this option takes here.
    pub(crate) fn shape(&self) -> Shape {
        self.place.shape(&self.name)
    }

    /// "`skip_if` needs a method path, e.g. `skip_if = Self::opted_out`".
    pub(crate) fn needs(&self) -> Error {
        needs(&self.name, &self.shape())
    }

    /// The value expression of `name = value`, or the error for any other
    /// form: a bare word, `name(...)`, or a value the list reader already found
    /// malformed (its message is kept in the item).
    pub(crate) fn expr(&self) -> Result<&Expr> {
        match self.item {
            NestedMeta::Meta(Meta::NameValue(nv)) => Ok(strip_group(&nv.value)),
            NestedMeta::Meta(Meta::Path(path)) => Err(self.needs().with_span(path)),
            NestedMeta::Meta(Meta::List(list)) => Err(self.in_parentheses(list)),
            NestedMeta::NameValueInvalidExpr(invalid) => {
                Err(invalid.error.clone().with_span(&invalid.eq_token))
            }
            NestedMeta::Lit(lit) => Err(self.needs().with_span(lit)),
        }
    }

    /// `wait("5s")` where `wait = "5s"` was meant.
    pub(crate) fn in_parentheses(&self, list: &syn::MetaList) -> Error {
        let mut trees = list.tokens.clone().into_iter();
        let written = match (trees.next(), trees.next()) {
            (Some(one), None) => format!("{} = {one}", self.name),
            _ => self.shape().example.to_owned(),
        };
        Error::custom(format!(
            "write `{written}`, not `{}(...)`: parentheses are only for `on_exception(...)`, \
             `wait_for(...)` and `matching(...)`",
            self.name
        ))
        .with_span(&list.path)
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
            NestedMeta::Meta(Meta::List(list)) => Some(list),
            _ => None,
        }
    }
}

/// "`{name}` needs {shape}, e.g. `{example}`", unspanned.
pub(super) fn needs(name: &str, shape: &Shape) -> Error {
    Error::custom(format!(
        "`{name}` needs {}, e.g. `{}`",
        shape.needs, shape.example
    ))
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
        out.push(OptionItem { name, place, item });
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

/// A whole option written well at `place`, for messages about the list.
pub(super) fn example(place: Place) -> &'static str {
    match place {
        Place::Workflow => "`name = \"orders.fulfil\"`",
        Place::Step | Place::FanOut => "`wait = \"5s\"`",
        Place::OnException => "`action = \"pause\"`",
        Place::WaitFor => "`name = \"payment.settled\"`",
    }
}
