//! Every fix a diagnostic suggests is what its message says, and compiles once
//! applied.
//!
//! A compile-fail case whose message suggests a fix says so in its last
//! lines, one line per edit, below `fn main() {}`:
//!
//! ```text
//! // fix: `matching(CardDeclined)` => `on_exception(matching(CardDeclined), action = "pause")`
//! ```
//!
//! (At the end, not in the header: adding or changing a fix moves no line of
//! the case, so its `.stderr` stays as it was.)
//!
//! The edit replaces the one occurrence of the left text in the case with the
//! right text (`\n` is a line break; an empty right side removes). A
//! `// given:` line of the same shape is applied first and checked against
//! nothing: it adds what a real program around the case would have, such as
//! the method an example names. This test checks, without a compiler, that
//!
//! - the right side brings in code the message shows: a backticked snippet of
//!   the case's committed `.stderr` occurs in it and not in the left side
//!   (`...` in a snippet stands for any text, and `#[step]` also stands for
//!   `#[step(...)]`), or, for a removal (the right side is the left with a
//!   part cut out), the removed part holds a snippet: the message names what
//!   to remove. A snippet counts only as whole words: `run` is not in `runs`;
//! - the case with its edits applied is the committed `ui/fixed/<case>.rs`;
//! - `ui/fixed.rs`, which makes every fixed case a module of one test target
//!   (`fixed`, see `Cargo.toml`), lists exactly those files, so building that
//!   target compiles every applied fix;
//! - a case whose message suggests a change (`write`, `e.g.`, `did you mean`,
//!   `add`, `use`, `remove`, `leave it out`, ...) has `// fix:` lines, or a
//!   `// no fix: <why>` line saying why none applies (the snippet is a shape
//!   or a list of values, or the fix needs code the case does not have).
//!
//! After changing a case or a message, regenerate the fixed files with
//! `PGBUS_FIXES=overwrite cargo test -p pgbus-ui-tests --test fixes` and read
//! each changed one.

// The functions below read the cases for the tests: a case that cannot be read
// fails the test, as an `expect` in the test itself would.
#![allow(clippy::expect_used)]

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// What a case's header says of its fix.
const FIX: &str = "// fix: ";
const GIVEN: &str = "// given: ";
const NO_FIX: &str = "// no fix: ";
/// Words with which a message offers a fix.
const SUGGESTIONS: [&str; 11] = [
    "write ",
    "e.g. `",
    "did you mean `",
    "add ",
    "use ",
    "remove",
    "delete",
    "leave it out",
    "give it once",
    "keep one",
    "move ",
];

/// One edit of a `// fix:` line.
struct Edit {
    old: String,
    new: String,
}

/// A compile-fail case, read.
struct Case {
    name: String,
    /// The `// fix:`, `// given:` and `// no fix:` lines.
    directives: Vec<String>,
    /// The case without its first comment lines (why it fails) and without
    /// its directives.
    body: String,
    stderr: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn cases() -> Vec<Case> {
    let mut paths: Vec<PathBuf> = fs::read_dir(root().join("ui/fail"))
        .expect("ui/fail is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "rs"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let source = fs::read_to_string(&path).expect("a case is readable");
            let stderr =
                fs::read_to_string(path.with_extension("stderr")).expect("a case has a .stderr");
            let is_directive =
                |line: &str| [FIX, GIVEN, NO_FIX].iter().any(|p| line.starts_with(p));
            let directives: Vec<String> = source
                .lines()
                .filter(|line| is_directive(line))
                .map(str::to_owned)
                .collect();
            let code: Vec<&str> = source
                .lines()
                .skip_while(|line| line.starts_with("//"))
                .filter(|line| !is_directive(line))
                .collect();
            let body = format!("{}\n", code.join("\n").trim_end());
            Case {
                name: path
                    .file_stem()
                    .and_then(|stem| stem.to_str())
                    .expect("a case's name is text")
                    .to_owned(),
                directives,
                body,
                stderr,
            }
        })
        .collect()
}

impl Case {
    /// The edits of the lines starting with `prefix`, in order.
    fn edits(&self, prefix: &str) -> Result<Vec<Edit>, String> {
        self.directives
            .iter()
            .filter_map(|line| line.strip_prefix(prefix))
            .map(|fix| {
                let (old, new) = fix
                    .strip_prefix('`')
                    .and_then(|fix| fix.strip_suffix('`'))
                    .and_then(|fix| fix.split_once("` => `"))
                    .ok_or_else(|| format!("`{FIX}{fix}` is not `{FIX}`old` => `new``"))?;
                let unescape = |text: &str| text.replace("\\n", "\n");
                Ok(Edit {
                    old: unescape(old),
                    new: unescape(new),
                })
            })
            .collect()
    }

    fn no_fix(&self) -> bool {
        self.directives.iter().any(|line| line.starts_with(NO_FIX))
    }

    /// The messages of the macros: rustc's own (`error[E...]`) are not ours.
    fn messages(&self) -> Vec<&str> {
        self.stderr
            .lines()
            .filter(|line| line.starts_with("error: "))
            .collect()
    }

    /// The backticked code of the messages.
    fn snippets(&self) -> Vec<&str> {
        self.messages()
            .into_iter()
            .flat_map(|line| line.split('`').skip(1).step_by(2))
            .filter(|snippet| snippet.chars().any(char::is_alphanumeric) || snippet.contains("..."))
            .collect()
    }

    fn suggests(&self) -> bool {
        self.messages()
            .iter()
            .any(|line| SUGGESTIONS.iter().any(|word| line.contains(word)))
    }

    /// The case with the `given` and then the `fixes` applied, headed by a
    /// line naming it.
    fn fixed(&self, given: &[Edit], fixes: &[Edit]) -> Result<String, String> {
        let mut body = self.body.clone();
        for edit in given {
            apply(&mut body, edit)?;
        }
        let snippets = self.snippets();
        for edit in fixes {
            let names_removed = removed(edit).is_some_and(|removed| {
                snippets.iter().any(|snippet| {
                    let named = snippet.trim_end_matches([']', ')']);
                    contains(removed, named)
                })
            });
            let shown = names_removed || snippets.iter().any(|snippet| brings_in(edit, snippet));
            if !shown {
                return Err(format!(
                    "the edit `{}` => `{}` is not what the message says: no snippet of the \
                     .stderr ({snippets:?}) is in its right side, nor in what it removes",
                    edit.old, edit.new,
                ));
            }
            apply(&mut body, edit)?;
        }
        Ok(format!(
            "// `ui/fail/{}.rs` with the fix its message suggests applied (`tests/fixes.rs`).\n{body}",
            self.name
        ))
    }
}

/// The part an edit cuts out, when its right side is its left side with one
/// part removed: `#[step(input = Order)]` => `#[step]` removes `(input = Order)`.
fn removed(edit: &Edit) -> Option<&str> {
    if edit.new.len() >= edit.old.len() {
        return None;
    }
    let prefix = edit
        .old
        .char_indices()
        .zip(edit.new.chars())
        .take_while(|((_, a), b)| a == b)
        .last()
        .map_or(0, |((at, c), _)| at + c.len_utf8());
    let prefix = prefix.min(edit.new.len());
    let tail = &edit.new[prefix..];
    edit.old[prefix..]
        .ends_with(tail)
        .then(|| &edit.old[prefix..edit.old.len() - tail.len()])
}

/// Replaces the one occurrence of the edit's left side in `body`.
fn apply(body: &mut String, edit: &Edit) -> Result<(), String> {
    let found = body.matches(edit.old.as_str()).count();
    if found != 1 {
        return Err(format!(
            "`{}` occurs {found} times in the case; an edit's left side occurs once",
            edit.old
        ));
    }
    *body = body.replacen(edit.old.as_str(), &edit.new, 1);
    Ok(())
}

/// Whether the edit brings `snippet` in: its right side holds it and its left
/// side does not (a template with `...` need only be in the right side).
/// `#[step]` also stands for `#[step(...)]`, an attribute given options.
fn brings_in(edit: &Edit, snippet: &str) -> bool {
    let mut forms = vec![snippet.to_owned()];
    if let Some(attribute) = snippet
        .strip_prefix("#[")
        .and_then(|rest| rest.strip_suffix(']'))
        .filter(|name| {
            name.chars()
                .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
        })
    {
        forms.push(format!("#[{attribute}(...)]"));
    }
    forms.iter().any(|form| {
        contains(&edit.new, form) && (form.contains("...") || !contains(&edit.old, form))
    })
}

/// Whether `text` holds `snippet` as whole words, where `...` in the snippet
/// is any text: `run` is not in `runs` nor in `run!`, `5` is not in `5u8`, but
/// the unit `s` is in `5s`.
fn contains(text: &str, snippet: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_' || c == '!';
    let parts: Vec<&str> = snippet.split("...").collect();
    let first = snippet.chars().next();
    let last = snippet.chars().last();
    (0..text.len())
        .filter(|start| text.is_char_boundary(*start))
        .filter(|start| {
            let before = text[..*start].chars().last();
            match (before, first) {
                (Some(before), Some(first)) if word(before) && word(first) => {
                    before.is_ascii_digit() && first.is_alphabetic()
                }
                _ => true,
            }
        })
        .any(|start| {
            let mut rest = &text[start..];
            for (index, part) in parts.iter().enumerate() {
                let at = if index == 0 {
                    rest.starts_with(part).then_some(0)
                } else {
                    rest.find(part)
                };
                let Some(at) = at else { return false };
                rest = &rest[at + part.len()..];
            }
            !(last.is_some_and(word) && rest.chars().next().is_some_and(word))
        })
}

/// `ui/fixed.rs`: every fixed case a module of the `fixed` test target.
fn harness(names: &[String]) -> String {
    let mut out = String::from(
        "//! Every fix a compile-fail case's message suggests, applied: each file of\n\
         //! `ui/fixed/` is a module here, so building this target compiles them all.\n\
         //! Generated by `tests/fixes.rs`; regenerate with\n\
         //! `PGBUS_FIXES=overwrite cargo test -p pgbus-ui-tests --test fixes`.\n\n",
    );
    // `rustfmt::skip`: each file is compared byte for byte with its case, so
    // `cargo fmt` must leave it as the edits wrote it.
    for name in names {
        writeln!(
            out,
            "#[path = \"fixed/{name}.rs\"]\n\
             #[allow(unused, unreachable_pub, clippy::all, clippy::pedantic)]\n\
             #[rustfmt::skip]\n\
             mod {name};\n"
        )
        .expect("writing to a string");
    }
    out.push_str("fn main() {}\n");
    out
}

/// Compares `path` with `expected`, or writes it when overwriting.
fn check_file(path: &Path, expected: &str, overwrite: bool, failures: &mut Vec<String>) {
    let found = fs::read_to_string(path).unwrap_or_default();
    if found == expected {
        return;
    }
    if overwrite {
        fs::write(path, expected).expect("the fixed file is writable");
    } else {
        failures.push(format!(
            "{} is not the case with its fix applied; regenerate with \
             `PGBUS_FIXES=overwrite cargo test -p pgbus-ui-tests --test fixes`",
            path.display()
        ));
    }
}

#[test]
fn every_suggested_fix_is_what_its_message_says_and_is_applied() {
    let overwrite = std::env::var("PGBUS_FIXES").is_ok_and(|value| value == "overwrite");
    let fixed_dir = root().join("ui/fixed");
    fs::create_dir_all(&fixed_dir).expect("ui/fixed can be created");
    let mut failures = Vec::new();
    let mut names = Vec::new();
    for case in cases() {
        let (given, edits) = match (case.edits(GIVEN), case.edits(FIX)) {
            (Ok(given), Ok(edits)) => (given, edits),
            (Err(error), _) | (_, Err(error)) => {
                failures.push(format!("{}: {error}", case.name));
                continue;
            }
        };
        if edits.is_empty() {
            if case.suggests() && !case.no_fix() {
                failures.push(format!(
                    "{}: its message suggests a fix; add `{FIX}`old` => `new`` lines at its \
                     end, or `{NO_FIX}<why>`",
                    case.name
                ));
            }
            continue;
        }
        match case.fixed(&given, &edits) {
            Ok(fixed) => {
                let path = fixed_dir.join(format!("{}.rs", case.name));
                check_file(&path, &fixed, overwrite, &mut failures);
                names.push(case.name);
            }
            Err(error) => failures.push(format!("{}: {error}", case.name)),
        }
    }
    for entry in fs::read_dir(&fixed_dir).expect("ui/fixed is readable") {
        let path = entry.expect("a directory entry").path();
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if !names.iter().any(|name| name == stem) {
            if overwrite {
                fs::remove_file(&path).expect("a stale fixed file can be removed");
            } else {
                failures.push(format!("{} has no case with a fix", path.display()));
            }
        }
    }
    check_file(
        &root().join("ui/fixed.rs"),
        &harness(&names),
        overwrite,
        &mut failures,
    );
    assert!(
        failures.is_empty(),
        "{} problem(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn snippets_match_with_their_placeholders() {
    assert!(contains("name = \"charge_2\"", "name = \"...\""));
    assert!(contains("#[step(name = \"a\")]", "name = \"a\""));
    assert!(contains("#[workflow(input = Order)]", "#[workflow(...)]"));
    assert!(!contains("#[workflow]", "#[workflow(...)]"));
    assert!(!contains("wait", "wait_for"));
    assert!(!contains("wait_for", "wait"));
    assert!(!contains("\"runs\"", "run"));
    assert!(contains("slot = \"run\"", "run"));
    assert!(contains("\"5s\"", "s"));
    assert!(!contains("5u8", "5"));
    let edit = |old: &str, new: &str| Edit {
        old: old.to_owned(),
        new: new.to_owned(),
    };
    assert!(brings_in(
        &edit("impl Fulfil {", "#[workflow(input = Order)]\nimpl Fulfil {"),
        "#[workflow]"
    ));
    assert!(!brings_in(
        &edit("slot = \"runs\"", "slot = \"run\""),
        "slot"
    ));
    assert_eq!(
        removed(&edit("#[step(input = Order)]", "#[step]")),
        Some("(input = Order)")
    );
    assert_eq!(removed(&edit(", queue = \"\"", "")), Some(", queue = \"\""));
    assert_eq!(removed(&edit("wiat", "wait")), None);
}
