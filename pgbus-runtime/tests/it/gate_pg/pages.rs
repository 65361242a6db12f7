//! Signal pages: turned-down signals are judged once, a page at a time, and a
//! match behind full pages of them wins over a passed timeout.

use std::any::type_name;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Client, RunStatus, RunView, SignalId, WaitTimedOut};
use serde_json::json;

use super::{keep_signal, named, polling};
use crate::pg::{TestDb, events, steps, t0};

/// Takes only `{"ok": true}` signals named `s`, counting every call of its
/// predicate.
struct Counted {
    calls: Arc<AtomicUsize>,
}

#[workflow(name = "gate.counted")]
impl Counted {
    fn ok(&self, _cx: &StepCx<()>, signal: &Signal) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst);
        signal.payload["ok"] == json!(true)
    }

    #[step(wait_for(name = "s", matches = ok))]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }
}

/// `Counted` with a 10 s `wait_timeout` (`on_timeout` pause).
struct CountedTimeout {
    calls: Arc<AtomicUsize>,
}

#[workflow(name = "gate.counted_timeout")]
impl CountedTimeout {
    fn ok(&self, _cx: &StepCx<()>, signal: &Signal) -> bool {
        self.calls.fetch_add(1, Ordering::SeqCst);
        signal.payload["ok"] == json!(true)
    }

    #[step(wait_for(name = "s", matches = ok), wait_timeout = "10s")]
    async fn wait(&self, cx: &mut StepCx<()>) -> StepResult {
        keep_signal(cx)
    }
}

/// The row's `steps.signals_seen_to`: the highest signal id its gate turned down.
async fn seen_to(t: &TestDb, step_id: i64) -> Option<i64> {
    t.query(
        "SELECT signals_seen_to FROM {schema}.steps WHERE id = $1",
        &[&step_id],
    )
    .await[0]
        .get(0)
}

/// Sends `count` signals `s` that the predicate turns down.
async fn turned_down(client: &Client, run: RunId, count: usize) -> Vec<SignalId> {
    let mut ids = Vec::new();
    for n in 0..count {
        ids.push(
            client
                .signal(run, "s", &json!({"ok": false, "n": n}))
                .await
                .expect("signal"),
        );
    }
    ids
}

/// How many events named `event` the run has.
fn count_of(view: &RunView, event: &str) -> usize {
    named(view, event).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::too_many_lines)] // the pages, then the match, one story
async fn turned_down_signals_are_judged_once_a_page_at_a_time() {
    let t = TestDb::new().await;
    let client = t.client();
    let calls = Arc::new(AtomicUsize::new(0));
    let worker = polling(&t.db)
        .register(Counted {
            calls: Arc::clone(&calls),
        })
        .build()
        .expect("worker");
    let run = client.start::<Counted>(&()).await.expect("start").run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 1, "parks");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    let parked = t.run(run).await.steps[0].id;
    assert_eq!(seen_to(&t, parked).await, None, "nothing turned down yet");

    let rejected = turned_down(&client, run, 20).await;
    // A page is 8 signals: the first two pages are full, so the row parks woken
    // at once for the next; each claim judges only the signals of its page.
    for (page, judged) in [(1, 8), (2, 16)] {
        assert_eq!(worker.run_once().await.expect("run"), 1, "page {page}");
        assert_eq!(calls.load(Ordering::SeqCst), judged, "page {page}");
        let view = t.run(run).await;
        assert_eq!(
            steps(&view),
            ["wait#1 scheduled/-"],
            "page {page}: a full page wakes the row again at once"
        );
        assert_eq!(view.steps[0].waiting_since, Some(t0()));
        assert_eq!(
            seen_to(&t, parked).await,
            Some(rejected[judged - 1].0),
            "page {page}"
        );
    }
    // The third page is short (4): the row waits.
    assert_eq!(worker.run_once().await.expect("run"), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 20, "each judged once");
    let view = t.run(run).await;
    assert_eq!(steps(&view), ["wait#1 waiting/-"]);
    assert_eq!(seen_to(&t, parked).await, Some(rejected[19].0));
    assert_eq!(
        worker.run_until_idle().await.expect("run"),
        0,
        "nothing due"
    );

    let accepted = client
        .signal(run, "s", &json!({"ok": true}))
        .await
        .expect("signal");
    assert_eq!(worker.run_until_idle().await.expect("run"), 1);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        21,
        "the claim the match woke judged only the match: no signal twice"
    );

    let view = t.run(run).await;
    assert_eq!(view.run.status, RunStatus::Finished);
    assert_eq!(steps(&view), ["wait#1 completed/completed"]);
    assert_eq!(view.steps[0].id, parked, "one attempt throughout");
    assert_eq!(view.steps[0].output, Some(json!({"signal": {"ok": true}})));
    let consumed: Vec<(SignalId, Option<i64>)> =
        view.signals.iter().map(|s| (s.id, s.consumed_by)).collect();
    let mut expected: Vec<(SignalId, Option<i64>)> =
        rejected.iter().map(|id| (*id, None)).collect();
    expected.push((accepted, Some(parked)));
    assert_eq!(consumed, expected, "the 20 turned down stay unconsumed");
    let taken = named(&view, "signal_consumed");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].details, Some(json!({"signal_id": accepted.0})));
    // Parked: with nothing, after each of the three pages; claimed: once more
    // for the match.
    assert_eq!(count_of(&view, "step_waiting"), 4);
    assert_eq!(count_of(&view, "step_started"), 5);
    assert_eq!(
        seen_to(&t, parked).await,
        Some(rejected[19].0),
        "set, and never lowered"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_match_behind_full_pages_of_turned_down_signals_wins_over_a_passed_timeout() {
    let t = TestDb::new().await;
    let client = t.client();
    let calls = Arc::new(AtomicUsize::new(0));
    let worker = polling(&t.db)
        .register(CountedTimeout {
            calls: Arc::clone(&calls),
        })
        .build()
        .expect("worker");
    let wins = client
        .start::<CountedTimeout>(&())
        .await
        .expect("start")
        .run_id;
    let loses = client
        .start::<CountedTimeout>(&())
        .await
        .expect("start")
        .run_id;
    assert_eq!(worker.run_until_idle().await.expect("run"), 2, "both park");

    turned_down(&client, wins, 20).await;
    let accepted = client
        .signal(wins, "s", &json!({"ok": true}))
        .await
        .expect("signal");
    let rejected = turned_down(&client, loses, 20).await;
    // Every signal was sent before the wait ended; no claim looked at them
    // before it did.
    t.clock.advance(Duration::from_secs(11));
    // Each run: two full pages (woken at once), then the short last one.
    assert_eq!(worker.run_until_idle().await.expect("run"), 6);
    assert_eq!(calls.load(Ordering::SeqCst), 21 + 20, "each judged once");

    // The 21st signal is the match: it wins over the timeout.
    let view = t.run(wins).await;
    assert_eq!(view.run.status, RunStatus::Finished, "{:?}", events(&view));
    assert_eq!(steps(&view), ["wait#1 completed/completed"]);
    assert_eq!(view.steps[0].output, Some(json!({"signal": {"ok": true}})));
    assert!(named(&view, "wait_timed_out").is_empty());
    let taken = named(&view, "signal_consumed");
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].details, Some(json!({"signal_id": accepted.0})));
    assert_eq!(count_of(&view, "step_waiting"), 3);
    assert_eq!(
        view.signals
            .iter()
            .filter(|s| s.consumed_by.is_some())
            .count(),
        1
    );

    // Without a match, the timeout is decided on the short last page.
    let view = t.run(loses).await;
    assert_eq!(view.run.status, RunStatus::Paused);
    assert_eq!(steps(&view), ["wait#1 failed/paused"]);
    assert_eq!(
        view.steps[0].error_class.as_deref(),
        Some(type_name::<WaitTimedOut>())
    );
    assert_eq!(count_of(&view, "wait_timed_out"), 1);
    assert_eq!(count_of(&view, "step_waiting"), 3);
    assert!(named(&view, "signal_consumed").is_empty());
    assert_eq!(view.signals.len(), rejected.len());
    assert!(view.signals.iter().all(|s| s.consumed_by.is_none()));
}
