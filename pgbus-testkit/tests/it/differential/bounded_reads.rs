//! Bounded reads of a run's latest parts.

use super::*;

/// A long run of `Verbs` (resumed six times, a signal each time), read back
/// bounded: a summary of what the read kept.
async fn bounded_read<R: Rig>(h: &Harness<R>) -> Vec<String> {
    let run = h.start::<Verbs>(&script("other_error")).await;
    drive(h).await;
    for round in 0..6 {
        let payload = serde_json::json!({"round": round, "note": "x".repeat(round * 10)});
        h.signal_unchecked(run, "poke", &payload)
            .await
            .expect("signal");
        h.act(run, Action::Resume, "again").await.expect("resume");
        drive(h).await;
    }
    let read = pgbus_runtime::RunRead::latest(3).value_bytes(40);
    let view = h.view_with(run, read).await;
    let whole = h
        .view_with(run, pgbus_runtime::RunRead::latest(10_000))
        .await;
    assert!(whole.omitted.is_empty(), "no value bound, nothing left out");
    assert_eq!(whole.steps.len(), 7, "one attempt per resume and the first");
    let mut summary = vec![format!("{:?}", view.counts)];
    summary.extend(
        view.steps
            .iter()
            .map(|s| format!("step {} #{}", s.step_name, s.attempt)),
    );
    summary.extend(
        view.events
            .iter()
            .map(|e| format!("event {} {:?}", e.event, e.attempt)),
    );
    summary.extend(
        view.signals
            .iter()
            .map(|s| format!("signal {} {}", s.id, s.payload)),
    );
    summary.extend(view.omitted.iter().map(|o| match o.value {
        pgbus_runtime::ValueOf::Output { .. } => format!("omitted output {}", o.bytes),
        other => format!("omitted {other:?} {}", o.bytes),
    }));
    assert_eq!(view.steps.len(), 3);
    assert_eq!(view.signals.len(), 3);
    assert!(view.counts.events > 3 && view.counts.signals == 6);
    assert!(
        view.events.iter().any(|e| e.event == "paused")
            && view
                .events
                .iter()
                .filter(|e| e.event == "step_started")
                .count()
                == 3,
        "the older events the kept attempts' timeline needs are read too: {summary:#?}"
    );
    summary
}

/// A bounded read of a long run, as both stores return it: what is kept,
/// the counts, and which values are left out for their length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_read_keeps_the_same_latest_parts() {
    let ((_, left), (_, right)) = on_each_store!(|h| h.register(Verbs), bounded_read());
    assert!(
        left.iter().any(|line| line.starts_with("omitted Input"))
            && left.iter().any(|line| line.starts_with("omitted Payload")),
        "the input and the longer payloads pass 40 bytes: {left:#?}"
    );
    assert_eq!(
        left, right,
        "memory (left) and Postgres (right) read differently"
    );
}

// ---- wait_for: signals, predicates, timeouts --------------------------------------
