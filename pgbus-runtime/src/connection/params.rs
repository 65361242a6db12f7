//! Splits a libpq connection string, URL (`postgres://...?sslmode=...`) or
//! key-value (`host=... sslmode='verify-full'`), into the settings pgbus
//! interprets itself and the rest, which tokio-postgres parses.
//!
//! tokio-postgres 0.7 refuses options it does not know and knows only
//! `sslmode=disable|prefer|require`; libpq's TLS settings are therefore taken
//! out here. The grammar of both forms is libpq's ("Connection Strings",
//! section 34.1.1 of the PostgreSQL 15 manual).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use percent_encoding::percent_decode_str;

use crate::error::Error;

/// The settings pgbus takes out of the string before tokio-postgres sees it:
/// the TLS ones, and `tcp_user_timeout`, which libpq reads in milliseconds and
/// tokio-postgres in seconds (so `tcp_user_timeout=2000` would be 33 minutes).
pub(crate) const OWN_SETTINGS: [&str; 6] = [
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslsni",
    "tcp_user_timeout",
];

/// A connection string taken apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Split {
    /// The string without pgbus's own settings, in the form it came in.
    pub(crate) rest: String,
    /// pgbus's own settings, decoded, in the order given (a later one wins).
    pub(crate) own: Vec<(&'static str, String)>,
    /// The names of every setting the query or key-value string gave.
    pub(crate) keys: BTreeSet<String>,
}

impl Split {
    /// The last value given for `setting`, one of [`OWN_SETTINGS`].
    pub(crate) fn own(&self, setting: &str) -> Option<&str> {
        self.own
            .iter()
            .rev()
            .find(|(key, _)| *key == setting)
            .map(|(_, value)| value.as_str())
    }
}

/// Whether `text` is a URL rather than a key-value string.
pub(crate) fn is_url(text: &str) -> bool {
    text.starts_with("postgres://") || text.starts_with("postgresql://")
}

/// Splits `text`, a URL or a key-value string.
///
/// # Errors
/// [`Error::InvalidSetting`] for a key-value string that does not parse (a key
/// without `=`, an unterminated quote) or a URL parameter that is not UTF-8.
pub(crate) fn split(text: &str) -> Result<Split, Error> {
    if is_url(text) {
        split_url(text)
    } else {
        split_key_value(text)
    }
}

fn own_key(key: &str) -> Option<&'static str> {
    OWN_SETTINGS.into_iter().find(|own| *own == key)
}

fn split_url(url: &str) -> Result<Split, Error> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(Split {
            rest: url.to_owned(),
            ..Split::default()
        });
    };
    let mut split = Split::default();
    let mut kept = Vec::new();
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |raw: &str| {
            percent_decode_str(raw)
                .decode_utf8()
                .map(std::borrow::Cow::into_owned)
                .map_err(|_| Error::InvalidSetting {
                    setting: raw_key.to_owned(),
                    problem: "is not valid UTF-8 once percent-decoded".to_owned(),
                })
        };
        let key = decode(raw_key)?;
        split.keys.insert(key.clone());
        match own_key(&key) {
            Some(own) => split.own.push((own, decode(raw_value)?)),
            None => kept.push(pair),
        }
    }
    split.rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok(split)
}

/// Parses libpq's key-value form: `key = value` pairs separated by
/// whitespace; a value is either single-quoted (`'a b'`, `\'` and `\\` escaped)
/// or runs to the next whitespace (backslash escapes the next character).
fn split_key_value(text: &str) -> Result<Split, Error> {
    let mut split = Split::default();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.peek().is_none() {
            break;
        }
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next() != Some('=') {
            return Err(Error::InvalidSetting {
                setting: key,
                problem: "has no `=` after it; write settings as `key=value`".to_owned(),
            });
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            loop {
                match chars.next() {
                    Some('\'') => break,
                    Some('\\') => value.extend(chars.next()),
                    Some(c) => value.push(c),
                    None => {
                        return Err(Error::InvalidSetting {
                            setting: key,
                            problem: "has a quoted value without its closing `'`".to_owned(),
                        });
                    }
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                if c == '\\' {
                    value.extend(chars.next());
                } else {
                    value.push(c);
                }
            }
        }
        split.keys.insert(key.clone());
        match own_key(&key) {
            Some(own) => split.own.push((own, value)),
            None => {
                if !split.rest.is_empty() {
                    split.rest.push(' ');
                }
                let _ = write!(split.rest, "{key}={}", quote(&value));
            }
        }
    }
    Ok(split)
}

/// `value` single-quoted for a key-value string.
pub(crate) fn quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            quoted.push('\\');
        }
        quoted.push(c);
    }
    quoted.push('\'');
    quoted
}

/// `url` with a port given to each host that names none: libpq takes
/// `PGPORT` for those, while tokio-postgres would fill in 5432 itself.
/// `ports` are used by position, a single one for every host.
pub(crate) fn with_default_ports(url: &str, ports: &[u16]) -> String {
    let Some(start) = url.find("://").map(|at| at + 3) else {
        return url.to_owned();
    };
    let end = url[start..]
        .find(['/', '?'])
        .map_or(url.len(), |at| start + at);
    let authority = &url[start..end];
    let (userinfo, hosts) = match authority.rfind('@') {
        Some(at) => authority.split_at(at + 1),
        None => ("", authority),
    };
    if hosts.is_empty() {
        return url.to_owned();
    }
    let chunks: Vec<String> = hosts
        .split(',')
        .enumerate()
        .map(|(index, chunk)| {
            // `[::1]:5432` or `host:5432`: a colon after any IPv6 bracket.
            let after_bracket = chunk.rfind(']').map_or(chunk, |at| &chunk[at..]);
            match ports.get(index).or_else(|| ports.first()) {
                Some(port) if !after_bracket.contains(':') => format!("{chunk}:{port}"),
                _ => chunk.to_owned(),
            }
        })
        .collect();
    format!(
        "{}{userinfo}{}{}",
        &url[..start],
        chunks.join(","),
        &url[end..]
    )
}
