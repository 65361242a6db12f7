//! The SQL/JSON paths the memory store reads for `RunFilter::input_path`:
//! the subset operators write most, evaluated as PostgreSQL's `@?` does in
//! lax mode (a member accessor on an array applies to each element).
//!
//! Grammar: `$` then accessors (`.name`, `."name"`, `.*`, `[*]`, `[n]`),
//! then at most one filter `? (@<accessors> <op> <literal>)` with `op` one
//! of `==`, `!=`, `<>`, `<`, `<=`, `>`, `>=` and a literal a string in
//! double quotes, a number, `true`, `false` or `null`, or
//! `? (exists(@<accessors>))`. Anything else is
//! [`Error::InvalidInputPath`], though PostgreSQL may read it: a test that
//! needs more runs against Postgres.

use pgbus_runtime::Error;
use serde_json::Value;

/// One step down a value.
#[derive(Debug, Clone, PartialEq)]
enum Accessor {
    /// `.name`
    Member(String),
    /// `.*`
    AnyMember,
    /// `[*]`
    AnyElement,
    /// `[n]`
    Element(usize),
}

/// A comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// A filter's path from `@`, and its comparison (`None`: `exists`).
type Filter = (Vec<Accessor>, Option<(Op, Value)>);

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Path {
    accessors: Vec<Accessor>,
    filter: Option<Filter>,
}

impl Path {
    /// Reads `text`. Errors: [`Error::InvalidInputPath`].
    pub(crate) fn parse(text: &str) -> Result<Self, Error> {
        let fail = |reason: &str| Error::InvalidInputPath {
            path: text.to_owned(),
            reason: reason.to_owned(),
        };
        let mut rest = text.trim();
        rest = rest
            .strip_prefix('$')
            .ok_or_else(|| fail("a path starts with `$`"))?;
        let accessors = read_accessors(&mut rest).map_err(&fail)?;
        let rest = rest.trim();
        if rest.is_empty() {
            return Ok(Self {
                accessors,
                filter: None,
            });
        }
        let inner = rest
            .strip_prefix('?')
            .map(str::trim)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| fail("expected `? (...)` or the end of the path"))?
            .trim();
        if let Some(exists) = inner
            .strip_prefix("exists")
            .map(str::trim)
            .and_then(|r| r.strip_prefix('('))
            .and_then(|r| r.strip_suffix(')'))
        {
            let mut at = exists
                .trim()
                .strip_prefix('@')
                .ok_or_else(|| fail("`exists` takes a path from `@`"))?;
            let inner_accessors = read_accessors(&mut at).map_err(&fail)?;
            if !at.trim().is_empty() {
                return Err(fail("unexpected text in `exists(...)`"));
            }
            return Ok(Self {
                accessors,
                filter: Some((inner_accessors, None)),
            });
        }
        let mut at = inner
            .strip_prefix('@')
            .ok_or_else(|| fail("a filter compares `@`"))?;
        let inner_accessors = read_accessors(&mut at).map_err(&fail)?;
        let at = at.trim_start();
        let ops = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<>", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ];
        let (op, literal) = ops
            .iter()
            .find_map(|(token, op)| at.strip_prefix(token).map(|r| (*op, r.trim())))
            .ok_or_else(|| fail("expected a comparison (`==`, `!=`, `<`, `<=`, `>`, `>=`)"))?;
        let literal: Value = serde_json::from_str(literal)
            .ok()
            .filter(|v: &Value| !v.is_array() && !v.is_object())
            .ok_or_else(|| fail("expected a string, number, `true`, `false` or `null`"))?;
        Ok(Self {
            accessors,
            filter: Some((inner_accessors, Some((op, literal)))),
        })
    }

    /// Whether `input @? path` holds.
    pub(crate) fn matches(&self, input: &Value) -> bool {
        let items = walk(vec![input], &self.accessors);
        match &self.filter {
            None => !items.is_empty(),
            Some((inner, test)) => items.into_iter().any(|item| {
                let found = walk(vec![item], inner);
                match test {
                    None => !found.is_empty(),
                    Some((op, literal)) => found.into_iter().any(|v| compare(v, *op, literal)),
                }
            }),
        }
    }
}

/// Reads accessors from the front of `rest`.
fn read_accessors(rest: &mut &str) -> Result<Vec<Accessor>, &'static str> {
    let mut out = Vec::new();
    loop {
        let text = rest.trim_start();
        if let Some(after) = text.strip_prefix(".*") {
            out.push(Accessor::AnyMember);
            *rest = after;
        } else if let Some(after) = text.strip_prefix(".\"") {
            let end = after
                .find('"')
                .ok_or("an unterminated quoted member name")?;
            out.push(Accessor::Member(after[..end].to_owned()));
            *rest = &after[end + 1..];
        } else if let Some(after) = text.strip_prefix('.') {
            let end = after
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            if end == 0 {
                return Err("a member name after `.`");
            }
            out.push(Accessor::Member(after[..end].to_owned()));
            *rest = &after[end..];
        } else if let Some(after) = text.strip_prefix('[') {
            let end = after.find(']').ok_or("an unterminated `[`")?;
            let index = after[..end].trim();
            if index == "*" {
                out.push(Accessor::AnyElement);
            } else {
                out.push(Accessor::Element(
                    index
                        .parse()
                        .map_err(|_| "an array index (`[0]`) or `[*]`")?,
                ));
            }
            *rest = &after[end + 1..];
        } else {
            *rest = text;
            return Ok(out);
        }
    }
}

/// The items `accessors` reach from `items`, in lax mode.
fn walk<'v>(mut items: Vec<&'v Value>, accessors: &[Accessor]) -> Vec<&'v Value> {
    for accessor in accessors {
        let mut next = Vec::new();
        for item in items {
            // Lax: a member accessor applies to each element of an array.
            let unwrapped: Vec<&Value> = match (accessor, item) {
                (Accessor::Member(_) | Accessor::AnyMember, Value::Array(elements)) => {
                    elements.iter().collect()
                }
                _ => vec![item],
            };
            for value in unwrapped {
                match (accessor, value) {
                    (Accessor::Member(name), Value::Object(members)) => {
                        next.extend(members.get(name));
                    }
                    (Accessor::AnyMember, Value::Object(members)) => next.extend(members.values()),
                    (Accessor::AnyElement, Value::Array(elements)) => next.extend(elements),
                    (Accessor::Element(i), Value::Array(elements)) => next.extend(elements.get(*i)),
                    // Lax: `[*]` and `[0]` on a non-array are the item itself.
                    (Accessor::AnyElement | Accessor::Element(0), other) => next.push(other),
                    _ => {}
                }
            }
        }
        items = next;
    }
    items
}

/// `value op literal`, as SQL/JSON compares: numbers with numbers, strings
/// with strings, booleans and null by equality; other pairs are unknown
/// (false).
fn compare(value: &Value, op: Op, literal: &Value) -> bool {
    use std::cmp::Ordering;
    let ordering = match (value, literal) {
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Bool(a), Value::Bool(b)) if matches!(op, Op::Eq | Op::Ne) => Some(a.cmp(b)),
        (Value::Null, Value::Null) if matches!(op, Op::Eq | Op::Ne) => Some(Ordering::Equal),
        _ => None,
    };
    ordering.is_some_and(|o| match op {
        Op::Eq => o == Ordering::Equal,
        Op::Ne => o != Ordering::Equal,
        Op::Lt => o == Ordering::Less,
        Op::Le => o != Ordering::Greater,
        Op::Gt => o == Ordering::Greater,
        Op::Ge => o != Ordering::Less,
    })
}

#[cfg(test)]
mod tests;
