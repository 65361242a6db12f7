//! A workflow that uses every option, read back from its compiled definition.

use pgbus_runtime::prelude::*;
use pgbus_runtime::{
    EntryKind, FailureAction, GuardRef, HandlerRef, OnTimeout, PolicyAction, Report,
    definition_digest,
};

#[derive(Debug, Serialize, Deserialize)]
struct Order {
    pub id: i64,
    pub void: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

#[derive(Debug, thiserror::Error)]
#[error("fraud suspected")]
struct FraudSuspected;

struct Everything;

#[workflow(
    name = "orders.everything",
    input = Order,
    queue = "orders",
    priority = -3,
    cancel_if = is_void,
    cancel_if = Self::is_void_too,
    on_exception(matching(FraudSuspected), handler = Self::triage),
)]
#[on_exception(
    matching(CardDeclined, FraudSuspected),
    action = "cancel",
    report = "never"
)]
#[on_exception(action = "pause", report = "terminal_only")]
impl Everything {
    fn is_void(&self, cx: &StepCx<Order>) -> bool {
        cx.input().void
    }

    fn is_void_too(&self, _cx: &StepCx<Order>) -> Result<bool, CardDeclined> {
        Ok(false)
    }

    fn skip_small(&self, cx: &StepCx<Order>) -> bool {
        cx.input().id < 10
    }

    fn settles_this_order(&self, cx: &StepCx<Order>, signal: &Signal) -> bool {
        signal.payload["order"] == cx.input().id
    }

    fn triage(&self, _cx: &StepCx<Order>, error: &StepError) -> Option<Flow> {
        error.is::<FraudSuspected>().then(|| Flow::cancel("fraud"))
    }

    #[step(
        name = "reserve",
        wait = "250ms",
        timeout = "30s",
        queue = "stock",
        priority = 7
    )]
    async fn reserve_stock_renamed(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Complete)
    }

    removed_step!(legacy_fraud_check);

    #[step(
        wait = "1m30s",
        skip_if = skip_small,
        on_exception(matching(Timeout), action = "reattempt", wait = "15s", max_reattempts = 5, terminal_action = "cancel", report = "terminal_only"),
        on_exception(matching(CardDeclined), action = "skip"),
        on_exception = "reattempt",
    )]
    async fn charge(&self, _cx: &mut StepCx<Order>) -> Result<(), CardDeclined> {
        Ok(())
    }

    #[step(
        wait_for = "payment.settled",
        wait_timeout = "1h",
        on_timeout = "cancel!"
    )]
    async fn await_payment(&self, _cx: &mut StepCx<Order>) -> Flow {
        Flow::Complete
    }

    #[step(wait_for(name = "courier.ready", matches = settles_this_order), wait_timeout = "1d", on_timeout = "run")]
    async fn ship(&self, _cx: &mut StepCx<Order>) {}

    #[step(wait_for = "audit.done")]
    async fn audit(&self, _cx: &mut StepCx<Order>) -> StepResult {
        Ok(Flow::Finish)
    }

    #[fan_out(on_batch_failure = "skip", timeout = "2h")]
    async fn notify_vendors(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }

    #[fan_out]
    async fn notify_customers(&self, _cx: &mut StepCx<Order>, _fan: &mut FanOut) -> StepResult {
        Ok(Flow::Complete)
    }

    removed_step!("legacy.export");
}

const DEF: &pgbus_runtime::WorkflowDefinition = <Everything as Workflow>::DEFINITION;

#[test]
fn workflow_options_are_normalized() {
    assert_eq!(DEF.name, "orders.everything");
    assert_eq!(DEF.type_name, "Everything");
    assert_eq!(DEF.input_type, "Order");
    assert_eq!(DEF.queue, "orders");
    assert_eq!(DEF.priority, -3);
    assert_eq!(
        DEF.cancel_if,
        &[
            GuardRef {
                id: 0,
                method: "is_void"
            },
            GuardRef {
                id: 1,
                method: "Self::is_void_too"
            }
        ]
    );

    // Inline policy first, then the separate attributes, in order.
    let [triage, named, blanket] = DEF.on_exception else {
        panic!("{:?}", DEF.on_exception)
    };
    assert_eq!(
        triage.action,
        PolicyAction::Handler(HandlerRef {
            id: 0,
            method: "Self::triage"
        })
    );
    let triage_types: Vec<&str> = triage.matching.iter().map(|m| m.type_name).collect();
    assert_eq!(triage_types, ["FraudSuspected"]);
    assert_eq!(triage.report, Report::Always);
    let names: Vec<&str> = named.matching.iter().map(|m| m.type_name).collect();
    assert_eq!(names, ["CardDeclined", "FraudSuspected"]);
    assert_eq!(named.action, PolicyAction::Cancel);
    assert_eq!(named.report, Report::Never);
    assert!(named.names_types());
    assert_eq!(blanket.action, PolicyAction::Pause);
    assert_eq!(blanket.report, Report::TerminalOnly);
    assert!(!blanket.names_types());
}

#[test]
fn entries_keep_declaration_order_and_durable_names() {
    let entries: Vec<(&str, Option<&str>, EntryKind)> = DEF
        .entries
        .iter()
        .map(|e| (e.name, e.method, e.kind))
        .collect();
    assert_eq!(
        entries,
        [
            ("reserve", Some("reserve_stock_renamed"), EntryKind::Step),
            ("legacy_fraud_check", None, EntryKind::Removed),
            ("charge", Some("charge"), EntryKind::Step),
            ("await_payment", Some("await_payment"), EntryKind::Step),
            ("ship", Some("ship"), EntryKind::Step),
            ("audit", Some("audit"), EntryKind::Step),
            ("notify_vendors", Some("notify_vendors"), EntryKind::FanOut),
            (
                "notify_customers",
                Some("notify_customers"),
                EntryKind::FanOut
            ),
            ("legacy.export", None, EntryKind::Removed),
        ]
    );
    assert_eq!(
        DEF.first_step().map(|(i, e)| (i, e.name)),
        Some((0, "reserve"))
    );
    assert_eq!(
        DEF.next_step_after(0).map(|(i, e)| (i, e.name)),
        Some((2, "charge"))
    );
    assert_eq!(
        DEF.next_step_after(7).map(|(i, _)| i),
        None,
        "a trailing gravestone is no step"
    );
    assert_eq!(DEF.entry("ship").map(|(i, _)| i), Some(4));
    assert!(
        DEF.entry("reserve_stock_renamed").is_none(),
        "methods are not durable names"
    );
}

#[test]
fn step_options_are_normalized() {
    let reserve = &DEF.entries[0].options;
    assert_eq!(reserve.wait_ms, 250);
    assert_eq!(reserve.timeout_ms, Some(30_000));
    assert_eq!(reserve.queue, Some("stock"));
    assert_eq!(reserve.priority, Some(7));
    assert!(
        reserve.skip_if.is_none() && reserve.wait_for.is_none() && reserve.on_exception.is_empty()
    );
    assert_eq!(reserve.on_batch_failure, None);

    let gravestone = &DEF.entries[1].options;
    assert_eq!(
        (gravestone.wait_ms, gravestone.timeout_ms, gravestone.queue),
        (0, None, None)
    );

    let charge = &DEF.entries[2].options;
    assert_eq!(charge.wait_ms, 90_000);
    assert_eq!(charge.timeout_ms, None);
    assert_eq!(charge.queue, None, "inherits the workflow's queue");
    assert_eq!(charge.priority, None, "inherits the workflow's priority");
    assert_eq!(
        charge.skip_if,
        Some(GuardRef {
            id: 2,
            method: "skip_small"
        })
    );
    let [timeouts, skip, shorthand] = charge.on_exception else {
        panic!("{:?}", charge.on_exception)
    };
    assert_eq!(
        timeouts
            .matching
            .iter()
            .map(|m| m.type_name)
            .collect::<Vec<_>>(),
        ["Timeout"]
    );
    assert_eq!(
        timeouts.action,
        PolicyAction::Reattempt {
            wait_ms: 15_000,
            max_reattempts: 5,
            terminal_action: FailureAction::Cancel
        }
    );
    assert_eq!(timeouts.report, Report::TerminalOnly);
    assert_eq!(
        shorthand.action,
        PolicyAction::Reattempt {
            wait_ms: 1_000,
            max_reattempts: 3,
            terminal_action: FailureAction::Pause
        },
        "the shorthand takes the documented defaults"
    );
    assert_eq!(shorthand.report, Report::Always);
    assert_eq!(skip.action, PolicyAction::Skip);
    assert_eq!(
        skip.matching
            .iter()
            .map(|m| m.type_name)
            .collect::<Vec<_>>(),
        ["CardDeclined"]
    );

    let await_payment = DEF.entries[3].options.wait_for.as_ref().expect("wait_for");
    assert_eq!(await_payment.signal, "payment.settled");
    assert_eq!(await_payment.matches, None);
    assert_eq!(await_payment.timeout_ms, Some(3_600_000));
    assert_eq!(
        await_payment.on_timeout,
        OnTimeout::Cancel,
        "`cancel!` reads as `cancel`"
    );

    let ship = DEF.entries[4].options.wait_for.as_ref().expect("wait_for");
    assert_eq!(ship.signal, "courier.ready");
    assert_eq!(
        ship.matches,
        Some(GuardRef {
            id: 0,
            method: "settles_this_order"
        })
    );
    assert_eq!(ship.timeout_ms, Some(86_400_000));
    assert_eq!(ship.on_timeout, OnTimeout::Run);

    let audit = DEF.entries[5].options.wait_for.as_ref().expect("wait_for");
    assert_eq!(
        (audit.timeout_ms, audit.on_timeout),
        (None, OnTimeout::Pause)
    );

    let vendors = &DEF.entries[6].options;
    assert_eq!(vendors.on_batch_failure, Some(FailureAction::Skip));
    assert_eq!(vendors.timeout_ms, Some(7_200_000));
    assert_eq!(
        DEF.entries[7].options.on_batch_failure,
        Some(FailureAction::Pause),
        "default"
    );
}

#[test]
fn digest_covers_the_step_list() {
    let expected = definition_digest([
        ("reserve", EntryKind::Step),
        ("legacy_fraud_check", EntryKind::Removed),
        ("charge", EntryKind::Step),
        ("await_payment", EntryKind::Step),
        ("ship", EntryKind::Step),
        ("audit", EntryKind::Step),
        ("notify_vendors", EntryKind::FanOut),
        ("notify_customers", EntryKind::FanOut),
        ("legacy.export", EntryKind::Removed),
    ]);
    assert_eq!(DEF.digest, expected);
    // Computed independently (Python: json.dumps(entries, separators=(",", ":"), ensure_ascii=False)).
    assert_eq!(
        DEF.digest,
        "e7fb905eb8e784b6e7c2b7edb45ef8d2c65aaaca27f5aa9e51c150a7a7aa7c73"
    );
}

#[test]
fn options_digest_hashes_the_normalized_options() {
    assert_eq!(DEF.options_digest, pgbus_core_sha(DEF.options_json));
    let options: serde_json::Value = serde_json::from_str(DEF.options_json).expect("valid JSON");
    assert_eq!(options["priority"], -3);
    assert_eq!(options["entries"][2]["wait_ms"], 90_000);
    assert_eq!(
        options["entries"][2]["on_exception"][2]["do"]["max_reattempts"],
        3
    );
    // `Self::is_void_too` and `is_void_too` name the same method: one spelling.
    assert_eq!(options["cancel_if"][1], "is_void_too");
    assert!(
        options["entries"][0].get("method").is_none(),
        "method names are not options"
    );
}

fn pgbus_core_sha(text: &str) -> String {
    use sha2::Digest as _;
    use std::fmt::Write as _;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
}
