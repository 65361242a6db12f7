//! The option-list reader on source text: each malformed list gets the
//! expected messages, each spanned at the expected token inside its attribute.

use darling::Error;
use proc_macro2::Span;

use crate::parse::options::Place;
use crate::{parse, validate};

/// Parses and validates `source` (`#[workflow(...)] impl W { ... }`) and returns
/// each error as (message, the source text it points at). Fails when an error
/// has no span or points outside every attribute and `removed_step!` of the
/// source.
fn check(source: &str) -> Vec<(String, String)> {
    let mut item: syn::ItemImpl = syn::parse_str(source).expect("test input is an impl");
    let position = item
        .attrs
        .iter()
        .position(|attr| attr.path().is_ident("workflow"))
        .expect("a #[workflow]");
    let attr = item.attrs.remove(position);
    let args = match attr.meta {
        syn::Meta::List(list) => list.tokens,
        _ => proc_macro2::TokenStream::new(),
    };
    let mut errors = Error::accumulator();
    let raw = parse::workflow(args, &mut item, &mut errors);
    let _ = validate::workflow(raw, &mut errors);
    let regions = regions(source);
    let found = match errors.finish() {
        Ok(()) => Vec::new(),
        Err(error) => error.into_iter().collect(),
    };
    found
        .into_iter()
        .map(|error| {
            let message = error.to_string();
            let span: Span = error
                .explicit_span()
                .unwrap_or_else(|| panic!("no span: {message}"));
            let range = span.byte_range();
            assert!(
                regions
                    .iter()
                    .any(|region| region.start <= range.start && range.end <= region.end)
                    && !range.is_empty(),
                "`{message}` points at {range:?}, outside every attribute of {source}"
            );
            (message, span.source_text().unwrap_or_default())
        })
        .collect()
}

/// The byte ranges of the attributes and `removed_step!(...)` calls in `source`.
fn regions(source: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = source.as_bytes();
    let mut out = Vec::new();
    for (start, _) in source
        .match_indices("#[")
        .chain(source.match_indices("removed_step!("))
    {
        let mut depth = 0_i32;
        for (at, byte) in bytes.iter().enumerate().skip(start) {
            match byte {
                b'[' | b'(' | b'{' => depth += 1,
                b']' | b')' | b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push(start..at + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn step(attr: &str) -> Vec<(String, String)> {
    check(&format!(
        "#[workflow] impl W {{ #[step({attr})] async fn charge(&self, cx: &mut StepCx<()>) \
         -> StepResult {{ Ok(Flow::Complete) }} fn opted_out(&self, cx: &StepCx<()>) -> bool {{ false }} }}"
    ))
}

fn workflow(args: &str) -> Vec<(String, String)> {
    check(&format!(
        "#[workflow({args})] impl W {{ #[step] async fn charge(&self, cx: &mut StepCx<()>) \
         -> StepResult {{ Ok(Flow::Complete) }} }}"
    ))
}

fn body(items: &str) -> Vec<(String, String)> {
    check(&format!(
        "#[workflow] {items} impl W {{ #[step] async fn charge(&self, cx: &mut StepCx<()>) \
         -> StepResult {{ Ok(Flow::Complete) }} }}"
    ))
}

fn gravestone(call: &str) -> Vec<(String, String)> {
    check(&format!(
        "#[workflow] impl W {{ {call}; #[step] async fn charge(&self, cx: &mut StepCx<()>) \
         -> StepResult {{ Ok(Flow::Complete) }} }}"
    ))
}

/// Asserts the (message, token) pairs, in order.
#[track_caller]
fn expect(found: &[(String, String)], expected: &[(&str, &str)]) {
    let found: Vec<(&str, &str)> = found
        .iter()
        .map(|(message, at)| (message.as_str(), at.as_str()))
        .collect();
    assert_eq!(found, expected);
}

#[test]
fn nothing_after_the_equals_sign_names_the_option_and_its_shape_at_the_equals_sign() {
    expect(
        &step("skip_if = "),
        &[(
            "`skip_if` needs a method path, e.g. `skip_if = Self::opted_out`",
            "=",
        )],
    );
    expect(
        &step("on_exception(action = )"),
        &[(
            "`action` needs `pause`, `reattempt`, `cancel` or `skip` in quotes, e.g. `action = \"pause\"`",
            "=",
        )],
    );
    expect(
        &step("wait = , timeout = \"1m\""),
        &[("`wait` needs a duration, e.g. `wait = \"5s\"`", "=")],
    );
    expect(
        &step("wait_for(name = )"),
        &[(
            "`name` needs the signal's name in quotes, e.g. `name = \"payment.settled\"`",
            "=",
        )],
    );
    expect(
        &workflow("input = , priority = , concurrency = , rate_limit = "),
        &[
            ("`input` needs a type, e.g. `input = Order`", "="),
            (
                "`priority` needs an integer from -32768 to 32767, e.g. `priority = 5`",
                "=",
            ),
            (
                "`concurrency` needs a whole number of slots, e.g. `concurrency = 10`",
                "=",
            ),
            (
                "`rate_limit` needs a rate in quotes, e.g. `rate_limit = \"10/1s\"`",
                "=",
            ),
        ],
    );
}

#[test]
fn a_malformed_value_does_not_set_off_the_rules_about_a_missing_option() {
    // `on_timeout` needs `wait_timeout`, which was written, malformed.
    expect(
        &step("wait_for = \"paid\", wait_timeout = , on_timeout = \"skip\""),
        &[(
            "`wait_timeout` needs a duration, e.g. `wait_timeout = \"1h\"`",
            "=",
        )],
    );
    // A policy whose `action` is malformed is not also "missing an action".
    expect(
        &body("#[on_exception(action = )]"),
        &[(
            "`action` needs `pause`, `reattempt`, `cancel` or `skip` in quotes, e.g. `action = \"pause\"`",
            "=",
        )],
    );
    // A `wait_for(...)` whose list is malformed is not also "missing a name".
    expect(
        &step("wait_for(= \"paid\")"),
        &[(
            "`=` with no option name before it; write e.g. `name = \"payment.settled\"`",
            "=",
        )],
    );
}

#[test]
fn a_missing_comma_names_both_options_at_the_second() {
    expect(
        &step("wait = \"5s\" timeout = \"1m\""),
        &[(
            "expected `,` between options: `wait = \"5s\", timeout = \"1m\"`",
            "timeout",
        )],
    );
    expect(
        &step("skip_if = Self::opted_out on_exception(action = \"skip\")"),
        &[(
            "expected `,` between options: `skip_if = Self::opted_out, on_exception(action = \"skip\")`",
            "on_exception",
        )],
    );
    expect(
        &step("on_exception(action = \"skip\") wait = \"5s\""),
        &[(
            "expected `,` between options: `on_exception(action = \"skip\"), wait = \"5s\"`",
            "wait",
        )],
    );
    expect(
        &step("wait_for(name = \"paid\" matches = Self::opted_out)"),
        &[(
            "expected `,` between options: `name = \"paid\", matches = Self::opted_out`",
            "matches",
        )],
    );
    expect(
        &workflow("input = Vec<u8> queue = \"q\""),
        &[(
            "expected `,` between options: `input = Vec<u8>, queue = \"q\"`",
            "queue",
        )],
    );
    expect(
        &step("wait = \"5s\"; timeout = \"1m\""),
        &[(
            "options are separated by `,`, not `;`: `wait = \"5s\", timeout = \"1m\"`",
            ";",
        )],
    );
}

#[test]
fn a_value_that_is_not_one_expression_is_refused_at_the_first_stray_token() {
    expect(
        &step("wait = = \"5s\""),
        &[("`=` is written twice; write `wait = \"5s\"`", "=")],
    );
    expect(
        &step("wait = \"5s\" \"6s\""),
        &[(
            "unexpected `\"6s\"` after the value of `wait`; it takes one value, a duration, e.g. `wait = \"5s\"`",
            "\"6s\"",
        )],
    );
    expect(
        &step("queue = a b"),
        &[(
            "unexpected `b` after the value of `queue`; it takes one value, a queue name in quotes, e.g. `queue = \"payments\"`",
            "b",
        )],
    );
    expect(
        &step("wait = ;"),
        &[("`wait` needs a duration, e.g. `wait = \"5s\"`", ";")],
    );
    expect(
        &step("wait = \"5s\" = \"6s\""),
        &[(
            "unexpected `=` in the value of `wait`; it takes one value, a duration, e.g. `wait = \"5s\"`",
            "=",
        )],
    );
}

#[test]
fn names_that_are_not_one_word_and_stray_commas_are_refused_in_place() {
    expect(
        &step("self::wait = \"5s\""),
        &[(
            "an option name is one word: write `wait`, without `self::`",
            "self",
        )],
    );
    expect(
        &step("\"wait\" = \"5s\""),
        &[(
            "option names are written without quotes: `wait = \"5s\"`",
            "\"wait\"",
        )],
    );
    expect(
        &step("= \"5s\""),
        &[(
            "`=` with no option name before it; write e.g. `wait = \"5s\"`",
            "=",
        )],
    );
    expect(
        &step(", wait = \"5s\",, timeout = \"1m\","),
        &[
            ("the `#[step]` options start with a `,`; remove it", ","),
            (
                "two `,` in a row; remove one: `wait = \"5s\", timeout = \"1m\"`",
                ",",
            ),
        ],
    );
    expect(
        &workflow("serde::rename = \"x\""),
        &[(
            "unknown `#[workflow]` option `serde::rename`; expected `crate`, `name`, `input`, `output`, `queue`, `priority`, `cancel_if`, `on_exception`, `schedule`, `timezone`, `catch_up`, `concurrency`, `key`, `key_concurrency`, `slot`, `rate_limit`, `key_rate_limit`, `deadline` or `on_deadline`",
            "serde::rename",
        )],
    );
    expect(
        &step("wait \"5s\", timeout: \"1m\""),
        &[
            (
                "expected `=` between `wait` and its value: `wait = \"5s\"`",
                "\"5s\"",
            ),
            ("write `timeout = \"1m\"` with `=`, not `:`", ":"),
        ],
    );
    expect(
        &step("(wait = \"5s\")"),
        &[(
            "expected an option name, found `(...)`; `#[step]` options are written `name = value`, with no brackets around them; write `wait = \"5s\"`",
            "(",
        )],
    );
}

#[test]
fn lists_in_the_wrong_delimiter_or_with_more_after_them_are_refused() {
    expect(
        &step("on_exception[action = \"pause\"]"),
        &[(
            "write `on_exception(action = \"pause\")` with parentheses, not `on_exception[...]`",
            "[",
        )],
    );
    // Read as if in parentheses: the options inside are checked too.
    expect(
        &step("on_exception{action = }"),
        &[
            (
                "write `on_exception(...)` with parentheses, not `on_exception{...}`",
                "{",
            ),
            (
                "`action` needs `pause`, `reattempt`, `cancel` or `skip` in quotes, e.g. `action = \"pause\"`",
                "=",
            ),
        ],
    );
    expect(
        &step("on_exception(action = \"pause\") = \"skip\""),
        &[(
            "`on_exception(...)` takes no `= value` after it; remove `= \"skip\"`, or write `on_exception = \"skip\"` instead of the list",
            "=",
        )],
    );
    expect(
        &step("on_exception(action = \"pause\") x"),
        &[(
            "unexpected `x` after `on_exception(action = \"pause\")`; options are separated by `,`",
            "x",
        )],
    );
    expect(
        &body("#[on_exception[action = \"pause\"]]"),
        &[(
            "write `#[on_exception(action = \"pause\")]` with parentheses, not `#[on_exception[...]]`",
            "[",
        )],
    );
}

#[test]
fn error_type_lists_are_read_item_by_item() {
    let policy = |matching: &str| {
        step(&format!(
            "on_exception(matching({matching}), action = \"skip\")"
        ))
    };
    expect(
        &policy(","),
        &[(
            "`matching(...)` holds only `,` and names no error type; list at least one, or leave `matching` out to match every error",
            ",",
        )],
    );
    expect(
        &policy(", E"),
        &[("`matching(...)` starts with a `,`; remove it", ",")],
    );
    expect(
        &policy("E,,F"),
        &[("two `,` in a row; remove one: `E, F`", ",")],
    );
    expect(&policy("E,,"), &[("two `,` in a row; remove one", ",")]);
    expect(
        &policy("E F"),
        &[("expected `,` between error types: `E, F`", "F")],
    );
    expect(
        &policy("\"CardDeclined\""),
        &[(
            "write the error type without quotes: `matching(CardDeclined)`",
            "\"CardDeclined\"",
        )],
    );
    expect(&policy("HashMap<String, u8>, std::io::Error"), &[]);
}

#[test]
fn every_error_of_a_list_is_reported_at_once() {
    expect(
        &step("wait = , skip_if = , queue = a b, on_exception(action = )"),
        &[
            ("`wait` needs a duration, e.g. `wait = \"5s\"`", "="),
            (
                "`skip_if` needs a method path, e.g. `skip_if = Self::opted_out`",
                "=",
            ),
            (
                "unexpected `b` after the value of `queue`; it takes one value, a queue name in quotes, e.g. `queue = \"payments\"`",
                "b",
            ),
            (
                "`action` needs `pause`, `reattempt`, `cancel` or `skip` in quotes, e.g. `action = \"pause\"`",
                "=",
            ),
        ],
    );
}

#[test]
fn value_errors_name_the_option() {
    expect(
        &step("wait, skip_if, priority, on_timeout, queue = payments"),
        &[
            ("`wait` needs a duration, e.g. `wait = \"5s\"`", "wait"),
            (
                "`skip_if` needs a method path, e.g. `skip_if = Self::opted_out`",
                "skip_if",
            ),
            (
                "`priority` needs an integer from -32768 to 32767, e.g. `priority = 5`",
                "priority",
            ),
            (
                "`on_timeout` needs `pause`, `cancel`, `skip` or `run` in quotes, e.g. `on_timeout = \"skip\"`",
                "on_timeout",
            ),
            (
                "`queue` needs a queue name in quotes: write `queue = \"payments\"`",
                "payments",
            ),
        ],
    );
    expect(
        &step("on_exception(action = \"retry\", wait = 5)"),
        &[
            (
                "unknown `action` value `retry`; expected `pause`, `reattempt`, `cancel` or `skip`; did you mean `reattempt`?",
                "\"retry\"",
            ),
            (
                "`wait` needs a duration in quotes with a unit, e.g. `wait = \"5s\"` or `wait = \"5ms\"`",
                "5",
            ),
        ],
    );
    expect(
        &step("wait(\"5s\")"),
        &[(
            "write `wait = \"5s\"`, not `wait(...)`: parentheses are only for `on_exception(...)`, `wait_for(...)` and `matching(...)`",
            "wait",
        )],
    );
}

#[test]
fn a_bare_word_is_given_back_in_quotes_only_when_the_option_takes_it() {
    expect(
        &workflow("slot = run, on_deadline = run"),
        &[
            (
                "`slot` needs `step` or `run` in quotes: write `slot = \"run\"`",
                "run",
            ),
            (
                "`on_deadline` needs `cancel` or `pause` in quotes, e.g. `on_deadline = \"pause\"`",
                "run",
            ),
        ],
    );
    // A constant's name is not its value: `name = "NAME"` would be the wrong name.
    expect(
        &workflow("name = NAME"),
        &[(
            "`name` needs the workflow's durable name in quotes: a macro reads the attribute's \
             tokens, not the value of the constant `NAME`; write that value itself, e.g. \
             `name = \"orders.fulfil\"`",
            "NAME",
        )],
    );
}

#[test]
fn a_type_option_keeps_its_commas_and_strings() {
    expect(
        &workflow("input = HashMap<String, u32>, output = \"Vec<u8>\""),
        &[],
    );
    expect(&workflow("input = fn(u8) -> Vec<u8>, queue = \"q\""), &[]);
    expect(
        &workflow("input Order"),
        &[(
            "expected `=` between `input` and its value: `input = Order`",
            "Order",
        )],
    );
}

#[test]
fn gravestone_arguments_are_read_token_by_token() {
    expect(
        &gravestone("removed_step!(legacy_check, other_check)"),
        &[(
            "`removed_step!` takes one name; write one `removed_step!` for each removed step: `removed_step!(legacy_check); removed_step!(other_check);`",
            "other_check",
        )],
    );
    expect(
        &gravestone("removed_step!(legacy_check,)"),
        &[(
            "`removed_step!` takes one name; remove the trailing `,`: `removed_step!(legacy_check)`",
            ",",
        )],
    );
    expect(
        &gravestone("removed_step!(name = \"legacy.check\")"),
        &[(
            "`removed_step!` takes the name alone, with no `=`: `removed_step!(\"legacy.check\")`",
            "=",
        )],
    );
    expect(
        &gravestone("removed_step!(5)"),
        &[(
            "`removed_step!` takes the removed step's durable name, e.g. `removed_step!(legacy_check)` or `removed_step!(\"legacy.check\")`; a name is an identifier or a string in quotes, not `5`",
            "5",
        )],
    );
    expect(
        &gravestone("removed_step!(Self::legacy)"),
        &[(
            "`removed_step!` takes the step's durable name, not a path, e.g. `removed_step!(legacy_check)` or `removed_step!(\"legacy.check\")`",
            ":",
        )],
    );
}

#[test]
fn every_option_of_every_place_has_a_shape() {
    for place in Place::ALL {
        for name in place.allowed() {
            let shape = pgbus_core::vocab::options::shape(place.shapes(), name);
            assert!(shape.is_some(), "{name} at {place:?} has no shape");
        }
    }
}

/// Lists of pieces in every order, commas left out, doubled and misplaced:
/// none panics, and every error of every one points inside its attribute
/// (`check` asserts it).
#[test]
fn shuffled_lists_never_panic_and_every_error_points_inside_its_attribute() {
    const PIECES: &[&str] = &[
        "wait",
        "=",
        ",",
        ",",
        "\"5s\"",
        "5",
        "skip_if",
        "Self::opted_out",
        "on_exception",
        "(action = )",
        "(matching(E F), action = \"skip\")",
        "[]",
        "{}",
        "queue",
        "a b",
        ";",
        ":",
        "::",
        "wait_for",
        "(name = \"paid\" matches = )",
        "\"wait\"",
        "priority",
        "-",
        "timeout",
        "(,)",
        "x",
        "Vec<u8>",
        "<",
        ">",
        "->",
        "#",
        "on_timeout",
        "\"run!\"",
        "rate_limit",
    ];
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = |bound: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % bound as u64).unwrap_or(0)
    };
    for _ in 0..1500 {
        let len = next(8);
        let pieces: Vec<&str> = (0..len).map(|_| PIECES[next(PIECES.len())]).collect();
        let list = pieces.join(" ");
        let _ = step(&list);
        let _ = workflow(&list);
        let _ = body(&format!("#[on_exception({list})]"));
        let _ = step(&format!("on_exception({list})"));
        let _ = step(&format!(
            "on_exception(matching({list}), action = \"skip\")"
        ));
        let _ = gravestone(&format!("removed_step!({list})"));
    }
}

mod echo;
