//! `--replica-url` (and `PGBUS_REPLICA_URL`): `runs`, `show` (with
//! `--follow`), `stats` and `workers` read from the replica and say how far
//! behind it is; actions go to the primary. The "replica" is the test
//! server in read-only sessions; one that does not answer shows which
//! commands go where.

use std::process::Command;

use pgbus_runtime::RunStatus;

use super::Ops;
use crate::common::{TestSchema, database_url, json, stdout};

/// The test server in read-only sessions, as a replica would be.
fn replica_url() -> String {
    let url = database_url();
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20default_transaction_read_only%3Don")
}

/// `pgbus args...` on `t` with `replica` as `PGBUS_REPLICA_URL`.
fn with_replica(t: &TestSchema, replica: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .args(args)
        .env("DATABASE_URL", database_url())
        .env("PGBUS_SCHEMA", &t.name)
        .env("PGBUS_REPLICA_URL", replica)
        .env_remove("PGBUS_RETENTION")
        .output()
        .expect("run pgbus")
}

const NOT_A_REPLICA: &str = "replica: not in recovery (reading a primary)\n";

#[tokio::test]
async fn reads_go_to_the_replica_and_say_its_lag_while_actions_go_to_the_primary() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let id = run.0.to_string();
    let replica = replica_url();

    // Each read works from the replica and says how far behind it is, on
    // standard error, so `--json` stays one document.
    for args in [
        vec!["--replica-url", &replica, "runs", "--json"],
        vec!["--replica-url", &replica, "show", &id, "--json"],
        vec!["--replica-url", &replica, "stats", "--json"],
        vec!["--replica-url", &replica, "workers", "--json"],
    ] {
        let out = t.pgbus(&args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            NOT_A_REPLICA,
            "{args:?}"
        );
        json(&stdout(&out));
    }
    let out = with_replica(&t, &replica, &["runs", "--json"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        NOT_A_REPLICA,
        "the variable too"
    );
    assert_eq!(json(&stdout(&out))[0]["id"], run.0);

    // Actions go to the primary (read-only sessions would refuse them),
    // and say nothing of a replica.
    let out = with_replica(&t, &replica, &["pause", &id, "--reason", "look"]);
    assert!(out.status.success(), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    assert_eq!(t.status(run).await, RunStatus::Paused);

    // A replica that does not answer: the reads fail naming it, the
    // actions never touch it.
    let gone = "postgres://127.0.0.1:1/replica";
    for args in [
        ["runs"].as_slice(),
        &["show", &id],
        &["show", &id, "--follow"],
        &["stats"],
        &["workers"],
    ] {
        let out = with_replica(&t, gone, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("the replica (--replica-url): ") && err.contains("127.0.0.1:1"),
            "{args:?}: {err}"
        );
    }
    for args in [
        ["resume", &id, "--reason", "back"].as_slice(),
        &["signal", &id, "go"],
        &["cancel", &id, "--reason", "done"],
        &["sweep"],
        &["schedules", "list"],
    ] {
        let out = with_replica(&t, gone, args);
        assert!(out.status.success(), "{args:?}: {out:?}");
    }
    assert_eq!(t.status(run).await, RunStatus::Cancelled);

    // Following from the replica: the run has ended, so nothing to follow.
    let out = with_replica(&t, &replica, &["show", &id, "--follow"]);
    assert!(out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(NOT_A_REPLICA) && err.contains("nothing to follow"),
        "{err}"
    );
    // An empty variable is no replica.
    let out = with_replica(&t, "", &["runs"]);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
}

/// A replica's sessions carry the command's statement timeout too.
#[tokio::test]
async fn a_read_on_the_replica_runs_under_the_statement_timeout() {
    let t = TestSchema::new().await;
    let locker = t.lock_runs().await;
    let out = t.pgbus(&[
        "--replica-url",
        &replica_url(),
        "--statement-timeout",
        "300ms",
        "--lock-timeout",
        "10m",
        "runs",
    ]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines[0], NOT_A_REPLICA.trim_end(), "{err}");
    assert!(
        lines[1].starts_with("pgbus: ") && lines[1].contains("statement timeout"),
        "{err}"
    );
    locker.batch_execute("ROLLBACK").await.expect("unlock");
}
