use std::collections::BTreeSet;

use super::*;

fn names(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|name| (*name).to_owned()).collect()
}

fn refusal(name: &str, waited: &BTreeSet<String>) -> (Vec<String>, Option<String>, String) {
    match check_signal_target(RunId(7), "orders", name, Some(waited)) {
        Err(error @ Error::UnknownSignal { .. }) => {
            let message = error.to_string();
            let Error::UnknownSignal {
                waited_for,
                suggestion,
                ..
            } = error
            else {
                unreachable!()
            };
            (waited_for, suggestion, message)
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn a_waited_for_name_passes() {
    let waited = names(&["payment.settled"]);
    assert!(check_signal_target(RunId(7), "orders", "payment.settled", Some(&waited)).is_ok());
}

#[test]
fn nothing_to_judge_by_passes() {
    assert!(check_signal_target(RunId(7), "orders", "anything", None).is_ok());
}

#[test]
fn a_typo_is_refused_with_the_closest_name() {
    let waited = names(&["payment.settled", "order.shipped"]);
    let (listed, suggestion, message) = refusal("payment.setled", &waited);
    assert_eq!(listed, ["order.shipped", "payment.settled"]);
    assert_eq!(suggestion.as_deref(), Some("payment.settled"));
    assert_eq!(
        message,
        "no step of workflow `orders` waits for signal `payment.setled`; did you mean \
         `payment.settled`? (its steps wait for `order.shipped`, `payment.settled`); nothing \
         was sent to run 7. For a step a later version of the workflow will add, send it \
         unchecked (`Client::signal_unchecked`, `pgbus signal --unchecked`)"
    );
}

#[test]
fn another_case_is_the_suggestion() {
    let waited = names(&["Paid", "paid.late"]);
    let (_, suggestion, _) = refusal("PAID", &waited);
    assert_eq!(suggestion.as_deref(), Some("Paid"));
}

#[test]
fn a_stranger_gets_the_list_without_a_guess() {
    let waited = names(&["payment.settled"]);
    let (_, suggestion, message) = refusal("refund", &waited);
    assert_eq!(suggestion, None);
    assert!(
        message.contains("(its steps wait for `payment.settled`)"),
        "{message}"
    );
}

#[test]
fn no_wait_at_all_says_so() {
    let (listed, suggestion, message) = refusal("go", &BTreeSet::new());
    assert!(listed.is_empty());
    assert_eq!(suggestion, None);
    assert!(
        message.contains("(none of its steps waits for a signal)"),
        "{message}"
    );
}

#[test]
fn a_long_list_is_cut_in_the_message_only() {
    let many: Vec<String> = (0..15).map(|i| format!("signal.{i:02}")).collect();
    let waited: BTreeSet<String> = many.iter().cloned().collect();
    let (listed, _, message) = refusal("zzz", &waited);
    assert_eq!(listed.len(), 15);
    assert!(message.contains("`signal.09` and 5 more)"), "{message}");
    assert!(!message.contains("signal.10"), "{message}");
}
