//! The `pgbus` binary against the real server: each test in a schema of its
//! own, the runs made and worked through the library, the command run as an
//! operator would (`DATABASE_URL`, `PGBUS_SCHEMA`), its output and exit code
//! checked.

// Test support code outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

use pgbus_runtime::prelude::*;
use pgbus_runtime::{RunId, RunStatus};

mod common;
use common::{TestSchema, database_url, json};

struct Ops;

#[workflow(name = "cli.ops")]
impl Ops {
    #[step]
    async fn first(&self, cx: &mut StepCx<()>) -> StepResult {
        cx.output(&"one")?;
        Ok(Flow::Complete)
    }

    #[step(wait_for(name = "go"))]
    async fn second(&self, _cx: &mut StepCx<()>) {}

    #[step]
    async fn third(&self, _cx: &mut StepCx<()>) {}
}

/// Runs a worker of [`Ops`] on `t` until nothing is due.
async fn work(t: &TestSchema) {
    let worker = t.db.worker().register(Ops).build().expect("worker");
    worker.run_until_idle().await.expect("run");
}

#[tokio::test]
async fn runs_lists_with_filters_as_a_table_or_json() {
    let t = TestSchema::new().await;
    let client = t.db.client();
    let old = client.start::<Ops>(&()).await.expect("start").run_id;
    let new = client.start::<Ops>(&()).await.expect("start").run_id;
    t.backdate(old).await;
    client.pause(new, "ops", "look").await.expect("pause");

    let table = t.ok(&["runs"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 3, "{table}");
    assert!(lines[0].trim_start().starts_with("ID"), "{table}");
    assert!(
        lines[1].contains(&new.0.to_string()) && lines[1].contains("paused"),
        "{table}"
    );
    assert!(
        lines[2].contains(&old.0.to_string()) && lines[2].contains("ready"),
        "{table}"
    );

    let ids = |args: &[&str]| -> Vec<i64> {
        json(&t.ok(args))
            .as_array()
            .expect("an array")
            .iter()
            .map(|r| r["id"].as_i64().expect("an id"))
            .collect()
    };
    assert_eq!(ids(&["runs", "--json"]), [new.0, old.0]);
    assert_eq!(ids(&["runs", "--json", "--status", "paused"]), [new.0]);
    assert_eq!(ids(&["runs", "--json", "--since", "1h"]), [new.0]);
    assert_eq!(ids(&["runs", "--json", "--older-than", "1h"]), [old.0]);
    assert_eq!(ids(&["runs", "--json", "--limit", "1"]), [new.0]);
    assert_eq!(
        ids(&["runs", "--json", "--workflow", "cli.ops"]),
        [new.0, old.0]
    );
    assert_eq!(t.ok(&["runs", "--workflow", "other"]), "no runs match\n");

    let err = t.fails(&["runs", "--status", "stuck"], 2);
    assert!(err.contains("unknown status `stuck`"), "{err}");
    let err = t.fails(&["runs", "--since", "soon"], 2);
    assert!(err.contains("--since"), "{err}");
    t.fails(&["runs", "--limit", "0"], 2);
}

#[tokio::test]
async fn show_prints_steps_timeline_signals_and_events() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    work(&t).await;
    assert_eq!(t.status(run).await, RunStatus::Ready, "parked on `go`");

    let text = t.ok(&["show", &run.0.to_string()]);
    for part in [
        &format!("run {}  cli.ops  ready", run.0),
        "steps",
        "\"one\"",
        "timeline",
        "events",
        "step_waiting",
    ] {
        assert!(text.contains(part), "`{part}` in:\n{text}");
    }
    // The parked attempt is still waiting, its piece open.
    let waiting = text
        .lines()
        .find(|l| l.contains("second#1") && l.contains("waiting"))
        .unwrap_or_else(|| panic!("a waiting piece in:\n{text}"));
    assert!(waiting.contains("still going"), "{waiting}");

    let value = json(&t.ok(&["show", &run.0.to_string(), "--json"]));
    assert_eq!(value["run"]["run"]["id"], run.0);
    let pieces: Vec<&str> = value["timeline"]
        .as_array()
        .expect("a timeline")
        .iter()
        .map(|s| s["piece"].as_str().expect("a piece"))
        .collect();
    assert!(
        pieces.contains(&"ran") && pieces.contains(&"waiting"),
        "{pieces:?}"
    );

    // A signal through the command wakes the step; the run goes on.
    let sent = t.ok(&[
        "signal",
        &run.0.to_string(),
        "go",
        "--payload",
        "{\"ok\": true}",
    ]);
    assert!(
        sent.starts_with("signal ") && sent.contains(&format!("`go` sent to run {}", run.0)),
        "{sent}"
    );
    work(&t).await;
    assert_eq!(t.status(run).await, RunStatus::Finished);
    let text = t.ok(&["show", &run.0.to_string()]);
    assert!(
        text.contains("signals") && text.contains("{\"ok\":true}"),
        "{text}"
    );

    let err = t.fails(
        &["signal", &run.0.to_string(), "go", "--payload", "{nope"],
        1,
    );
    assert!(err.contains("--payload is not JSON"), "{err}");
    let err = t.fails(&["signal", &run.0.to_string(), "go"], 1);
    assert!(
        err.contains("finished"),
        "a finished run takes no signal: {err}"
    );
    let err = t.fails(&["show", "987654321"], 1);
    assert!(err.contains("987654321"), "{err}");
}

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

#[tokio::test]
async fn listings_page_back_survive_a_closed_pipe_and_hint_at_migrating() {
    let t = TestSchema::new().await;
    let client = t.db.client();
    let mut runs = Vec::new();
    for _ in 0..3 {
        runs.push(client.start::<Ops>(&()).await.expect("start").run_id.0);
    }
    let page = |args: &[&str]| -> Vec<i64> {
        json(&t.ok(args))
            .as_array()
            .expect("an array")
            .iter()
            .map(|r| r["id"].as_i64().expect("an id"))
            .collect()
    };
    assert_eq!(
        page(&["runs", "--json", "--limit", "2"]),
        [runs[2], runs[1]]
    );
    let before = runs[1].to_string();
    assert_eq!(page(&["runs", "--json", "--before", &before]), [runs[0]]);

    // A reader that stops after one byte, with far more than a pipe holds
    // still to come: no panic, a clean exit.
    let big = serde_json::json!({ "note": "y".repeat(250_000) });
    client
        .signal(RunId(runs[0]), "go", &big)
        .await
        .expect("signal");
    let first = runs[0].to_string();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .args(["show", &first, "--json"])
        .env("DATABASE_URL", database_url())
        .env("PGBUS_SCHEMA", &t.name)
        .env("RUST_BACKTRACE", "0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run pgbus");
    {
        use std::io::Read as _;
        let mut stdout = child.stdout.take().expect("stdout");
        let mut one = [0_u8; 1];
        stdout.read_exact(&mut one).expect("a first byte");
    }
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A schema nobody migrated: the error says what to do.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .arg("runs")
        .env("DATABASE_URL", database_url())
        .env("PGBUS_SCHEMA", "t_never_migrated")
        .output()
        .expect("run pgbus");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("run `pgbus migrate`"), "{err}");

    // A server that is not there: the error names it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .arg("runs")
        .env("DATABASE_URL", "postgres://127.0.0.1:1/nothing")
        .output()
        .expect("run pgbus");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("127.0.0.1:1"), "{err}");
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

/// `show` of a run with thousands of attempts prints the latest 200 of each
/// list and says how many there are; `--last` asks for more, up to 5000;
/// `--json` carries the counts.
/// A value longer than `show` reads is named with its length and the
/// command that reads it, in the text and the JSON, and that command does.
#[tokio::test]
async fn show_names_a_value_too_long_to_read_and_how_to_read_it() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    t.execute(
        "UPDATE {schema}.steps SET output = to_jsonb(repeat('o', 20000)) WHERE run_id = $1",
        run,
    )
    .await;
    let id = run.0.to_string();
    let text = t.ok(&["show", &id]);
    let hint = format!("(20002 bytes, left out: `pgbus show {id} --json --value-bytes 20002`)");
    assert!(text.contains(&hint), "{text}");
    let cut = json(&t.ok(&["show", &id, "--json"]));
    assert_eq!(cut["run"]["omitted"][0]["bytes"], 20002);
    assert_eq!(cut["run"]["steps"][0]["output"], serde_json::Value::Null);
    let whole = json(&t.ok(&["show", &id, "--json", "--value-bytes", "20002"]));
    assert_eq!(
        whole["run"]["steps"][0]["output"].as_str().map(str::len),
        Some(20000)
    );
    assert!(
        whole["run"]["omitted"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
}

#[tokio::test]
async fn show_of_a_long_run_is_bounded_and_says_so() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    t.failed_attempts(run, "first", 3001, &["step_started"])
        .await;
    let id = run.0.to_string();

    let text = t.ok(&["show", &id]);
    assert!(
        text.contains(
            "(the latest 200 of 3001 attempts, 3001 events, 0 signals, 0 batches and 0 paused periods"
        ),
        "{}",
        &text[text.len().saturating_sub(400)..]
    );
    let all = json(&t.ok(&["show", &id, "--json", "--last", "5000"]));
    assert_eq!(all["counts"]["attempts"], 3001);
    assert_eq!(all["run"]["steps"].as_array().map(Vec::len), Some(3001));
    let few = json(&t.ok(&["show", &id, "--json", "--last", "10"]));
    assert_eq!(few["run"]["steps"].as_array().map(Vec::len), Some(10));
    assert_eq!(few["run"]["events"].as_array().map(Vec::len), Some(10));
    assert_eq!(few["run"]["steps"][9]["attempt"], 3001, "the latest kept");
    for bad in ["0", "5001", "x"] {
        let err = t.fails(&["show", &id, "--last", bad], 2);
        assert!(err.contains("1 to 5000"), "{err}");
    }

    // Batches and paused periods are cut too.
    t.execute(
        "INSERT INTO {schema}.events (run_id, event, actor, created_at)
         SELECT $1, kind, 'ops', now() - make_interval(secs => 1000 - n) + make_interval(secs => k)
         FROM generate_series(1, 300) AS n, (VALUES ('paused', 0), ('resumed', 0.5)) AS e(kind, k)",
        run,
    )
    .await;
    let few = json(&t.ok(&["show", &id, "--json", "--last", "10"]));
    assert_eq!(few["counts"]["paused"], 300);
    let paused_bars = few["timeline"]
        .as_array()
        .map_or(0, |s| s.iter().filter(|s| s["piece"] == "paused").count());
    assert_eq!(paused_bars, 10, "the latest 10 paused periods");
}

/// What a run holds reaches the terminal escaped: an error message with an
/// escape sequence, an OSC 8 link, a carriage return and a forged line, an
/// actor with a right-to-left override, and a key with a zero-width space
/// come out as visible `\u{..}` escapes; nothing of them acts on the
/// terminal or starts a line of its own.
#[tokio::test]
async fn show_escapes_what_would_act_on_a_terminal() {
    let t = TestSchema::new().await;
    let run =
        t.db.client()
            .start_idempotent::<Ops>(&(), "order\u{200b}7")
            .await
            .expect("start")
            .run_id;
    t.execute(
        "UPDATE {schema}.steps SET status = 'failed', outcome = 'paused',
             error_class = 'Boom',
             error_message = E'red \\x1b[31mtext\\x1b[0m \\x1b]8;;http://evil.example\\x07link\\x1b]8;;\\x07 over\\rwrite\\nFORGED line'
         WHERE run_id = $1",
        run,
    )
    .await;
    t.execute(
        "UPDATE {schema}.runs AS r SET error_class = s.error_class, error_message = s.error_message
         FROM {schema}.steps AS s WHERE s.run_id = r.id AND r.id = $1",
        run,
    )
    .await;
    t.execute(
        "INSERT INTO {schema}.events (run_id, event, actor, reason, created_at)
         VALUES ($1, 'paused', E'ops\\u202eevil', 'r', now())",
        run,
    )
    .await;
    let text = t.ok(&["show", &run.0.to_string()]);
    for raw in ['\u{1b}', '\r', '\u{7}', '\u{202e}', '\u{200b}'] {
        assert!(!text.contains(raw), "{raw:?} reached the terminal: {text}");
    }
    assert!(text.contains("red \\u{1b}[31mtext"), "{text}");
    assert!(text.contains("over\\u{d}write\\u{a}FORGED line"), "{text}");
    assert!(text.contains("ops\\u{202e}evil"), "{text}");
    assert!(text.contains("order\\u{200b}7"), "{text}");
    assert!(
        !text.lines().any(|line| line.starts_with("FORGED")),
        "{text}"
    );
}
