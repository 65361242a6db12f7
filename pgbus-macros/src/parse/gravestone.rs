//! `removed_step!(...)`: a gravestone for a step that is gone.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::EntryKind;
use syn::spanned::Spanned;

use super::conditional;
use super::values::Text;
use super::{RawEntry, RawStepArgs};

/// `removed_step!(name)` or `removed_step!("durable.name")`.
pub(super) fn gravestone(mac: &syn::ImplItemMacro, errors: &mut Accumulator) -> Option<RawEntry> {
    let name = match syn::parse2::<GravestoneName>(mac.mac.tokens.clone()) {
        Ok(name) => name.0,
        Err(error) => {
            // syn's error knows the token where the name stopped making sense; an
            // empty invocation has none, so blame the macro's name.
            let span = if mac.mac.tokens.is_empty() {
                mac.mac.path.span()
            } else {
                error.span()
            };
            errors.push(
                Error::custom(
                    "`removed_step!` takes the removed step's durable name, e.g. `removed_step!(legacy_check)` \
                     or `removed_step!(\"legacy.check\")`",
                )
                .with_span(&span),
            );
            return None;
        }
    };
    for attr in &mac.attrs {
        if attr.path().is_ident("cfg") {
            errors.push(conditional::cfg(attr));
        } else {
            errors.push(
                Error::custom(format!(
                    "`removed_step!` takes no attributes; remove `#[{}]`",
                    crate::render::code(attr.path())
                ))
                .with_span(attr.path()),
            );
        }
    }
    Some(RawEntry {
        kind: EntryKind::Removed,
        method: None,
        removed_name: Some(name),
        args: RawStepArgs::default(),
        signature: None,
    })
}

struct GravestoneName(Text);

impl syn::parse::Parse for GravestoneName {
    fn parse(input: syn::parse::ParseStream<'_>) -> syn::Result<Self> {
        let text = if input.peek(syn::LitStr) {
            let lit: syn::LitStr = input.parse()?;
            Text {
                value: lit.value(),
                span: lit.span(),
            }
        } else {
            let ident: syn::Ident = input.parse()?;
            Text {
                value: syn::ext::IdentExt::unraw(&ident).to_string(),
                span: ident.span(),
            }
        };
        if !input.is_empty() {
            return Err(input.error("expected one name"));
        }
        Ok(Self(text))
    }
}
