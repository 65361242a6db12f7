//! `pgbus schedules` (issue 20): create, list, show, update, pause, resume,
//! delete, and the typed errors naming the field.

use super::Ops;
use crate::common::{TestSchema, json};

#[tokio::test]
async fn schedules_are_created_and_bad_input_refused_naming_the_field() {
    let t = TestSchema::new().await;
    assert_eq!(t.ok(&["schedules", "list"]), "no schedules\n");
    let created = t.ok(&[
        "schedules",
        "create",
        "nightly",
        "--workflow",
        "cli.ops",
        "--cron",
        "0 30 2 * * *",
        "--timezone",
        "Europe/Berlin",
        "--catch-up",
        "all(3)",
    ]);
    // No worker of `cli.ops` runs here: the command says the schedule waits for one.
    assert!(
        created.starts_with("no live worker has registered workflow cli.ops"),
        "{created}"
    );
    assert!(
        created.contains("\nschedule nightly: created; next tick "),
        "{created}"
    );
    let err = t.fails(
        &[
            "schedules",
            "create",
            "nightly",
            "--workflow",
            "cli.ops",
            "--cron",
            "* * * * * *",
        ],
        1,
    );
    assert!(err.contains("exists already"), "{err}");
    let err = t.fails(
        &[
            "schedules",
            "create",
            "bad",
            "--workflow",
            "cli.ops",
            "--cron",
            "* * * * * *",
            "--timezone",
            "Mars/Base",
        ],
        1,
    );
    assert!(err.contains("`timezone`"), "{err}");
    let err = t.fails(
        &[
            "schedules",
            "create",
            "bad",
            "--workflow",
            "cli.ops",
            "--cron",
            "0 0 0 31 2 *",
        ],
        1,
    );
    assert!(err.contains("never fires"), "{err}");
    t.fails(
        &[
            "schedules",
            "create",
            "bad",
            "--workflow",
            "cli.ops",
            "--cron",
            "* * * * * *",
            "--catch-up",
            "sometimes",
        ],
        2,
    );
}

/// `nightly` on `cli.ops`, at 02:30 in Berlin.
fn create_nightly(t: &TestSchema) {
    t.ok(&[
        "schedules",
        "create",
        "nightly",
        "--workflow",
        "cli.ops",
        "--cron",
        "0 30 2 * * *",
        "--timezone",
        "Europe/Berlin",
        "--catch-up",
        "all(3)",
    ]);
}

#[tokio::test]
async fn a_schedule_is_listed_shown_paused_resumed_updated_and_deleted() {
    let t = TestSchema::new().await;
    create_nightly(&t);
    let listed = t.ok(&["schedules", "list"]);
    assert!(listed.contains("nightly"), "{listed}");
    assert!(listed.contains("Europe/Berlin"), "{listed}");
    assert!(listed.contains("all(3)"), "{listed}");
    let shown = json(&t.ok(&["schedules", "show", "nightly", "--json"]));
    assert_eq!(shown["workflow"], "cli.ops");
    assert_eq!(shown["origin"], "client");
    assert!(shown["next_tick_at"].is_string(), "{shown}");

    let paused = t.ok(&[
        "schedules",
        "pause",
        "nightly",
        "--reason",
        "holiday",
        "--actor",
        "bob",
    ]);
    assert_eq!(paused, "schedule nightly: paused; next tick - (paused)\n");
    let shown = t.ok(&["schedules", "show", "nightly"]);
    assert!(shown.contains("by bob: holiday"), "{shown}");
    let err = t.fails(&["schedules", "pause", "nightly", "--reason", "again"], 1);
    assert!(err.contains("paused already"), "{err}");
    let resumed = t.ok(&["schedules", "resume", "nightly"]);
    assert!(
        resumed.starts_with("schedule nightly: resumed; next tick 20"),
        "{resumed}"
    );
    let updated = t.ok(&[
        "schedules",
        "update",
        "nightly",
        "--cron",
        "0 0 * * * *",
        "--input",
        "{\"a\":1}",
    ]);
    assert!(
        updated.starts_with("schedule nightly: updated"),
        "{updated}"
    );
    let shown = json(&t.ok(&["schedules", "show", "nightly", "--json"]));
    assert_eq!(shown["expression"], "0 0 * * * *");
    assert_eq!(shown["input"], serde_json::json!({"a": 1}));

    // Deleting one leaves the others.
    t.db.client()
        .create_schedule::<Ops>(
            "other",
            &pgbus_runtime::schedule::Schedule::cron("@hourly"),
            &(),
        )
        .await
        .expect("created");
    assert_eq!(
        t.ok(&["schedules", "delete", "nightly"]),
        "schedule nightly: deleted\n"
    );
    let err = t.fails(&["schedules", "delete", "nightly"], 1);
    assert!(err.contains("does not exist"), "{err}");
    let listed = json(&t.ok(&["schedules", "list", "--json"]));
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
}
