//! How many statements a wait sends: counted on the wire, by a proxy between
//! the client and the server that reads the protocol's frontend messages.

use std::time::Duration;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Database, Error};

use super::{BOUND, Gate, listening};
use crate::pg::TestDb;
use crate::wire::WireCounter;

/// A wait for a run that ends after a while reads the run a bounded number
/// of times, however long it waits and however many other runs end
/// meanwhile: no hot loop, and other runs' notifications wake nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_reads_its_run_a_few_times_not_in_a_loop() -> Result<(), Error> {
    let t = TestDb::new().await;
    let proxy = WireCounter::start();
    let db =
        Database::connect_with(&proxy.url(), t.db.schema().clone(), t.db.clock().clone()).await?;
    let waiter = db.client();
    let client = t.client();
    let run = client.start::<Gate>(&()).await?.run_id;
    let others: Vec<RunId> = {
        let mut others = Vec::new();
        for _ in 0..20 {
            others.push(client.start::<Gate>(&()).await?.run_id);
        }
        others
    };

    let before = proxy.statements();
    let waiting = tokio::spawn(waiter.result::<Gate>(run).into_future());
    assert!(listening(&t, 1).await, "the waiter listens");
    // A while, with twenty other runs ending on the same channel.
    for other in &others {
        client.cancel(*other, "ops", "not this one").await?;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let while_waiting = proxy.statements() - before;
    client.cancel(run, "ops", "this one").await?;
    let ended = tokio::time::timeout(BOUND, waiting)
        .await
        .expect("woken")
        .expect("the wait's task");
    assert!(
        matches!(ended, Err(Error::RunCancelled { .. })),
        "{ended:?}"
    );
    let total = proxy.statements() - before;
    // The first read; one more when the session came up (a run may have
    // ended before it listened); `LISTEN`; the read after the end; and the
    // pool's check of a connection idle for over a second (an empty query).
    assert!(
        while_waiting <= 4,
        "{while_waiting} statements while waiting: a poll in a loop?"
    );
    assert!(total <= 6, "{total} statements in all");
    Ok(())
}
