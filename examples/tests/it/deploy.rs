//! `order-fulfilment --print-definitions`: the README's pre-deploy hook, run
//! as a user would, writes what the binary's worker runs, without a database.

use pgbus_examples::{Fulfil, NotifyVendor};
use pgbus_runtime::deploy::Definitions;
use pgbus_testkit::TestDatabase;

#[tokio::test]
async fn print_definitions_writes_what_the_worker_runs_without_a_database() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_order-fulfilment"))
        .arg("--print-definitions")
        // Nothing listens there: the hook must not connect.
        .env("DATABASE_URL", "postgres://127.0.0.1:1/nothing")
        .output()
        .expect("run order-fulfilment");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("UTF-8");
    let printed = Definitions::parse(&text).expect("a definitions document");
    assert_eq!(printed, pgbus_examples::definitions());

    // The same as the binary's worker, built as it builds it.
    let db = TestDatabase::new().await.expect("a test schema");
    let worker = db
        .db()
        .worker()
        .register(Fulfil::new(2))
        .register(NotifyVendor)
        .build()
        .expect("worker");
    assert_eq!(worker.definitions(), printed);
    let workflows: Vec<&str> = printed
        .definitions
        .iter()
        .map(|d| d.workflow.as_str())
        .collect();
    assert_eq!(workflows, ["orders.fulfil", "orders.notify_vendor"]);
    assert_eq!(printed.queues, ["orders"]);
}
