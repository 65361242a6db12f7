//! Messages that give the user's own code back as the fix: only code that
//! reads as code, whole when it is known, and the separators' messages once
//! the item after them is read.

use super::{expect, step};

#[test]
fn a_fix_gives_back_the_users_own_code_only_when_it_reads_as_code() {
    // The next option is read before the missing comma is reported, so the
    // message shows it whole; one that is itself malformed shows its start.
    expect(
        &step("wait = \"5s\" timeout = \"1m\" queue = \"q\""),
        &[
            (
                "expected `,` between options: `wait = \"5s\", timeout = \"1m\"`",
                "timeout",
            ),
            (
                "expected `,` between options: `timeout = \"1m\", queue = \"q\"`",
                "queue",
            ),
        ],
    );
    expect(
        &step("wait = \"5s\" timeout = @"),
        &[
            (
                "expected `,` between options: `wait = \"5s\", timeout = ...`",
                "timeout",
            ),
            ("`timeout` needs a duration, e.g. `timeout = \"1m\"`", "@"),
        ],
    );
    expect(
        &step("wait = \"5s\",,"),
        &[("two `,` in a row; remove one", ",")],
    );
    // A value that is not one is not given back as the fix.
    expect(
        &step("wait: @"),
        &[
            ("write `wait = \"5s\"` with `=`, not `:`", ":"),
            ("`wait` needs a duration, e.g. `wait = \"5s\"`", "@"),
        ],
    );
    expect(
        &step("wait = ="),
        &[(
            "`=` is written twice; `wait` needs a duration, e.g. `wait = \"5s\"`",
            "=",
        )],
    );
    expect(
        &step("on_exception(action = \"pause\") ="),
        &[(
            "`on_exception(...)` takes no `= value` after it; remove the `=`",
            "=",
        )],
    );
    expect(
        &step("(wait =)"),
        &[(
            "expected an option name, found `(...)`; `#[step]` options are written `name = value`, with no brackets around them; e.g. `wait = \"5s\"`",
            "(",
        )],
    );
    expect(
        &step("on_exception(matching(CardDeclined), action = \"pause\") x"),
        &[(
            "unexpected `x` after `on_exception(matching(CardDeclined), action = \"pause\")`; options are separated by `,`",
            "x",
        )],
    );
}

#[test]
fn a_match_arrow_and_a_type_written_twice_get_their_own_words() {
    expect(
        &step("wait => \"5s\", timeout => \"1m\""),
        &[
            ("write `wait = \"5s\"` with `=`, not `=>`", "="),
            ("write `timeout = \"1m\"` with `=`, not `=>`", "="),
        ],
    );
    expect(
        &step("on_exception(matching(CardDeclined CardDeclined, Timeout), action = \"pause\")"),
        &[(
            "`CardDeclined` is written twice in `matching(...)`; give it once",
            "CardDeclined",
        )],
    );
}
