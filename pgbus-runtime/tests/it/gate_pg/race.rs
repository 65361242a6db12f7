//! 10,000 signals racing their waits: no wake-up is lost.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pgbus_runtime::StartOptions;
use pgbus_runtime::prelude::*;

use super::keep_signal;
use crate::pg::{MANY_CONNECTIONS, TestDb};

/// One step that waits for `go` and keeps what it got.
struct Race;

#[workflow(name = "gate.race", input = i64)]
impl Race {
    #[step(wait_for = "go")]
    async fn only(&self, cx: &mut StepCx<i64>) -> StepResult {
        keep_signal(cx)
    }
}

const RACES: i64 = 10_000;

/// A fixed shuffle (xorshift64, Fisher-Yates): the same order every run.
fn shuffle<T>(items: &mut [T]) {
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = usize::try_from(state % (i as u64 + 1)).expect("fits");
        items.swap(i, j);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[allow(clippy::too_many_lines)] // setup, race and the checks of one scenario
async fn ten_thousand_signals_racing_their_waits_lose_no_wake_up() {
    let _many = MANY_CONNECTIONS.lock().await;
    let began = Instant::now();
    let t = TestDb::new().await;

    // Started in bulk, a thousand a statement: the race is between the
    // signals and the waits, not the starts.
    let inputs: Vec<i64> = (0..RACES).collect();
    let client = t.client();
    let mut runs: Vec<(RunId, i64)> = Vec::new();
    for chunk in inputs.chunks(1_000) {
        let started = client
            .start_many::<Race>(chunk.iter().map(|i| (i, StartOptions::new())))
            .await
            .expect("start");
        runs.extend(started.iter().map(|s| s.run_id).zip(chunk.iter().copied()));
    }
    let started_in = began.elapsed();
    shuffle(&mut runs);

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = tokio::task::JoinSet::new();
    // Three workers sharing one pool apart from the test's: three pools of
    // sixteen would crowd out the tests running beside this one.
    let shared = t.second_connection().await;
    for _ in 0..3 {
        let db = shared.clone();
        let worker = db
            .worker()
            .concurrency(32)
            .poll_interval(Duration::from_millis(200))
            .register(Race)
            .build()
            .expect("worker");
        let mut stopped = stopped.clone();
        workers.spawn(async move {
            worker
                .run_until(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                })
                .await
                .expect("worker loop");
            drop(db);
        });
    }
    let mut senders = tokio::task::JoinSet::new();
    for chunk in runs.chunks(runs.len().div_ceil(14)) {
        let client = t.client();
        let chunk = chunk.to_vec();
        senders.spawn(async move {
            for (run, i) in chunk {
                client.signal(run, "go", &i).await.expect("signal");
            }
        });
    }
    while let Some(sent) = senders.join_next().await {
        sent.expect("join");
    }
    let sent_in = began.elapsed();

    // Until every run finished, or nothing moved for 10 s (a lost wake-up
    // leaves its row waiting for good).
    let finished = "SELECT count(*) FROM {schema}.runs WHERE status = 'finished'";
    let mut last = (0, Instant::now());
    loop {
        let done = t.count(finished, &[]).await;
        if done == RACES {
            break;
        }
        if done != last.0 {
            last = (done, Instant::now());
        } else if last.1.elapsed() > Duration::from_secs(10) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let raced_in = began.elapsed();
    stop.send(true).expect("stop the workers");
    while let Some(joined) = workers.join_next().await {
        joined.expect("join");
    }

    let lost = t
        .count(
            "SELECT count(*) FROM {schema}.steps s
             WHERE s.status = 'waiting'
               AND EXISTS (SELECT 1 FROM {schema}.signals g
                           WHERE g.run_id = s.run_id AND g.consumed_by IS NULL)",
            &[],
        )
        .await;
    assert_eq!(lost, 0, "rows left waiting beside their unconsumed signal");
    assert_eq!(t.count(finished, &[]).await, RACES, "every run finished");
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.steps WHERE status <> 'completed'",
            &[]
        )
        .await,
        0,
        "no row left parked, scheduled or in progress"
    );
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.steps", &[]).await,
        RACES,
        "one attempt each"
    );
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.signals", &[]).await,
        RACES
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.signals g
             JOIN {schema}.steps s ON s.id = g.consumed_by AND s.run_id = g.run_id
             JOIN {schema}.runs r ON r.id = g.run_id
             WHERE g.payload = r.input
               AND s.output = jsonb_build_object('signal', r.input)",
            &[]
        )
        .await,
        RACES,
        "each signal consumed by its own run's step, whose body saw it"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events e
             JOIN {schema}.signals g ON g.id = (e.details->>'signal_id')::bigint
                                    AND g.run_id = e.run_id AND g.consumed_by = e.step_id
             WHERE e.event = 'signal_consumed'",
            &[]
        )
        .await,
        RACES
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'signal_consumed'",
            &[]
        )
        .await,
        RACES,
        "consumed exactly once"
    );
    assert_eq!(
        t.count(
            "SELECT count(*) FROM {schema}.events WHERE event = 'late_completion_ignored'",
            &[]
        )
        .await,
        0
    );
    let parked_first = t
        .count(
            "SELECT count(DISTINCT run_id) FROM {schema}.events WHERE event = 'step_waiting'",
            &[],
        )
        .await;
    let parks: HashMap<&str, i64> = HashMap::from([
        ("parked before their signal", parked_first),
        ("signal before the step", RACES - parked_first),
    ]);
    eprintln!(
        "{RACES} emit-versus-wait races: started in {started_in:?}, signals sent by {sent_in:?}, \
         all finished by {raced_in:?}; {parks:?}"
    );
    // Both orders happened, or the race tested nothing.
    assert!(parked_first > 0 && parked_first < RACES, "{parks:?}");
}
