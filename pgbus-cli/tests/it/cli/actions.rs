//! The commands that act: operator actions, `sweep` and `stats`; payloads
//! and reasons; and what every command does without a database or behind a
//! held lock.

use pgbus_runtime::RunStatus;

use super::Ops;
use crate::common::{TestSchema, database_url, json};

#[tokio::test]
async fn operator_actions_move_runs_and_refuse_illegal_moves() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let id = run.0.to_string();

    assert_eq!(
        t.ok(&["pause", &id, "--reason", "checking"]),
        format!("run {id}: paused\n")
    );
    let err = t.fails(&["pause", &id, "--reason", "again"], 1);
    assert!(err.contains("paused"), "{err}");
    assert_eq!(
        t.ok(&["skip", &id, "--reason", "not needed"]),
        format!("run {id}: ready\n")
    );
    let view = t.db.client().run(run).await.expect("run");
    let skipped = view
        .events
        .iter()
        .find(|e| e.event == "step_skipped")
        .expect("a step_skipped event");
    // `cli:$USER` (the same variable names the database role when the URL does not).
    let expected = std::env::var("USER")
        .ok()
        .filter(|u| !u.trim().is_empty())
        .map_or_else(|| "cli".to_owned(), |u| format!("cli:{}", u.trim()));
    assert_eq!(skipped.actor, expected);
    assert_eq!(skipped.reason.as_deref(), Some("not needed"));

    assert_eq!(
        t.ok(&["pause", &id, "--reason", "again", "--actor", "alice"]),
        format!("run {id}: paused\n")
    );
    assert_eq!(
        t.ok(&["resume", &id, "--reason", "go on"]),
        format!("run {id}: ready\n")
    );
    assert_eq!(
        t.ok(&["cancel", &id, "--reason", "done"]),
        format!("run {id}: cancelled\n")
    );
    let err = t.fails(&["resume", &id, "--reason", "back"], 1);
    assert!(err.contains("cancelled"), "{err}");
    t.fails(&["cancel", &id], 2);
    let err = t.fails(&["pause", "987654321", "--reason", "x"], 1);
    assert!(err.contains("987654321"), "{err}");
    let err = t.fails(&["pause", &id, "--reason", "x", "--actor", " "], 1);
    assert!(err.to_lowercase().contains("actor"), "{err}");
}

#[tokio::test]
async fn sweep_repairs_a_stalled_attempt_once() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    // Claimed by a worker that is gone, past its stall horizon.
    t.execute(
        "WITH s AS (
             UPDATE {schema}.steps
             SET status = 'in_progress', worker_id = 'gone', started_at = now() - interval '1 minute',
                 stall_at = now() - interval '1 second'
             WHERE run_id = $1
             RETURNING run_id)
         UPDATE {schema}.runs SET status = 'performing' WHERE id IN (SELECT run_id FROM s)",
        run,
    )
    .await;
    let report = t.ok(&["sweep"]);
    assert!(
        report.starts_with("repaired 1 stalled attempts"),
        "{report}"
    );
    assert_eq!(t.status(run).await, RunStatus::Paused);
    let view = t.db.client().run(run).await.expect("run");
    assert_eq!(
        view.error_class.as_deref(),
        Some("pgbus_runtime::error::StepStalled")
    );
    assert!(t.ok(&["sweep"]).starts_with("repaired 0 stalled attempts"));
    // Retention only when asked: the run paused above is not ended, so even
    // `--retention 0s` deletes nothing here; a cancelled one goes.
    t.ok(&["cancel", &run.0.to_string(), "--reason", "gone"]);
    assert!(t.ok(&["sweep"]).contains("deleted 0 runs"));
    assert!(
        t.ok(&["sweep", "--retention", "0s"])
            .contains("deleted 1 runs")
    );
    let err = t.fails(&["show", &run.0.to_string()], 1);
    assert!(
        err.contains("not found") || err.contains(&run.0.to_string()),
        "{err}"
    );
    let err = t.fails(&["sweep", "--stall-action", "reattempt"], 2);
    assert!(err.contains("reattempt"), "{err}");
    t.fails(&["sweep", "--retention", "a while"], 2);
    let err = t.fails(&["sweep", "--lost-worker-threshold", "1s"], 2);
    assert!(err.contains("at least 10s"), "{err}");
    assert!(
        t.ok(&["sweep", "--retention", "forever"])
            .contains("deleted 0 runs")
    );
}

#[tokio::test]
async fn stats_counts_runs_per_bucket_and_cuts_to_the_retention_age() {
    let t = TestSchema::new().await;
    let client = t.db.client();
    let old = client.start::<Ops>(&()).await.expect("start").run_id;
    let paused = client.start::<Ops>(&()).await.expect("start").run_id;
    let cancelled = client.start::<Ops>(&()).await.expect("start").run_id;
    t.backdate(old).await;
    t.ok(&["pause", &paused.0.to_string(), "--reason", "look"]);
    t.ok(&["cancel", &cancelled.0.to_string(), "--reason", "drop"]);

    let totals = |window: &str| -> [i64; 4] {
        let value = json(&t.ok(&["stats", "--window", window, "--json"]));
        let buckets = value["buckets"].as_array().expect("buckets").clone();
        let sum = |key: &str| {
            buckets
                .iter()
                .map(|b| b[key].as_i64().expect("a count"))
                .sum()
        };
        [
            sum("started"),
            sum("finished"),
            sum("paused"),
            sum("cancelled"),
        ]
    };
    assert_eq!(totals("1h"), [2, 0, 1, 1]);
    assert_eq!(totals("24h"), [3, 0, 1, 1]);
    let value = json(&t.ok(&["stats", "--window", "1h", "--json"]));
    assert_eq!(value["buckets"].as_array().expect("buckets").len(), 13);
    assert_eq!(value["range"]["capped"], false);

    let text = t.ok(&["stats", "--window", "30d", "--retention", "7d"]);
    assert!(text.starts_with("window 30d from "), "{text}");
    assert!(text.contains("cut to 7d"), "{text}");
    let total = text.lines().last().expect("a total line");
    assert!(
        total.split_whitespace().eq(["total", "3", "0", "1", "1"]),
        "{total}"
    );
    let value = json(&t.ok(&["stats", "--window", "30d", "--retention", "7d", "--json"]));
    assert_eq!(value["range"]["capped"], true);
    assert_eq!(value["buckets"].as_array().expect("buckets").len(), 8);
    assert!(!t.ok(&["stats", "--window", "7d"]).contains("cut to"));

    let err = t.fails(&["stats", "--window", "2h"], 2);
    assert!(
        err.contains("unknown window `2h`: use 1h, 24h, 7d or 30d"),
        "{err}"
    );

    // A workflow prefix counts its workflows; each part says what it read.
    let value = json(&t.ok(&[
        "stats",
        "--window",
        "24h",
        "--workflow-prefix",
        "cli.",
        "--json",
    ]));
    assert_eq!(value["workflow_prefix"], "cli.");
    let started: i64 = value["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| b["started"].as_i64().expect("a count"))
        .sum();
    assert_eq!(started, 3);
    assert_eq!(value["buckets"][0]["children"]["started"], 0);
    assert_eq!(value["coverage"]["started"]["read"], 3);
    assert_eq!(value["coverage"]["started"]["partial"], false);
    assert_eq!(value["coverage"]["started"]["cap"], 30_000);
    let text = t.ok(&["stats", "--window", "24h", "--workflow-prefix", "other."]);
    assert!(text.contains("workflows starting with other."), "{text}");
    let total = text.lines().last().expect("a total line");
    assert!(
        total.split_whitespace().eq(["total", "0", "0", "0", "0"]),
        "{total}"
    );
}

#[test]
fn without_a_database_url_it_says_so() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .arg("runs")
        .env_remove("DATABASE_URL")
        .output()
        .expect("run pgbus");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--database-url"));

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .arg("runs")
        .env("DATABASE_URL", "postgres://127.0.0.1:1/nothing")
        .output()
        .expect("run pgbus");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[tokio::test]
async fn payloads_come_from_files_or_stdin_and_reasons_must_say_something() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let id = run.0.to_string();

    // From standard input.
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .args(["signal", &id, "go", "--payload-file", "-"])
        .env("DATABASE_URL", database_url())
        .env("PGBUS_SCHEMA", &t.name)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run pgbus");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin
            .write_all(format!("{{\"note\": \"{}\"}}", "x".repeat(200_000)).as_bytes())
            .expect("write the payload");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view = t.db.client().run(run).await.expect("run");
    assert_eq!(view.signals.len(), 1);
    assert_eq!(
        view.signals[0].payload["note"].as_str().map(str::len),
        Some(200_000)
    );

    let err = t.fails(&["signal", &id, "go", "--payload-file", "/no/such/file"], 1);
    assert!(err.contains("/no/such/file"), "{err}");
    t.fails(
        &["signal", &id, "go", "--payload", "1", "--payload-file", "-"],
        2,
    );

    let err = t.fails(&["pause", &id, "--reason", "  "], 2);
    assert!(err.contains("a reason must say why"), "{err}");
    let long = "r".repeat(10_001);
    let err = t.fails(&["pause", &id, "--reason", &long], 2);
    assert!(err.contains("1 to 10,000 characters"), "{err}");
}

/// A signal no step of the run's workflow waits for is refused, in one line
/// naming the likely name, the names waited for and `--unchecked`, and
/// nothing is stored; `--unchecked` sends it.
#[tokio::test]
async fn a_signal_no_step_waits_for_is_refused_unless_unchecked() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let id = run.0.to_string();

    let err = t.fails(&["signal", &id, "Go"], 1);
    assert!(
        err.contains("no step of workflow `cli.ops` waits for signal `Go`; did you mean `go`?"),
        "{err}"
    );
    assert!(err.contains("(its steps wait for `go`)"), "{err}");
    assert!(err.contains("`pgbus signal --unchecked`"), "{err}");
    assert!(
        t.db.client()
            .run(run)
            .await
            .expect("run")
            .signals
            .is_empty()
    );

    let sent = t.ok(&["signal", &id, "later.version", "--unchecked"]);
    assert!(sent.contains("`later.version` sent to run"), "{sent}");
    let view = t.db.client().run(run).await.expect("run");
    assert_eq!(view.signals.len(), 1);
    assert_eq!(view.signals[0].name, "later.version");
}

/// A table another session holds locked (`LOCK TABLE`, as a long migration or
/// an operator in `psql` would) ends each command after its lock timeout with
/// one line naming the flag, exit 1, rather than a hang; and the command
/// leaves no backend waiting on the lock behind it.
#[tokio::test]
async fn a_held_lock_ends_each_command_within_its_lock_timeout() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let id = run.0.to_string();

    let locker = t.lock_runs().await;

    for args in [
        vec!["--lock-timeout", "200ms", "runs"],
        vec!["--lock-timeout", "200ms", "show", &id],
        vec!["--lock-timeout", "200ms", "pause", &id, "--reason", "lock"],
    ] {
        let err = t.fails(&args, 1);
        assert!(err.contains("lock timeout"), "{args:?}: {err}");
        assert!(err.contains("--lock-timeout"), "{args:?}: {err}");
    }
    assert_eq!(
        t.waiting_on_runs(&locker).await,
        0,
        "no backend left waiting on the lock"
    );

    locker.batch_execute("ROLLBACK").await.expect("unlock");
    assert_eq!(
        t.status(run).await,
        RunStatus::Ready,
        "the pause did not land"
    );
    let err = t.fails(&["--lock-timeout", "0ms", "runs"], 2);
    assert!(err.contains("at least 1ms"), "{err}");
}

/// Every command but `migrate` runs its statements under a statement
/// timeout: with every table of the schema locked and a lock timeout longer
/// than the test, each one ends after its `--statement-timeout` with one
/// line naming the flag, exit 1. The statement timeout counts the wait for a
/// lock too, so a lock is a statement that takes as long as the test says.
#[tokio::test]
async fn every_command_runs_under_its_statement_timeout() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let id = run.0.to_string();
    let definitions = std::env::temp_dir().join(format!("{}-definitions.json", t.name));
    std::fs::write(
        &definitions,
        pgbus_runtime::deploy::Definitions::of([<Ops as pgbus_runtime::Workflow>::DEFINITION])
            .to_json(),
    )
    .expect("write");
    let definitions = definitions.to_str().expect("a path").to_owned();

    let locker = t.database.raw_client().await.expect("connect");
    locker
        .batch_execute(&format!(
            "BEGIN;
             DO $$ DECLARE t text; BEGIN
               FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = '{0}' LOOP
                 EXECUTE format('LOCK TABLE %I.%I IN ACCESS EXCLUSIVE MODE', '{0}', t);
               END LOOP;
             END $$",
            t.name
        ))
        .await
        .expect("lock every table");

    let commands: [&[&str]; 10] = [
        &["runs"],
        &["show", &id],
        &["show", &id, "--follow"],
        &["stats"],
        &["workers"],
        &["schedules", "list"],
        &["pause", &id, "--reason", "timeout"],
        &["signal", &id, "go"],
        &["sweep"],
        &["deploy-check", &definitions],
    ];
    for command in commands {
        let mut args = vec!["--statement-timeout", "300ms", "--lock-timeout", "10m"];
        args.extend_from_slice(command);
        let err = t.fails(&args, 1);
        assert!(
            err.contains("statement timeout")
                && err.contains("`--statement-timeout` allows longer"),
            "{command:?}: {err}"
        );
    }
    locker.batch_execute("ROLLBACK").await.expect("unlock");
    assert_eq!(t.status(run).await, RunStatus::Ready, "nothing landed");
}

#[tokio::test]
async fn migrate_makes_a_schema_nobody_migrated_and_then_has_nothing_to_do() {
    let t = TestSchema::unmigrated().await;
    let up_to_date = format!("schema {} is up to date\n", t.name);
    assert_eq!(t.ok(&["migrate"]), up_to_date);
    assert_eq!(t.ok(&["runs"]), "no runs match\n");
    assert_eq!(t.ok(&["migrate"]), up_to_date);
}
