//! The statements in `sql/` spell two kinds of stored word as literals: event
//! kinds (a claim's `'step_started'`) and batch statuses (`b.status = 'open'`).
//! These tests read every statement and hold each such literal to its enum,
//! [`EventKind`] or [`BatchStatus`], so the SQL cannot drift from them.
//!
//! A literal is an event kind where it is compared with an `event` column
//! (`e.event = '…'`, `event IN ('…', …)`, `NOT IN`) or written to one (the
//! `event` column of an `INSERT INTO {schema}.events`). It is a batch status
//! where it is compared with `b.status`, or written to the `status` column by
//! an `INSERT INTO {schema}.batches` or an `UPDATE {schema}.batches` (as the
//! value itself, or as a `CASE`'s `THEN` or `ELSE`). The statements alias
//! the batches table `b` and no other table so, which a test checks too.

use std::collections::HashSet;

use crate::engine::{BatchStatus, EventKind};

/// A piece of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    /// A quoted literal's text, without the quotes (`''` left as written).
    Text(&'a str),
    /// A name, keyword, number or placeholder: `b.status`, `SELECT`, `$1`.
    Word(&'a str),
    /// Punctuation or an operator: `(`, `,`, `=`, `<>`.
    Symbol(&'a str),
}

/// Which enum a literal is spelt from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Event,
    Batch,
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || "_.${}".contains(c)
}

/// `sql` as tokens, without its `--` comments.
fn tokens(sql: &str) -> Vec<Token<'_>> {
    const OPERATOR: &str = "<>=!";
    let mut out = Vec::new();
    let mut rest = sql;
    while let Some(c) = rest.chars().next() {
        let len = if c.is_whitespace() {
            c.len_utf8()
        } else if rest.starts_with("--") {
            rest.find('\n').unwrap_or(rest.len())
        } else if c == '\'' {
            // The closing quote is one not doubled.
            let bytes = rest.as_bytes();
            let mut end = 1;
            while end < bytes.len() && !(bytes[end] == b'\'' && bytes.get(end + 1) != Some(&b'\''))
            {
                end += if bytes[end] == b'\'' { 2 } else { 1 };
            }
            assert!(end < bytes.len(), "an unclosed literal: {rest}");
            out.push(Token::Text(&rest[1..end]));
            end + 1
        } else if is_word(c) {
            let end = rest.find(|c| !is_word(c)).unwrap_or(rest.len());
            out.push(Token::Word(&rest[..end]));
            end
        } else if OPERATOR.contains(c) {
            let end = rest.find(|c| !OPERATOR.contains(c)).unwrap_or(rest.len());
            out.push(Token::Symbol(&rest[..end]));
            end
        } else {
            out.push(Token::Symbol(&rest[..c.len_utf8()]));
            c.len_utf8()
        };
        rest = &rest[len..];
    }
    out
}

fn is_keyword(token: Option<&Token<'_>>, keyword: &str) -> bool {
    matches!(token, Some(Token::Word(w)) if w.eq_ignore_ascii_case(keyword))
}

/// The role of a column a literal is compared with: `e.event`, `event`,
/// `b.status`.
fn compared_role(column: &str) -> Option<Role> {
    if column.rsplit('.').next() == Some("event") {
        Some(Role::Event)
    } else if column == "b.status" {
        Some(Role::Batch)
    } else {
        None
    }
}

/// The role of a column of `table` a literal is written to.
fn written_role(table: &str, column: &str) -> Option<Role> {
    match (table.rsplit('.').next(), column) {
        (Some("events"), "event") => Some(Role::Event),
        (Some("batches"), "status") => Some(Role::Batch),
        _ => None,
    }
}

/// The column the literal at `at` is compared with: `column = '…'`,
/// `'…' = column`, `column <> '…'`, or one of `column [NOT] IN ('…', …)`.
fn compared_column<'a>(tokens: &[Token<'a>], at: usize) -> Option<&'a str> {
    let before = |back: usize| at.checked_sub(back).and_then(|i| tokens.get(i));
    let is_comparison = |t: Option<&Token<'_>>| matches!(t, Some(Token::Symbol("=" | "<>")));
    if is_comparison(before(1))
        && let Some(Token::Word(column)) = before(2)
    {
        return Some(column);
    }
    if is_comparison(tokens.get(at + 1))
        && let Some(Token::Word(column)) = tokens.get(at + 2)
    {
        return Some(column);
    }
    // Back over the list's `'…' ,` to its `(`, then `IN`, `NOT`, the column.
    let mut open = at.checked_sub(1)?;
    while tokens.get(open) == Some(&Token::Symbol(",")) {
        if !matches!(tokens.get(open.checked_sub(1)?), Some(Token::Text(_))) {
            return None;
        }
        open = open.checked_sub(2)?;
    }
    if tokens.get(open) != Some(&Token::Symbol("("))
        || !is_keyword(tokens.get(open.checked_sub(1)?), "IN")
    {
        return None;
    }
    let mut column = open.checked_sub(2)?;
    if is_keyword(tokens.get(column), "NOT") {
        column = column.checked_sub(1)?;
    }
    match tokens.get(column) {
        Some(Token::Word(column)) => Some(column),
        _ => None,
    }
}

/// The literals a value expression writes: itself if it is one literal, else
/// those a `CASE` returns (after `THEN` or `ELSE`).
fn written<'a>(value: &[Token<'a>]) -> Vec<&'a str> {
    if let [Token::Text(text)] = value {
        return vec![text];
    }
    value
        .windows(2)
        .filter_map(|pair| match pair {
            [keyword, Token::Text(text)]
                if is_keyword(Some(keyword), "THEN") || is_keyword(Some(keyword), "ELSE") =>
            {
                Some(*text)
            }
            _ => None,
        })
        .collect()
}

/// The top-level comma-separated items from `start`, up to the closing
/// parenthesis or a `FROM`, `WHERE` or `RETURNING` at the same depth.
fn items<'a, 't>(tokens: &'t [Token<'a>], start: usize) -> Vec<&'t [Token<'a>]> {
    let mut out = Vec::new();
    let (mut depth, mut from) = (0_usize, start);
    for (i, token) in tokens.iter().enumerate().skip(start) {
        let ends = depth == 0
            && (*token == Token::Symbol(")")
                || ["FROM", "WHERE", "RETURNING"]
                    .iter()
                    .any(|k| is_keyword(Some(token), k)));
        if ends {
            out.push(&tokens[from..i]);
            return out;
        }
        match token {
            Token::Symbol("(") => depth += 1,
            Token::Symbol(")") => depth -= 1,
            Token::Symbol(",") if depth == 0 => {
                out.push(&tokens[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    out.push(&tokens[from..]);
    out
}

/// Literals written by the `INSERT INTO table (columns) VALUES (…)` or
/// `… SELECT …` (either after an optional `OVERRIDING … VALUE`) at `at`,
/// with the role of their column.
fn inserted<'a>(tokens: &[Token<'a>], at: usize) -> Vec<(Role, &'a str)> {
    let (Some(Token::Word(table)), Some(Token::Symbol("("))) =
        (tokens.get(at + 2), tokens.get(at + 3))
    else {
        return Vec::new();
    };
    let columns = items(tokens, at + 4);
    // The columns, the commas between them and the closing parenthesis.
    let mut after = at + 4 + columns.iter().map(|c| c.len() + 1).sum::<usize>();
    // `OVERRIDING SYSTEM VALUE` (or `USER VALUE`) may stand between them.
    if is_keyword(tokens.get(after), "OVERRIDING") {
        after += 3;
    }
    let values = if is_keyword(tokens.get(after), "VALUES") {
        items(tokens, after + 2)
    } else {
        assert!(
            is_keyword(tokens.get(after), "SELECT"),
            "INSERT INTO {table} (…) is followed by VALUES or SELECT"
        );
        items(tokens, after + 1)
    };
    columns
        .iter()
        .zip(values)
        .filter_map(|(column, value)| match column {
            [Token::Word(name)] => written_role(table, name).map(|role| (role, value)),
            _ => None,
        })
        .flat_map(|(role, value)| written(value).into_iter().map(move |text| (role, text)))
        .collect()
}

/// Literals written by the `UPDATE table [alias] SET column = value, …` at
/// `at`, with the role of their column.
fn updated<'a>(tokens: &[Token<'a>], at: usize) -> Vec<(Role, &'a str)> {
    let Some(Token::Word(table)) = tokens.get(at + 1) else {
        return Vec::new();
    };
    let Some(set) = (at + 2..at + 4).find(|&i| is_keyword(tokens.get(i), "SET")) else {
        return Vec::new();
    };
    items(tokens, set + 1)
        .into_iter()
        .filter_map(|item| match item {
            [Token::Word(column), Token::Symbol("="), value @ ..] => {
                written_role(table, column).map(|role| (role, value))
            }
            _ => None,
        })
        .flat_map(|(role, value)| written(value).into_iter().map(move |text| (role, text)))
        .collect()
}

/// Every literal of `sql` that spells an event kind or a batch status, with
/// its role, in order.
fn spelt(sql: &str) -> Vec<(Role, &str)> {
    let tokens = tokens(sql);
    let mut out = Vec::new();
    for (at, token) in tokens.iter().enumerate() {
        match token {
            Token::Text(text) => {
                if let Some(role) = compared_column(&tokens, at).and_then(compared_role) {
                    out.push((role, *text));
                }
            }
            Token::Word(word) if word.eq_ignore_ascii_case("INSERT") => {
                out.extend(inserted(&tokens, at));
            }
            Token::Word(word) if word.eq_ignore_ascii_case("UPDATE") => {
                out.extend(updated(&tokens, at));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn the_statements_spell_only_known_event_kinds_and_batch_statuses() {
    let mut kinds = HashSet::new();
    let mut statuses = HashSet::new();
    for (file, sql) in super::sql_sources() {
        for (role, text) in spelt(sql) {
            match role {
                Role::Event => {
                    let kind = EventKind::parse(text);
                    assert!(kind.is_some(), "{file}: '{text}' is not an EventKind");
                    kinds.extend(kind);
                }
                Role::Batch => {
                    let status = text.parse::<BatchStatus>();
                    assert!(status.is_ok(), "{file}: '{text}' is not a BatchStatus");
                    statuses.extend(status);
                }
            }
        }
    }
    // The scan finds what the statements are known to spell.
    assert_eq!(statuses.len(), BatchStatus::ALL.len(), "{statuses:?}");
    for kind in [
        EventKind::Started,
        EventKind::StepStarted,
        EventKind::StepWaiting,
        EventKind::Paused,
        EventKind::Resumed,
        EventKind::Cancelled,
        EventKind::Finished,
        EventKind::LateCompletionIgnored,
        EventKind::SignalReceived,
        EventKind::WaitTimedOut,
        EventKind::BatchResolved,
        EventKind::DefinitionChanged,
    ] {
        assert!(kinds.contains(&kind), "{kind} was not found: {kinds:?}");
    }
}

/// The scan's rules, one case each, and words it leaves alone: a `status`
/// of another table, a `details` key, a placeholder's comparison, a name.
#[test]
fn the_scan_reads_each_form() {
    let sql = "-- the `step_started` event: the run's start
        WITH b AS (
            UPDATE {schema}.batches b
            SET total = b.total + ($2 = 'finished')::int,
                status = CASE WHEN $2 = 'cancelled' THEN 'failed' ELSE 'open' END
            WHERE b.status <> 'open' AND 'succeeded' = b.status
            RETURNING b.id
        ), e AS (
            INSERT INTO {schema}.events (run_id, event, actor, details)
            SELECT b.id, 'batch_resolved', 'sweep', jsonb_build_object('open', b.id)
            FROM b
        )
        INSERT INTO {schema}.batches (run_id, status) VALUES ($1, 'open');
        UPDATE {schema}.steps s SET status = 'waiting' WHERE s.status = 'failed'
          AND NOT EXISTS (SELECT 1 FROM {schema}.events x
                          WHERE x.event IN ('paused', 'resumed') AND event NOT IN ('it''s'))
          AND e.event = 'finished' AND kind = 'started';
        INSERT INTO {schema}.events (id, run_id, event) OVERRIDING SYSTEM VALUE
        SELECT 7, 1, 'cancelled' FROM t";
    assert_eq!(
        spelt(sql),
        [
            (Role::Batch, "failed"),
            (Role::Batch, "open"),
            (Role::Batch, "open"),
            (Role::Batch, "succeeded"),
            (Role::Event, "batch_resolved"),
            (Role::Batch, "open"),
            (Role::Event, "paused"),
            (Role::Event, "resumed"),
            (Role::Event, "it''s"),
            (Role::Event, "finished"),
            (Role::Event, "cancelled"),
        ]
    );
}

/// Every file in `sql/` is a statement the scan reads.
#[test]
fn every_sql_file_is_scanned() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/pg/sql");
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .expect("the sql directory")
        .map(|entry| {
            entry
                .expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    on_disk.sort();
    let mut scanned: Vec<&str> = super::sql_sources().iter().map(|(file, _)| *file).collect();
    scanned.sort_unstable();
    assert_eq!(on_disk, scanned);
}

/// `b.status` is a batch's status: the statements alias `{schema}.batches`
/// as `b` or not at all, no other table as `b`, and a CTE named `b` reads
/// the batches.
#[test]
fn only_the_batches_table_is_aliased_b() {
    for (file, sql) in super::sql_sources() {
        let tokens = tokens(sql);
        for (at, pair) in tokens.windows(2).enumerate() {
            if let [Token::Word(table), Token::Word(alias)] = pair {
                let is_alias = alias.chars().all(|c| c.is_ascii_lowercase() || c == '_');
                if table.starts_with("{schema}.") && is_alias {
                    assert_eq!(
                        table.ends_with(".batches"),
                        *alias == "b",
                        "{file}: {table} {alias}"
                    );
                }
            }
            if pair == [Token::Word("b"), Token::Word("AS")] {
                let first_table = tokens[at..].iter().find_map(|t| match t {
                    Token::Word(w) if w.starts_with("{schema}.") => Some(*w),
                    _ => None,
                });
                assert_eq!(first_table, Some("{schema}.batches"), "{file}: the CTE b");
            }
        }
    }
}
