//! Holds the trybuild cases of the pgbus macros; see `tests/ui.rs`. The cases
//! live in `ui/pass` and `ui/fail`, one scenario per file; `ui/fixed` holds
//! each failing case with the fix its message suggests applied (see
//! `tests/fixes.rs`).
