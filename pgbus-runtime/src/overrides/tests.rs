//! Overrides: read from code and JSON, checked with the macro's rules,
//! applied to a definition with their own options digest.

use serde_json::json;

use super::*;
use crate::prelude::*;

struct Fulfil;

#[workflow(name = "orders.fulfil", input = u32, concurrency = 8)]
impl Fulfil {
    #[step(timeout = "30s")]
    async fn charge(&self, _cx: &mut StepCx<u32>) {}

    removed_step!(weigh);

    #[step(wait_for = "payment.settled", wait_timeout = "1h", queue = "ship")]
    async fn ship(&self, _cx: &mut StepCx<u32>) {}

    #[fan_out]
    async fn notify(&self, _cx: &mut StepCx<u32>, _fan: &mut FanOut) {}
}

const DEF: &WorkflowDefinition = <Fulfil as Workflow>::DEFINITION;

fn refusal(error: Error) -> (String, Option<String>, &'static str, String) {
    match error {
        Error::InvalidOverride(refused) => (
            refused.workflow,
            refused.step,
            refused.option,
            refused.reason,
        ),
        other => panic!("not an override refusal: {other:?}"),
    }
}

#[test]
fn the_builder_and_json_give_the_same_overrides() {
    let code = Overrides::new()
        .workflow("orders.fulfil", |w| {
            w.queue("orders-staging")
                .priority(5)
                .concurrency(4)
                .rate_limit("10/1s")
                .deadline("1h")
        })
        .step("orders.fulfil", "charge", |s| s.timeout("2m").wait("0s"))
        .workflow("orders.fulfil", |w| w.key_concurrency(1));
    let json = Overrides::from_json_str(
        r#"{"workflows": {"orders.fulfil": {
            "queue": "orders-staging", "priority": 5, "concurrency": 4,
            "key_concurrency": 1, "rate_limit": "10/1s", "deadline": "1h",
            "steps": {"charge": {"timeout": "2m", "wait": "0s"}}}}}"#,
    )
    .expect("valid overrides");
    assert_eq!(code, json);
    assert_eq!(code.workflows().collect::<Vec<_>>(), ["orders.fulfil"]);
    assert!(!code.is_empty());
    assert!(Overrides::from_json_str("{}").expect("empty").is_empty());
    // Serialized back, the same shape.
    let text = serde_json::to_string(&code).expect("serializes");
    assert_eq!(Overrides::from_json_str(&text).expect("reads back"), code);
}

#[test]
fn unknown_keys_and_wrong_shapes_are_refused_with_where() {
    for (text, expected) in [
        (
            r#"{"workflows": {"w": {"steps": {"s": {"timout": "1s"}}}}}"#,
            "unknown field `timout`, expected one of `wait`, `timeout`",
        ),
        (r#"{"workflow": {}}"#, "unknown field `workflow`"),
        (
            r#"{"workflows": {"w": {"concurency": 2}}}"#,
            "unknown field `concurency`",
        ),
        (
            r#"{"workflows": {"w": {"priority": "high"}}}"#,
            "invalid type: string \"high\", expected i64",
        ),
        (r#"{"workflows": {"#, "EOF while parsing"),
        // A name given twice would drop the first entry's overrides.
        (
            r#"{"workflows": {"w": {"queue": "a"}, "w": {"priority": 1}}}"#,
            "`w` is given twice; give each name once",
        ),
        (
            r#"{"workflows": {"w": {"steps": {"s": {"wait": "1s"}, "s": {"timeout": "1m"}}}}}"#,
            "`s` is given twice; give each name once",
        ),
    ] {
        match Overrides::from_json_str(text) {
            Err(Error::InvalidSetting { setting, problem }) => {
                assert_eq!(setting, "overrides");
                assert!(problem.contains(expected), "{text}: {problem}");
                assert!(problem.contains("line 1"), "where: {problem}");
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn bad_values_are_refused_when_read_naming_step_and_option() {
    let cases = [
        (
            json!({"steps": {"charge": {"timeout": "0s"}}}),
            Some("charge"),
            "timeout",
            "`timeout` must be greater than zero",
        ),
        (
            json!({"steps": {"charge": {"wait": "5x"}}}),
            Some("charge"),
            "wait",
            "invalid `wait`: ",
        ),
        (
            json!({"steps": {"ship": {"wait_timeout": "0ms"}}}),
            Some("ship"),
            "wait_timeout",
            "`wait_timeout` must be greater than zero",
        ),
        (
            json!({"queue": "orders staging"}),
            None,
            "queue",
            "`queue` cannot contain whitespace",
        ),
        (
            json!({"steps": {"ship": {"queue": ""}}}),
            Some("ship"),
            "queue",
            "`queue` cannot be empty",
        ),
        (
            json!({"priority": 40000}),
            None,
            "priority",
            "`priority` must fit in `i16`",
        ),
        (
            json!({"concurrency": 0}),
            None,
            "concurrency",
            "a limit of 0 would never run a step",
        ),
        (
            json!({"key_concurrency": -2}),
            None,
            "key_concurrency",
            "`key_concurrency` cannot be negative",
        ),
        (
            json!({"rate_limit": "10"}),
            None,
            "rate_limit",
            "invalid `rate_limit`: a rate is `<count>/<period>`",
        ),
        (
            json!({"deadline": "0s"}),
            None,
            "deadline",
            "`deadline` must be greater than zero",
        ),
    ];
    for (workflow, step, option, reason) in cases {
        let text = json!({ "workflows": { "orders.fulfil": workflow } }).to_string();
        let error = Overrides::from_json_str(&text).expect_err(&text);
        let message = error.to_string();
        let (w, s, o, r) = refusal(error);
        assert_eq!(
            (w.as_str(), s.as_deref(), o),
            ("orders.fulfil", step, option),
            "{text}"
        );
        assert!(r.starts_with(reason), "{text}: {r}");
        assert!(
            message.starts_with("override of workflow `orders.fulfil`"),
            "{message}"
        );
    }
}

#[test]
fn names_are_checked_against_the_definition() {
    let cases = [
        (
            Overrides::new().step("orders.fulfil", "chrage", |s| s.timeout("1m")),
            "step",
            "this workflow has no step `chrage` (its steps: `charge`, `ship`, `notify`)",
        ),
        (
            Overrides::new().step("orders.fulfil", "weigh", |s| s.wait("1s")),
            "step",
            "step `weigh` is a gravestone (`removed_step!`)",
        ),
        (
            Overrides::new().step("orders.fulfil", "charge", |s| s.wait_timeout("1m")),
            "wait_timeout",
            "`wait_timeout` needs `wait_for`",
        ),
        (
            Overrides::new().step("orders.fulfil", "notify", |s| s.wait_timeout("1m")),
            "wait_timeout",
            "`wait_timeout` is not allowed on a `#[fan_out]`",
        ),
        (
            Overrides::new().step("orders.fulfil", "ghost", |s| s),
            "step",
            "this workflow has no step `ghost`",
        ),
    ];
    for (overrides, option, reason) in cases {
        let (_, step, o, r) = refusal(overrides.apply(DEF).expect_err("refused"));
        assert!(step.is_some());
        assert_eq!(o, option);
        assert!(r.starts_with(reason), "{r}");
    }
    let (_, _, _, reason) = refusal(
        Overrides::new()
            .step("orders.fulfil", "chrage", |s| s.timeout("1m"))
            .apply(DEF)
            .expect_err("refused"),
    );
    assert!(reason.ends_with("did you mean `charge`?"), "{reason}");
}

#[test]
fn an_applied_override_changes_options_and_their_digest_not_the_step_list() {
    let overrides = Overrides::new()
        .workflow("orders.fulfil", |w| {
            w.queue("staging")
                .priority(-3)
                .concurrency(2)
                .deadline("1h")
        })
        .step("orders.fulfil", "charge", |s| {
            s.timeout("2m").wait("5s").rate_limit("5/1s")
        })
        .step("orders.fulfil", "ship", |s| {
            s.wait_timeout("10m").queue("ship-staging").priority(1)
        });
    let applied = overrides.apply(DEF).expect("fits");
    assert_eq!(applied.digest, DEF.digest, "the step list is the same");
    assert_ne!(applied.options_digest, DEF.options_digest);
    assert_eq!(
        applied.options_digest,
        pgbus_core::sha256_hex(applied.options_json.as_bytes())
    );
    assert_eq!((applied.queue, applied.priority), ("staging", -3));
    assert_eq!(applied.flow.concurrency, Some(2));
    assert_eq!(applied.flow.deadline_ms, Some(3_600_000));
    let (_, charge) = applied.entry("charge").expect("charge");
    assert_eq!(charge.options.timeout_ms, Some(120_000));
    assert_eq!(charge.options.wait_ms, 5_000);
    assert_eq!(charge.options.rate_limit.map(|r| r.count), Some(5));
    let (_, ship) = applied.entry("ship").expect("ship");
    let wait_for = ship.options.wait_for.as_ref().expect("waits");
    assert_eq!(wait_for.timeout_ms, Some(600_000));
    assert_eq!(wait_for.signal, "payment.settled");
    assert_eq!(ship.options.queue, Some("ship-staging"));
    assert_eq!(ship.options.priority, Some(1));
    let names = |d: &WorkflowDefinition| d.entries.iter().map(|e| e.name).collect::<Vec<_>>();
    assert_eq!(names(applied), names(DEF));

    // The options JSON: the overridden values in place, and what was
    // overridden, durations in milliseconds.
    let options: serde_json::Value = serde_json::from_str(applied.options_json).expect("JSON");
    assert_eq!(options["queue"], "staging");
    assert_eq!(options["flow"]["concurrency"], 2);
    assert_eq!(options["entries"][0]["timeout_ms"], 120_000);
    assert_eq!(options["entries"][2]["wait_for"]["timeout_ms"], 600_000);
    let in_force = json!({
        "queue": "staging", "priority": -3, "concurrency": 2, "deadline_ms": 3_600_000,
        "steps": {
            "charge": {"timeout_ms": 120_000, "wait_ms": 5_000,
                       "rate_limit": {"count": 5, "period_ms": 1_000}},
            "ship": {"wait_timeout_ms": 600_000, "queue": "ship-staging", "priority": 1},
        },
    });
    assert_eq!(options["overrides"], in_force);
    assert_eq!(applied.overrides_in_force(), Some(in_force));
    assert_eq!(DEF.overrides_in_force(), None);

    // Derived once: a second apply is the same definition.
    assert!(std::ptr::eq(applied, overrides.apply(DEF).expect("fits")));
}

#[test]
fn overrides_are_normalized_and_nothing_to_override_is_the_source() {
    let two_minutes = Overrides::new().step("orders.fulfil", "charge", |s| s.timeout("2m"));
    let in_seconds = Overrides::new().step("orders.fulfil", "charge", |s| s.timeout("120s"));
    assert_eq!(
        two_minutes.apply(DEF).expect("fits").options_digest,
        in_seconds.apply(DEF).expect("fits").options_digest
    );
    let other = Overrides::new().workflow("mail.send", |w| w.queue("mail"));
    assert!(std::ptr::eq(other.apply(DEF).expect("not named"), DEF));
    let empty =
        Overrides::new()
            .workflow("orders.fulfil", |w| w)
            .step("orders.fulfil", "charge", |s| s);
    assert!(std::ptr::eq(empty.apply(DEF).expect("nothing set"), DEF));
}

#[test]
fn overrides_of_workflows_not_registered_are_listed_with_likely_typos() {
    let overrides = Overrides::new()
        .workflow("orders.fulfill", |w| w.priority(1))
        .workflow("orders.refund", |w| w.queue("refunds"))
        .workflow("orders.fulfil", |w| w.priority(2))
        .workflow("mail.sned", |w| w.priority(3));
    assert_eq!(
        overrides.unregistered(&["orders.fulfil", "mail.send", "orders.charge"]),
        [
            // A swap of neighbours is one edit.
            ("mail.sned", Some("mail.send")),
            ("orders.fulfill", Some("orders.fulfil")),
            // Another workflow of the same prefix, not a typo.
            ("orders.refund", None),
        ]
    );
    assert!(
        overrides
            .unregistered(&[
                "orders.fulfil",
                "orders.fulfill",
                "orders.refund",
                "mail.sned"
            ])
            .is_empty()
    );
    assert_eq!(
        overrides.unregistered(&[]).len(),
        4,
        "none registered: all kept"
    );
    assert_eq!(edits("", "abc"), 3);
    assert_eq!(edits("abc", "acb"), 1);
    assert_eq!(edits("fan.batch", "fan.parent"), 5);
}

#[test]
fn the_environment_gives_json_text_or_a_file_not_both() {
    let text = r#"{"workflows": {"orders.fulfil": {"queue": "env"}}}"#;
    let expected = Overrides::new().workflow("orders.fulfil", |w| w.queue("env"));
    let from = |vars: &[(&str, &str)]| {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Overrides::from_lookup(&move |name: &str| {
            vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
        })
    };
    assert_eq!(from(&[]).expect("none"), Overrides::new());
    assert_eq!(
        from(&[(OVERRIDES_ENV, ""), (OVERRIDES_FILE_ENV, "")]).expect("empty is unset"),
        Overrides::new()
    );
    assert_eq!(from(&[(OVERRIDES_ENV, text)]).expect("text"), expected);

    let dir = std::env::temp_dir().join(format!("pgbus-overrides-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).expect("a directory");
    let path = dir.join("overrides.json");
    std::fs::write(&path, text).expect("written");
    let path_text = path.display().to_string();
    assert_eq!(
        from(&[(OVERRIDES_FILE_ENV, &path_text)]).expect("file"),
        expected
    );
    match from(&[(OVERRIDES_ENV, text), (OVERRIDES_FILE_ENV, &path_text)]) {
        Err(Error::InvalidSetting { setting, problem }) => {
            assert_eq!(setting, OVERRIDES_ENV);
            assert!(problem.contains("both set"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    std::fs::write(&path, r#"{"workflows": {"w": {"queue": 1}}}"#).expect("written");
    match Overrides::from_file(&path) {
        Err(Error::InvalidSetting { setting, problem }) => {
            assert_eq!(setting, path_text, "the file is named");
            assert!(problem.contains("expected a string"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    std::fs::remove_dir_all(&dir).expect("removed");
    match Overrides::from_file(&path) {
        Err(Error::UnreadableFile {
            setting, path: p, ..
        }) => {
            assert_eq!((setting, p), ("overrides", path));
        }
        other => panic!("{other:?}"),
    }
}
