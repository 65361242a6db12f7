//! Writes the seed corpus: every `#[workflow]` item of the ui cases
//! (`ui-tests/ui/fail`, `ui-tests/ui/pass`) and of `examples/`, one file each,
//! into the directory given (default `fuzz/scratch/seeds`).
//!
//! ```sh
//! cargo run --manifest-path fuzz/Cargo.toml --example seeds -- fuzz/scratch/seeds
//! ```

use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::env::args_os()
        .nth(1)
        .map_or_else(|| root.join("fuzz/scratch/seeds"), PathBuf::from);
    std::fs::create_dir_all(&out)?;
    let mut sources = Vec::new();
    for dir in ["ui-tests/ui/fail", "ui-tests/ui/pass", "examples"] {
        rust_files(&root.join(dir), &mut sources)?;
    }
    sources.sort();
    let mut written = 0;
    for source in &sources {
        let text = std::fs::read_to_string(source)?;
        let stem = source
            .strip_prefix(&root)
            .unwrap_or(source)
            .with_extension("")
            .to_string_lossy()
            .replace(['/', '\\'], "-");
        for (n, item) in pgbus_fuzz::seeds::workflow_items(&text).iter().enumerate() {
            std::fs::write(out.join(format!("seed-{stem}-{n}")), item)?;
            written += 1;
        }
    }
    println!(
        "{written} seeds from {} files into {}",
        sources.len(),
        out.display()
    );
    Ok(())
}

fn rust_files(dir: &Path, found: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rust_files(&path, found)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
    Ok(())
}
