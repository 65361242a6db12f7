//! The rules of names and values: durable names unique and visible, signal
//! names a signal can carry, a queue, a priority.

use darling::Error;
use darling::error::Accumulator;
use pgbus_core::EntryKind;

use crate::model::NamedAt;
use crate::parse::RawEntry;
use crate::parse::values::{Int, Text};
use crate::report::note;

/// Durable names: unique across live steps; a gravestone neither repeats a live
/// step nor another gravestone. Each error is on the later of the two places,
/// with a note on the earlier one.
pub(super) fn check_names(entries: &[RawEntry], errors: &mut Accumulator) {
    let named: Vec<(&RawEntry, NamedAt)> = entries
        .iter()
        .filter_map(|entry| durable_name(entry).map(|named| (entry, named)))
        .collect();
    // Names a fix must not suggest: every durable name, and earlier fixes.
    let mut taken: Vec<String> = named.iter().map(|(_, n)| n.name.clone()).collect();
    let mut live: Vec<&NamedAt> = Vec::new();
    let mut removed: Vec<&NamedAt> = Vec::new();
    for (entry, named) in &named {
        if entry.kind == EntryKind::Removed {
            if let Some(first) = removed.iter().find(|r| r.name == named.name) {
                errors.push(
                    Error::custom(format!(
                        "step `{}` is removed twice; keep one `removed_step!`",
                        named.name
                    ))
                    .with_span(&named.span),
                );
                errors.push(note(
                    &format!("the first `removed_step!` of `{}` is here", named.name),
                    first.span,
                ));
            } else {
                removed.push(named);
            }
        } else if let Some(first) = live.iter().find(|l| l.name == named.name) {
            let free = free_name(entry, entries, &named.name, &taken);
            errors.push(
                Error::custom(format!(
                    "duplicate durable step name `{}`: an earlier step has it; give this one \
                     another name, e.g. `name = \"{free}\"`",
                    named.name,
                ))
                .with_span(&named.span),
            );
            taken.push(free);
            errors.push(note(
                &format!("the first step named `{}` is here", named.name),
                first.span,
            ));
        } else {
            live.push(named);
        }
    }
    for gravestone in &removed {
        if let Some(step) = live.iter().find(|l| l.name == gravestone.name) {
            errors.push(
                Error::custom(format!(
                    "step `{}` is marked removed but is also a live step; delete the `removed_step!` or rename the step",
                    gravestone.name
                ))
                .with_span(&gravestone.span),
            );
            errors.push(note(
                &format!("the live step named `{}` is here", gravestone.name),
                step.span,
            ));
        }
    }
}

/// A name for `entry`, which repeats `name`: its method's own name when no
/// step has or may take it (the override was the mistake), else `name_2`,
/// `name_3`, ... that no step has or may take.
fn free_name(entry: &RawEntry, entries: &[RawEntry], name: &str, taken: &[String]) -> String {
    let unraw = |method: &syn::Ident| syn::ext::IdentExt::unraw(method).to_string();
    // Other steps' method names: a later fix may give them back their own.
    let methods: Vec<String> = entries
        .iter()
        .filter(|other| !std::ptr::eq(*other, entry))
        .filter_map(|other| other.method.as_ref().map(unraw))
        .collect();
    let free = |candidate: &String| !taken.contains(candidate) && !methods.contains(candidate);
    if let Some(own) = entry.method.as_ref().map(unraw).filter(free) {
        return own;
    }
    // One of the first `taken.len() + methods.len() + 1` numbers is free.
    (2..taken.len() + methods.len() + 3)
        .map(|n| format!("{name}_{n}"))
        .find(free)
        .unwrap_or_default()
}

fn durable_name(entry: &RawEntry) -> Option<NamedAt> {
    if let Some(text) = entry.removed_name.as_ref().or(entry.args.name.as_ref()) {
        return Some(NamedAt {
            name: text.value.clone(),
            span: text.span,
        });
    }
    let method = entry.method.as_ref()?;
    Some(NamedAt {
        name: syn::ext::IdentExt::unraw(method).to_string(),
        span: method.span(),
    })
}

/// A durable name (workflow, step, gravestone, signal): stored in Postgres `text`
/// and compared byte for byte, so no control characters (Postgres refuses NUL)
/// and no whitespace at either end that a reader could not see.
pub(super) fn non_empty(
    text: &Text,
    what: &str,
    example: &str,
    errors: &mut Accumulator,
) -> Option<String> {
    let value = &text.value;
    let problem = if value.trim().is_empty() {
        Some("cannot be empty")
    } else if value.chars().any(char::is_control) {
        Some("cannot contain control characters (tabs, newlines, NUL)")
    } else if value.trim() != value {
        Some("cannot start or end with whitespace")
    } else {
        None
    };
    if let Some(problem) = problem {
        // Whitespace at the ends: the name without it is the fix.
        let trimmed = value.trim();
        let fix = if !trimmed.is_empty() && !trimmed.chars().any(char::is_control) {
            format!("write `{trimmed:?}`")
        } else {
            format!("write e.g. `{example}`")
        };
        errors.push(Error::custom(format!("{what} {problem}; {fix}")).with_span(&text.span));
        return None;
    }
    Some(value.clone())
}

/// A `wait_for` name, checked by the rule `Client::signal` applies
/// ([`pgbus_core::check_signal_name`]): a name no signal can carry would leave the
/// step waiting until it times out.
pub(super) fn signal_name(text: &Text, errors: &mut Accumulator) -> Option<String> {
    let value = &text.value;
    let Err(reason) = pgbus_core::check_signal_name(value) else {
        return Some(value.clone());
    };
    let count = value.chars().count();
    let message = if count > pgbus_core::MAX_SIGNAL_NAME_CHARS {
        format!(
            "{reason}, and this one has {count}: `Client::signal` rejects such a name, \
             so the step could only time out"
        )
    } else if let Some((at, c)) = unseen_char(value) {
        format!(
            "{reason}; found U+{:04X} at character {}",
            u32::from(c),
            at + 1
        )
    } else if value.trim() != value && pgbus_core::check_signal_name(value.trim()).is_ok() {
        format!("{reason}; write `{:?}`", value.trim())
    } else {
        format!("{reason}; write e.g. `\"payment.settled\"`")
    };
    errors.push(Error::custom(message).with_span(&text.span));
    None
}

/// The first character, counted from zero, that the signal name rule rejects for
/// what it is and that a diagnostic cannot show: a control character first, as
/// the rule checks those first, else an invisible one. `None` for a blank name,
/// whose reason says enough.
fn unseen_char(value: &str) -> Option<(usize, char)> {
    if value.trim().is_empty() {
        return None;
    }
    let find = |rejected: fn(char) -> bool| value.chars().enumerate().find(|&(_, c)| rejected(c));
    find(char::is_control).or_else(|| find(pgbus_core::is_invisible))
}

pub(super) fn queue(text: &Text, errors: &mut Accumulator) -> Option<String> {
    // The rule is shared with overrides; the source's fix echoes its value.
    let Err(rule) = pgbus_core::rules::check_queue(&text.value) else {
        return Some(text.value.clone());
    };
    if text.value.is_empty() {
        errors.push(Error::custom(rule).with_span(&text.span));
        return None;
    }
    let joined = text
        .value
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>()
        .join("_");
    let fix = if joined.is_empty() {
        "leave `queue` out to use `\"default\"`".to_owned()
    } else {
        format!("write e.g. `{joined:?}`")
    };
    errors.push(
        Error::custom(format!("`queue` cannot contain whitespace; {fix}")).with_span(&text.span),
    );
    None
}

pub(super) fn priority(int: Int, errors: &mut Accumulator) -> Option<i16> {
    pgbus_core::rules::check_priority(int.value)
        .map_err(|message| errors.push(Error::custom(message).with_span(&int.span)))
        .ok()
}
