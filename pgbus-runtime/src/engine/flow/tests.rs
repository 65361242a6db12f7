use chrono::TimeZone;

use super::*;
use crate::definition::FlowControl;

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(1_700_000_000_000 + ms)
        .single()
        .expect("a time")
}

fn rate(count: u32, period_ms: u64) -> Rate {
    Rate { count, period_ms }
}

fn limit(max_in_flight: u32, holder: SlotHolder) -> Concurrency {
    Concurrency {
        max_in_flight,
        holder,
    }
}

static PLAIN: WorkflowDefinition = WorkflowDefinition {
    name: "orders",
    flow: FlowControl::NONE,
    ..crate::__private::STAND_IN_DEFINITION
};

static LIMITED: WorkflowDefinition = WorkflowDefinition {
    name: "orders",
    flow: FlowControl {
        concurrency: Some(10),
        has_key: true,
        key_concurrency: Some(2),
        slot: SlotHolder::Run,
        rate_limit: Some(Rate {
            count: 5,
            period_ms: 1_000,
        }),
        key_rate_limit: Some(Rate {
            count: 1,
            period_ms: 60_000,
        }),
        ..FlowControl::NONE
    },
    ..crate::__private::STAND_IN_DEFINITION
};

fn candidate<'a>(step: &'a str, queue: &'a str, key: Option<&'a str>) -> Candidate<'a> {
    Candidate {
        workflow: "orders",
        step,
        queue,
        run_key: key,
    }
}

#[test]
fn keys_are_named_as_stored() {
    assert_eq!(SlotKey::Workflow("w".into()).to_string(), "workflow:w");
    let key = SlotKey::Key {
        workflow: "w".into(),
        key: "acme".into(),
    };
    assert_eq!(key.to_string(), "key:w:acme");
    assert_eq!(SlotKey::Queue("q".into()).to_string(), "queue:q");
    let step = RateKey::Step {
        workflow: "w".into(),
        step: "charge".into(),
    };
    assert_eq!(step.to_string(), "step:w/charge");
    assert_eq!(RateKey::Workflow("w".into()).to_string(), "workflow:w");
    let key = RateKey::Key {
        workflow: "w".into(),
        key: "k".into(),
    };
    assert_eq!(key.to_string(), "key:w:k");
}

#[test]
fn a_candidate_meets_the_limits_of_its_workflow_key_and_queue_in_order() {
    let mut table = LimitTable::default();
    assert!(table.is_empty());
    table.register(&[&LIMITED], &[("mail".to_owned(), 3)]);
    assert!(!table.is_empty());
    let limits = table.limits(&candidate("charge", "mail", Some("acme")));
    let keys: Vec<String> = limits
        .concurrency
        .iter()
        .map(|(k, _)| k.to_string())
        .collect();
    assert_eq!(keys, ["workflow:orders", "key:orders:acme", "queue:mail"]);
    assert_eq!(limits.concurrency[0].1, limit(10, SlotHolder::Run));
    assert_eq!(limits.concurrency[2].1, limit(3, SlotHolder::Step));
    let rates: Vec<String> = limits.rates.iter().map(|(k, _)| k.to_string()).collect();
    assert_eq!(rates, ["workflow:orders", "key:orders:acme"]);

    // No key: no per-key limit; another queue: no queue limit.
    let limits = table.limits(&candidate("charge", "default", None));
    assert_eq!(limits.concurrency.len(), 1);
    assert_eq!(limits.rates.len(), 1);
    // Another workflow meets nothing.
    let other = Candidate {
        workflow: "other",
        ..candidate("charge", "default", Some("acme"))
    };
    assert!(table.limits(&other).is_empty());
}

#[test]
fn registration_replaces_a_workflows_limits_and_upserts_queues() {
    let mut table = LimitTable::default();
    let changed = table.register(&[&LIMITED], &[("mail".to_owned(), 3)]);
    assert_eq!(
        changed,
        [
            LimitChange::Workflow("orders".into()),
            LimitChange::Queue("mail".into()),
        ]
    );
    // The same again changes nothing.
    assert!(
        table
            .register(&[&LIMITED], &[("mail".to_owned(), 3)])
            .is_empty()
    );
    // A worker that declares no queue limit leaves the queue's alone; one
    // whose definition declares nothing removes the workflow's.
    let changed = table.register(&[&PLAIN], &[]);
    assert_eq!(changed, [LimitChange::Workflow("orders".into())]);
    assert_eq!(table.declared("orders"), None);
    assert_eq!(table.queue_limit("mail"), Some(3));
    // A queue's limit is upserted, clamped to 1 to MAX_CONCURRENCY.
    let changed = table.register(&[], &[("mail".to_owned(), 0)]);
    assert_eq!(changed, [LimitChange::Queue("mail".into())]);
    assert_eq!(table.queue_limit("mail"), Some(1));
    table.register(&[], &[("mail".to_owned(), u32::MAX)]);
    assert_eq!(table.queue_limit("mail"), Some(MAX_CONCURRENCY));
}

#[test]
fn a_change_lets_go_of_its_workflows_or_its_queues_rows() {
    let key = SlotKey::Key {
        workflow: "w".into(),
        key: "k".into(),
    };
    let queue = SlotKey::Queue("q".into());
    let changed = LimitChange::Workflow("w".into());
    assert!(changed.covers(&key, "w"));
    assert!(changed.covers(&queue, "w"), "any held row of the workflow");
    assert!(!changed.covers(&SlotKey::Workflow("v".into()), "v"));
    let changed = LimitChange::Queue("q".into());
    assert!(changed.covers(&queue, "w"));
    assert!(!changed.covers(&SlotKey::Queue("r".into()), "w"));
    assert!(!changed.covers(&SlotKey::Workflow("q".into()), "q"));
}

#[test]
fn no_handoff_for_a_limited_workflow_step_or_queue() {
    let mut table = LimitTable::default();
    assert!(table.hands_off("orders", "charge", "default"));
    table.register(&[&LIMITED], &[("mail".to_owned(), 3)]);
    assert!(!table.hands_off("orders", "charge", "default"));
    assert!(!table.hands_off("other", "charge", "mail"));
    assert!(table.hands_off("other", "charge", "default"));
}

fn key_limited(max: u32, holder: SlotHolder) -> Limits {
    Limits {
        concurrency: vec![(
            SlotKey::Key {
                workflow: "w".into(),
                key: "k".into(),
            },
            limit(max, holder),
        )],
        rates: Vec::new(),
    }
}

#[test]
fn a_key_admits_up_to_its_limit_then_holds() {
    let limits = key_limited(2, SlotHolder::Step);
    let mut state = FlowState::default();
    let decided = state.decide_all(
        [(&limits, &[][..]), (&limits, &[][..]), (&limits, &[][..])],
        at(0),
    );
    let key = limits.concurrency[0].0.clone();
    assert_eq!(
        decided[0],
        Admission::Admit(Admitted {
            step_slots: vec![key.clone()],
            ..Admitted::default()
        })
    );
    assert!(matches!(decided[1], Admission::Admit(_)));
    assert_eq!(decided[2], Admission::Hold(key.clone()));
    assert_eq!(state.holders.get(&key), Some(&2));
}

#[test]
fn the_first_full_key_holds_in_the_order_workflow_key_queue() {
    let limits = Limits {
        concurrency: vec![
            (SlotKey::Workflow("w".into()), limit(5, SlotHolder::Step)),
            (
                SlotKey::Key {
                    workflow: "w".into(),
                    key: "k".into(),
                },
                limit(1, SlotHolder::Step),
            ),
            (SlotKey::Queue("q".into()), limit(1, SlotHolder::Step)),
        ],
        rates: Vec::new(),
    };
    let mut state = FlowState::default();
    state.holders.insert(SlotKey::Queue("q".into()), 1);
    state.holders.insert(limits.concurrency[1].0.clone(), 1);
    assert_eq!(
        state.decide(&limits, &[], at(0)),
        Admission::Hold(limits.concurrency[1].0.clone())
    );
    // A held candidate takes nothing.
    assert_eq!(state.holders.get(&SlotKey::Workflow("w".into())), None);
}

#[test]
fn a_run_slot_is_taken_once_and_passed_over_while_the_run_holds_it() {
    let limits = Limits {
        concurrency: vec![
            (
                SlotKey::Key {
                    workflow: "w".into(),
                    key: "k".into(),
                },
                limit(1, SlotHolder::Run),
            ),
            (SlotKey::Queue("q".into()), limit(3, SlotHolder::Step)),
        ],
        rates: Vec::new(),
    };
    let key = limits.concurrency[0].0.clone();
    let queue = SlotKey::Queue("q".into());
    let mut state = FlowState::default();
    let taken = Admitted {
        step_slots: vec![key.clone(), queue.clone()],
        run_slots: vec![key.clone()],
        starts: Vec::new(),
    };
    assert_eq!(
        state.decide(&limits, &[], at(0)),
        Admission::Admit(taken.clone())
    );
    // Another run: held. The run that holds the slot: its next step goes
    // on, counting only the queue's slot again.
    assert_eq!(
        state.decide(&limits, &[], at(0)),
        Admission::Hold(key.clone())
    );
    assert_eq!(
        state.decide(&limits, std::slice::from_ref(&key), at(0)),
        Admission::Admit(taken)
    );
    assert_eq!(state.holders.get(&key), Some(&1));
    assert_eq!(state.holders.get(&SlotKey::Queue("q".into())), Some(&2));
}

fn rated(count: u32, period_ms: u64) -> Limits {
    Limits {
        concurrency: Vec::new(),
        rates: vec![(RateKey::Workflow("w".into()), rate(count, period_ms))],
    }
}

#[test]
fn a_rate_admits_count_starts_per_window_then_throttles_to_its_opening() {
    // 2 per second; starts at 0 ms and 400 ms; at 500 ms three more come.
    let limits = rated(2, 1_000);
    let key = RateKey::Workflow("w".into());
    let mut state = FlowState::default();
    assert!(matches!(
        state.decide(&limits, &[], at(0)),
        Admission::Admit(_)
    ));
    assert!(matches!(
        state.decide(&limits, &[], at(400)),
        Admission::Admit(_)
    ));
    let decided = state.decide_all([(&limits, &[][..]); 3], at(500));
    let untils: Vec<Admission> = [1_000, 1_000, 1_000]
        .into_iter()
        .map(|ms| Admission::Throttle {
            key: key.clone(),
            until: at(ms),
        })
        .collect();
    assert_eq!(
        decided, untils,
        "every row a full window throttles waits for its next opening"
    );
    // A start at exactly start + period is outside that start's window.
    let mut fresh = FlowState {
        windows: state.windows.clone(),
        ..FlowState::default()
    };
    assert!(matches!(
        fresh.decide(&limits, &[], at(1_000)),
        Admission::Admit(_)
    ));
    assert_eq!(fresh.windows.get(&key), Some(&vec![at(400), at(1_000)]));
}

#[test]
fn the_opening_of_a_window_follows_the_rows_before() {
    let r = rate(3, 100);
    let log = [at(10), at(20), at(30)];
    assert_eq!(opening(&log, r, 1, at(50)), Some(at(110)));
    assert_eq!(opening(&log, r, 3, at(50)), Some(at(130)));
    assert_eq!(opening(&log, r, 4, at(50)), Some(at(210)));
    assert_eq!(opening(&log, r, 7, at(50)), Some(at(310)));
    // Room in the window: no opening to wait for.
    assert_eq!(opening(&log, r, 1, at(115)), None);
    assert_eq!(opening(&[], r, 1, at(0)), None);
    // A log longer than the count (the rate lowered): the start that
    // leaves fewer than `count` in the window.
    let lowered = rate(2, 100);
    assert_eq!(opening(&log, lowered, 1, at(50)), Some(at(120)));
    // Far periods saturate instead of overflowing.
    let day = rate(1, pgbus_core::flow::MAX_RATE_PERIOD_MS);
    assert!(opening(&[at(0)], day, usize::MAX, at(1)).is_some());
}

#[test]
fn a_log_keeps_the_last_count_starts() {
    let mut log = Vec::new();
    for ms in [0, 10, 20, 30] {
        record_start(&mut log, rate(3, 1_000), at(ms));
    }
    assert_eq!(log, [at(10), at(20), at(30)]);
}

#[test]
fn concurrency_holds_before_a_rate_is_counted() {
    let limits = Limits {
        concurrency: vec![(SlotKey::Workflow("w".into()), limit(1, SlotHolder::Step))],
        rates: vec![(RateKey::Workflow("w".into()), rate(1, 1_000))],
    };
    let mut state = FlowState::default();
    assert!(matches!(
        state.decide(&limits, &[], at(0)),
        Admission::Admit(_)
    ));
    assert_eq!(
        state.decide(&limits, &[], at(0)),
        Admission::Hold(SlotKey::Workflow("w".into()))
    );
    // A throttled candidate takes no slot.
    state.holders.clear();
    assert!(matches!(
        state.decide(&limits, &[], at(10)),
        Admission::Throttle { .. }
    ));
    assert_eq!(state.holders.get(&SlotKey::Workflow("w".into())), None);
}

#[test]
fn of_two_full_windows_the_later_opening_throttles() {
    let step = RateKey::Step {
        workflow: "w".into(),
        step: "s".into(),
    };
    let limits = Limits {
        concurrency: Vec::new(),
        rates: vec![
            (RateKey::Workflow("w".into()), rate(1, 1_000)),
            (step.clone(), rate(1, 5_000)),
        ],
    };
    let mut state = FlowState::default();
    assert_eq!(
        state.decide(&limits, &[], at(0)),
        Admission::Admit(Admitted {
            starts: vec![RateKey::Workflow("w".into()), step.clone()],
            ..Admitted::default()
        })
    );
    assert_eq!(
        state.decide(&limits, &[], at(10)),
        Admission::Throttle {
            key: step.clone(),
            until: at(5_000)
        }
    );
}

#[test]
fn a_release_wakes_the_free_slots_of_ready_runs_oldest_first() {
    let row = |id, priority, due, run_ready| HeldRow {
        id,
        priority,
        due: at(due),
        run_ready,
    };
    let held = [
        row(5, 0, 10, true),
        row(3, 0, 10, true),
        row(4, 1, 0, true),
        row(2, 0, 5, false),
        row(1, 0, 20, true),
    ];
    assert_eq!(to_wake(2, held), [3, 5]);
    assert_eq!(to_wake(10, held), [3, 5, 1, 4]);
    assert!(to_wake(0, held).is_empty());
    let two = Some(limit(2, SlotHolder::Step));
    assert_eq!(free_slots(two, 1), 1);
    assert_eq!(free_slots(two, 3), 0);
    assert_eq!(free_slots(None, 3), usize::MAX, "no limit: every row goes");
}

#[test]
fn a_definition_declares_its_workflow_key_and_step_limits() {
    let declared = Declared::of(&LIMITED);
    assert_eq!(declared.concurrency, Some(limit(10, SlotHolder::Run)));
    assert_eq!(declared.key_concurrency, Some(limit(2, SlotHolder::Run)));
    assert_eq!(declared.rate, Some(rate(5, 1_000)));
    assert_eq!(declared.key_rate, Some(rate(1, 60_000)));
    assert!(declared.steps.is_empty());
    assert!(Declared::of(&PLAIN).is_empty());
}
