//! Bytes, as source text of an item under `#[workflow(...)]`, through the
//! macro's whole pipeline: no panic, and every error spanned inside the text.
//! See fuzz/README.md.

#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| pgbus_fuzz::check(data));
