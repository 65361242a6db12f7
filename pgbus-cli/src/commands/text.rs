//! How the commands and the dashboard write what a run holds: times,
//! durations, clipped values, and text made safe for a terminal.

use std::fmt::Write as _;

use chrono::{DateTime, SecondsFormat, Utc};
use comfy_table::Table;
use pgbus_runtime::view::{RunView, ValueOf};
use serde_json::Value;

/// A table's text without the padding at the end of its lines.
pub(super) fn render(table: &Table) -> String {
    table
        .lines()
        .map(|line| line.trim_end().to_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A time as operators read it: UTC, to the millisecond.
pub(crate) fn time(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// A duration in the option grammar's units (`1m30s`, `250ms`).
pub(crate) fn took(duration: chrono::Duration) -> String {
    let ms = u64::try_from(duration.num_milliseconds()).unwrap_or(0);
    if ms == 0 {
        "<1ms".to_owned()
    } else {
        pgbus_core::format_duration_ms(ms)
    }
}

/// `text` on one line, cut to `max` characters with an ellipsis.
/// A value of `view`, clipped to `max` characters, or, where the read left
/// it out for its length, that length and how to read it.
pub(crate) fn value_text(view: &RunView, of: ValueOf, value: &Value, max: usize) -> String {
    match view.omitted.iter().find(|omitted| omitted.value == of) {
        Some(omitted) => format!(
            "({} bytes, left out: `pgbus show {} --json --value-bytes {}`)",
            omitted.bytes, view.run.id, omitted.bytes
        ),
        None => clip(&value.to_string(), max),
    }
}

pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line = visible(text);
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}

/// `text` with every character that a terminal or a log would act on, or
/// that would hide or reorder text, written as a visible escape: control
/// characters (C0 with line breaks and `ESC`, `DEL`, C1) and invisible
/// formatting characters (zero-width, direction overrides and isolates, the
/// byte-order mark, soft hyphens: `pgbus_core::is_invisible`), as `\u{1b}`,
/// `\u{202e}` and so on. What a run holds reaches a terminal, a pager or the
/// page only through this, so a step's error message cannot move the cursor,
/// forge a line or make two keys look alike.
pub(crate) fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if hidden(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// Whether `c` acts on a terminal, breaks a line, or shows as nothing or
/// reorders what is around it: controls (C0, `DEL`, C1),
/// `pgbus_core::is_invisible`, and the other format, separator and
/// default-ignorable characters that render blank (the Arabic letter mark,
/// line and paragraph separators, the Mongolian vowel separator, the
/// combining grapheme joiner, Hangul fillers, variation selectors, tags).
pub(crate) fn hidden(c: char) -> bool {
    c.is_control()
        || pgbus_core::is_invisible(c)
        || matches!(
            c,
            '\u{061c}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{180e}'
                | '\u{034f}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{3164}'
                | '\u{ffa0}'
                | '\u{fe00}'..='\u{fe0f}'
                | '\u{e0000}'..='\u{e0fff}'
        )
}

/// JSON text with every [`hidden`] character inside its strings written as a
/// `\uXXXX` escape (a surrogate pair above the BMP): the same JSON value,
/// safe on a terminal. Structural JSON never holds such a character, so
/// only strings change.
pub(crate) fn json_visible(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        // JSON itself escapes C0 controls inside strings, and its own line
        // breaks and indents are ASCII: only the rest is ours.
        if !c.is_ascii() && hidden(c) {
            let mut units = [0_u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Every text of `view` that came from a workflow, a step or an operator,
/// made [`visible`]: what the text listings print.
pub(crate) fn defang(view: &mut RunView) {
    fn all(text: &mut String) {
        if text.chars().any(hidden) {
            *text = visible(text);
        }
    }
    fn some(text: &mut Option<String>) {
        if let Some(text) = text {
            all(text);
        }
    }
    all(&mut view.run.workflow);
    some(&mut view.run.current_step);
    some(&mut view.error_class);
    some(&mut view.error_message);
    some(&mut view.idempotency_key);
    some(&mut view.concurrency_key);
    for step in &mut view.steps {
        all(&mut step.step_name);
        all(&mut step.queue);
        some(&mut step.worker_id);
        some(&mut step.error_class);
        some(&mut step.error_message);
        some(&mut step.waiting_for);
        some(&mut step.held_by);
        some(&mut step.throttled_by);
        step.error_causes.iter_mut().for_each(all);
    }
    for event in &mut view.events {
        all(&mut event.event);
        all(&mut event.actor);
        some(&mut event.step_name);
        some(&mut event.reason);
    }
    for signal in &mut view.signals {
        all(&mut signal.name);
    }
    if let Some(unrunnable) = &mut view.unrunnable {
        all(&mut unrunnable.workflow);
        all(&mut unrunnable.step_name);
    }
}
