//! Which attributes and macros inside the impl are pgbus's, however they are
//! written, and stripping them where they do not belong.

use darling::Error;
use darling::error::Accumulator;
use syn::{Attribute, ImplItem};

/// How our attributes and `removed_step!` may be written inside the impl:
/// bare (`#[step]`), through `pgbus_runtime::` or `pgbus_macros::`, or through
/// the path the workflow's `crate = "..."` option names (`#[pgbus::step]` for
/// a dependency renamed to `pgbus`).
pub(crate) struct Ours {
    /// The `crate` option's segments, without a leading `::`.
    krate: Option<Vec<String>>,
}

impl Ours {
    pub(crate) fn new(krate: Option<&syn::Path>) -> Self {
        Self {
            krate: krate.map(|path| {
                path.segments
                    .iter()
                    .map(|segment| segment.ident.to_string())
                    .collect()
            }),
        }
    }

    /// Whether `attr` is ours and named `name`.
    pub(crate) fn is(&self, attr: &Attribute, name: &str) -> bool {
        self.is_path(attr.path(), name)
    }

    /// Whether `path` names our `name`.
    pub(crate) fn is_path(&self, path: &syn::Path, name: &str) -> bool {
        let segments: Vec<String> = path.segments.iter().map(|s| s.ident.to_string()).collect();
        self.is_words(&segments, name)
    }

    /// Whether the words of a path (`["pgbus", "step"]`) name our `name`.
    pub(crate) fn is_words(&self, segments: &[String], name: &str) -> bool {
        let Some((last, prefix)) = segments.split_last() else {
            return false;
        };
        if last != name {
            return false;
        }
        match prefix {
            [] => true,
            [krate] if matches!(krate.as_str(), "pgbus_runtime" | "pgbus_macros") => true,
            _ => self.krate.as_deref() == Some(prefix),
        }
    }
}

/// Strips pgbus attributes from a non-method impl item, reporting each.
pub(super) fn strip_stray(
    attrs: &mut Vec<Attribute>,
    ours: &Ours,
    errors: &mut Accumulator,
    expected: &str,
) {
    attrs.retain(|attr| {
        let ours = ["step", "fan_out", "on_exception", "workflow"]
            .iter()
            .any(|name| ours.is(attr, name));
        if ours {
            let name = attr
                .path()
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_default();
            let message = match name.as_str() {
                "on_exception" => {
                    "`#[on_exception]` goes on the `#[workflow]` impl, below `#[workflow]`, \
                                   or inside a step as `#[step(on_exception(...))]`"
                        .to_owned()
                }
                "workflow" => "`#[workflow]` goes on the impl block".to_owned(),
                _ => format!("`#[{name}]` only goes on {expected} of the `#[workflow]` impl"),
            };
            errors.push(Error::custom(message).with_span(attr.path()));
        }
        !ours
    });
}

pub(super) fn item_attrs_mut(item: &mut ImplItem) -> Option<&mut Vec<Attribute>> {
    match item {
        ImplItem::Const(c) => Some(&mut c.attrs),
        ImplItem::Type(t) => Some(&mut t.attrs),
        ImplItem::Macro(m) => Some(&mut m.attrs),
        ImplItem::Fn(f) => Some(&mut f.attrs),
        _ => None,
    }
}
