//! Expands the given inputs as the fuzz target does and prints each error
//! with its span: the bytes it covers and what it points at, or `call site`.
//!
//! ```sh
//! cargo run --manifest-path fuzz/Cargo.toml --example replay -- fuzz/regressions/*
//! ```

fn main() -> std::io::Result<()> {
    for path in std::env::args_os().skip(1) {
        let bytes = std::fs::read(&path)?;
        println!("== {}", path.to_string_lossy());
        let Ok(text) = std::str::from_utf8(&bytes) else {
            println!("not UTF-8: skipped");
            continue;
        };
        println!("{text}");
        let Some(errors) = pgbus_fuzz::errors(&bytes) else {
            println!("-- does not lex: skipped");
            continue;
        };
        if errors.is_empty() {
            println!("-- no error");
        }
        for (message, range, spanned) in errors {
            let place = if spanned {
                format!("{range:?} `{}`", &text[range.clone()])
            } else {
                format!("{range:?} NOT INSIDE THE INPUT")
            };
            println!("-- {message}\n   at {place}");
        }
    }
    Ok(())
}
