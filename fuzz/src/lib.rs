//! The `#[workflow]` pipeline, compiled from pgbus-macros' own files, and the
//! property the fuzz target checks on each input.
//!
//! A proc-macro crate exports nothing but its macros, so this crate compiles
//! the macro crate's modules from their paths: the same parse, validate and
//! expand code that `#[workflow]` runs, with `expand::workflow` as the entry.
//! The property itself (`pgbus-macros/src/fuzz/mod.rs`) is the one the macro
//! crate's corpus replay test asserts in CI.
//!
//! When pgbus-macros gains a module or a dependency, add it here too.

#![allow(dead_code, unreachable_pub, missing_docs)]

#[path = "../../pgbus-macros/src/expand/mod.rs"]
mod expand;
#[path = "../../pgbus-macros/src/model.rs"]
mod model;
#[path = "../../pgbus-macros/src/parse/mod.rs"]
mod parse;
#[path = "../../pgbus-macros/src/render.rs"]
mod render;
#[path = "../../pgbus-macros/src/report.rs"]
mod report;
#[path = "../../pgbus-macros/src/span.rs"]
mod span;
#[path = "../../pgbus-macros/src/validate/mod.rs"]
mod validate;

#[path = "../../pgbus-macros/src/fuzz/mod.rs"]
mod property;

pub mod seeds;
mod worker;

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::Write;
use std::sync::Mutex;

/// The environment variable that turns unspanned errors from crashes into
/// records: a file to append one JSON line per recorded finding to.
pub const LOG_VAR: &str = "PGBUS_FUZZ_UNSPANNED_LOG";

/// How many inputs are recorded per class of message in log mode.
const EXAMPLES_PER_CLASS: usize = 3;

/// One fuzz input: bytes, as UTF-8 source text, expanded under `#[workflow]`.
/// Text that is not UTF-8 or does not lex is skipped. A panic of the pipeline
/// is a crash, and so is an error not spanned inside the text, unless
/// [`LOG_VAR`] names a file to record it in instead.
///
/// The input runs on a worker thread with a large stack ([`WORKER_STACK`]):
/// syn parses nested types and expressions by recursion, and an input of a few
/// thousand `<` or `(` overflows the 8 MiB of the main thread inside syn's
/// parser, on text rustc would not accept as an item. That is syn's limit
/// (every syn-based macro shares it), not the property's; on the large stack
/// the inputs libFuzzer makes (4 KiB by default) cannot reach it, and an
/// overflow all the same is still a crash with its input saved.
///
/// # Panics
/// On an unspanned error, when not in log mode: that is the finding.
pub fn check(data: &[u8]) {
    worker::run(data.to_vec());
}

/// The stack of the thread that runs the inputs.
pub const WORKER_STACK: usize = 256 << 20;

fn check_now(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let unspanned = property::unspanned(text);
    let Some(first) = unspanned.first() else {
        return;
    };
    match std::env::var_os(LOG_VAR) {
        Some(path) => record(std::path::Path::new(&path), text, &unspanned),
        None => panic!("error not spanned inside the input: {first}\ninput:\n{text}"),
    }
}

/// Every error of one input, as `(message, byte range, spanned inside the
/// input)`; `None` when the input is not UTF-8 or does not lex.
#[must_use]
pub fn errors(data: &[u8]) -> Option<Vec<(String, std::ops::Range<usize>, bool)>> {
    let text = std::str::from_utf8(data).ok()?;
    property::expand(text).map(|errors| {
        errors
            .into_iter()
            .map(|e| {
                let spanned = e.spanned_within(text.len());
                (e.message, e.range, spanned)
            })
            .collect()
    })
}

/// The class of a message: what the user wrote taken out.
#[must_use]
pub fn message_class(message: &str) -> String {
    property::message_class(message)
}

fn record(path: &std::path::Path, text: &str, unspanned: &[property::Reported]) {
    static SEEN: Mutex<Option<HashMap<String, usize>>> = Mutex::new(None);
    let mut seen = SEEN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let seen = seen.get_or_insert_with(HashMap::new);
    for reported in unspanned {
        let class = property::message_class(&reported.message);
        let count = seen.entry(class.clone()).or_insert(0);
        if *count >= EXAMPLES_PER_CLASS {
            continue;
        }
        *count += 1;
        let line = serde_json::json!({
            "class": class,
            "message": reported.message,
            "range": [reported.range.start, reported.range.end],
            "input": text,
        });
        if let Ok(mut file) = OpenOptions::new().create(true).append(true).open(path) {
            let _ = writeln!(file, "{line}");
        }
    }
}
