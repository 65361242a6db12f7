//! The corpus replay, which keeps the fuzzer's property in CI without the
//! fuzzer: every input it kept (`fuzz/corpus/workflow`) and every finding saved
//! by name (`fuzz/regressions`) goes through the real `expand::workflow`, and
//! must neither panic nor report an error spanned outside its text. Plus the
//! checks of the property's own parts.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use super::{Reported, compile_errors, expand, message_class, split_workflow_attribute, unspanned};

/// The fuzz crate's directory.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The committed inputs: the named regressions first, then the corpus.
fn corpus() -> Vec<PathBuf> {
    let root = fuzz_dir();
    let mut files = Vec::new();
    for dir in ["regressions", "corpus/workflow"] {
        let first = files.len();
        let entries =
            std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("reading fuzz/{dir}: {e}"));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_file() && path.extension().is_none_or(|ext| ext != "md") {
                files.push(path);
            }
        }
        files[first..].sort();
    }
    files
}

/// What is wrong with one input, if anything: a panic, or each unspanned error.
fn findings(text: &str) -> Vec<(String, String)> {
    match catch_unwind(AssertUnwindSafe(|| unspanned(text))) {
        Ok(errors) => errors
            .into_iter()
            .map(|error| (message_class(&error.message), error.to_string()))
            .collect(),
        Err(payload) => {
            // The expansion stopped before letting go of its spans.
            proc_macro2::extra::invalidate_current_thread_spans();
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            vec![("panic".to_owned(), message)]
        }
    }
}

#[test]
fn every_corpus_input_expands_without_panic_and_with_every_error_spanned_inside_it() {
    // Debug builds take far more stack per frame than the fuzzer's release
    // build; a deeply nested input the fuzzer passed must not overflow here.
    let report = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(replay)
        .expect("spawning the replay thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    assert!(report.is_empty(), "{report}");
}

/// How many failing inputs the report names per class of message.
const SHOWN_PER_CLASS: usize = 5;

/// Replays the corpus; the report of every failing input, grouped by class.
fn replay() -> String {
    let root = fuzz_dir();
    let files = corpus();
    assert!(
        files.len() > 100,
        "the fuzz corpus is missing or nearly empty ({} files)",
        files.len()
    );
    let mut by_class: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut failing = 0;
    for path in &files {
        let bytes = std::fs::read(path).expect("reading a corpus file");
        // The fuzz target skips what is not UTF-8; so does the replay.
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let found = findings(&text);
        if found.is_empty() {
            continue;
        }
        failing += 1;
        let name = path.strip_prefix(&root).unwrap_or(path).display();
        for (class, detail) in found {
            by_class
                .entry(class)
                .or_default()
                .push(format!("{name}: {detail}"));
        }
    }
    if failing == 0 {
        return String::new();
    }
    let mut report = format!(
        "{failing} of {} corpus inputs panic or report an error not spanned inside the input \
         (paths under `fuzz/`; see one expanded with `cargo run --manifest-path fuzz/Cargo.toml --example replay -- fuzz/PATH`):\n",
        files.len()
    );
    for (class, inputs) in &by_class {
        let plural = if inputs.len() == 1 { "" } else { "s" };
        let _ = writeln!(report, "\n{class} ({} error{plural})", inputs.len());
        for input in inputs.iter().take(SHOWN_PER_CLASS) {
            let _ = writeln!(report, "  {input}");
        }
        if inputs.len() > SHOWN_PER_CLASS {
            let _ = writeln!(report, "  and {} more", inputs.len() - SHOWN_PER_CLASS);
        }
    }
    report
}

#[test]
fn a_call_site_error_is_unspanned() {
    let errors = compile_errors(darling::Error::custom("at the call site").write_errors());
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].message, "at the call site");
    assert_eq!(errors[0].range, 0..0);
    assert!(!errors[0].spanned_within(100));
}

#[test]
fn an_error_on_a_token_carries_the_token_s_bytes() {
    let text = "#[workflow(wiat = 1)]\nimpl Fulfil {\n    #[step]\n    async fn a(&self, cx: &mut StepCx<()>) {}\n}";
    let errors = expand(text).expect("the text lexes");
    let Reported { range, .. } = errors
        .iter()
        .find(|error| error.message.contains("wiat"))
        .expect("an error about `wiat`");
    assert_eq!(&text[range.clone()], "wiat");
}

#[test]
fn the_workflow_attribute_is_found_among_others_and_taken_off() {
    use std::str::FromStr;
    let tokens = proc_macro2::TokenStream::from_str(
        "/// Docs.\n#[pgbus::workflow(name = \"x\")]\n#[on_exception(action = \"pause\")]\nimpl F {}",
    )
    .expect("lexes");
    let (args, item) = split_workflow_attribute(tokens);
    assert_eq!(args.to_string(), "name = \"x\"");
    let item = item.to_string();
    assert!(
        item.contains("doc") && item.contains("on_exception"),
        "{item}"
    );
    assert!(!item.contains("workflow"), "{item}");

    let tokens = proc_macro2::TokenStream::from_str("impl F {}").expect("lexes");
    let (args, item) = split_workflow_attribute(tokens);
    assert!(args.is_empty());
    assert_eq!(item.to_string(), "impl F { }");
    proc_macro2::extra::invalidate_current_thread_spans();
}

#[test]
fn a_message_class_drops_what_the_user_wrote() {
    assert_eq!(
        message_class("unknown `#[step]` option `wiat`; did you mean `wait`?"),
        "unknown `…` option `…`; did you mean `…`?"
    );
    assert_eq!(
        message_class("expected at most 36500d, got 99"),
        "expected at most #d, got #"
    );
}
