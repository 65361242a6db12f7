//! The definition digest: a fingerprint of a workflow's step list, stored on every
//! run at start so an operator (and the engine) can tell which shape of the
//! workflow a run began under.
//!
//! The digest is the SHA-256, as 64 lowercase hex digits, of the compact JSON array
//! of `[name, kind]` pairs for every entry in declaration order, gravestones
//! included. `kind` is `"step"`, `"fan_out"` or `"removed"`. The JSON is standard
//! compact JSON: UTF-8, no spaces, and escapes only where JSON requires them (`"`,
//! `\`, control characters); non-ASCII letters are written as themselves.
//!
//! Options and bodies do not change it; adding, renaming, reordering or removing a
//! step does. For example `[["charge","step"],["notify","fan_out"]]` digests to
//! `a0a59deaaccc54caa9a4fb72eca65699f1816abb12ad12348d49c37ed7f92629`.

use sha2::{Digest as _, Sha256};

use crate::vocab::EntryKind;

/// Length of a digest in hex characters.
pub const DIGEST_HEX_LEN: usize = 64;

/// The compact JSON that [`definition_digest`] hashes, e.g.
/// `[["charge","step"],["notify","fan_out"]]`.
#[must_use]
pub fn entries_json<'a, I>(entries: I) -> String
where
    I: IntoIterator<Item = (&'a str, EntryKind)>,
{
    let pairs: Vec<[&str; 2]> = entries
        .into_iter()
        .map(|(name, kind)| [name, kind.as_str()])
        .collect();
    // Serializing a Vec of string pairs cannot fail: there are no maps with
    // non-string keys and no user Serialize impls involved.
    serde_json::to_string(&pairs).unwrap_or_default()
}

/// The definition digest of entries given in declaration order.
///
/// ```
/// use pgbus_core::{definition_digest, EntryKind};
/// let digest = definition_digest([("a", EntryKind::Step)]);
/// assert_eq!(digest, "33a1211403190e00a90fd43ec535d3d609601507c64102da06e348edd2160a35");
/// ```
#[must_use]
pub fn definition_digest<'a, I>(entries: I) -> String
where
    I: IntoIterator<Item = (&'a str, EntryKind)>,
{
    sha256_hex(entries_json(entries).as_bytes())
}

/// SHA-256 of `bytes` as 64 lowercase hex digits.
#[must_use]
pub fn sha256_hex(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(DIGEST_HEX_LEN);
    for byte in hash {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

const HEX: &[u8; 16] = b"0123456789abcdef";

#[cfg(test)]
mod tests;
