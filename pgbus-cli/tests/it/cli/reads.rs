//! What the reading commands print: `runs` with its filters, pages and
//! closed pipes, and `show`, bounded, escaped and naming what it left out.

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use super::{Ops, work};
use crate::common::{TestSchema, database_url, json};

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
    // No worker runs `cli.ops`: the ready run is marked, with a note.
    assert_eq!(lines.len(), 4, "{table}");
    assert!(lines[0].trim_start().starts_with("ID"), "{table}");
    assert!(
        lines[1].contains(&new.0.to_string()) && lines[1].contains("paused"),
        "{table}"
    );
    assert!(
        lines[2].contains(&old.0.to_string())
            && lines[2].contains("ready")
            && lines[2].contains("workflow missing"),
        "{table}"
    );
    assert!(lines[3].starts_with("cannot run: "), "{table}");

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

#[tokio::test]
async fn workers_lists_the_live_workers_with_what_they_run() {
    let t = TestSchema::new().await;
    assert_eq!(t.ok(&["workers"]), "no live workers\n");
    let worker =
        t.db.worker()
            .name("cli-worker-1")
            .concurrency(3)
            .register(Ops)
            .build()
            .expect("worker");
    worker
        .run_once()
        .await
        .expect("a claim registers the worker");

    let table = t.ok(&["workers"]);
    let short = &Ops::DEFINITION.digest[..12];
    assert!(
        table.lines().next().is_some_and(|h| h.contains("NAME")),
        "{table}"
    );
    assert!(table.contains("cli-worker-1"), "{table}");
    assert!(table.contains(&format!("cli.ops {short}")), "{table}");
    assert!(
        !table.contains(Ops::DEFINITION.digest),
        "digests are cut: {table}"
    );

    let listed = json(&t.ok(&["workers", "--json"]));
    let first = &listed.as_array().expect("an array")[0];
    assert_eq!(first["name"], "cli-worker-1");
    assert_eq!(first["concurrency"], 3);
    assert_eq!(first["in_flight"], 0);
    assert_eq!(first["workflows"][0]["digest"], Ops::DEFINITION.digest);
    assert_eq!(first["queues"], serde_json::json!(["default"]));

    t.fails(&["workers", "--limit", "0"], 2);
    // Live: a heartbeat within the threshold.
    t.batch("UPDATE {schema}.workers SET heartbeat_at = now() - interval '1 minute'")
        .await;
    assert_eq!(t.ok(&["workers"]), "no live workers\n");
    assert!(
        t.ok(&["workers", "--lost-worker-threshold", "5m"])
            .contains("cli-worker-1")
    );
}

/// Piped (a log, `grep`, a bug report), `show` prints an error, a reason
/// and an output whole; only a terminal gets them cut to fit a table.
#[tokio::test]
async fn piped_show_prints_long_errors_reasons_and_outputs_whole() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let error = format!(
        "card declined: {} end-of-error",
        "issuer said no; ".repeat(30)
    );
    let reason = format!("{} end-of-reason", "checking with the bank ".repeat(10));
    let output = format!("{} end-of-output", "o".repeat(300));
    let client = t.db.pool().get().await.expect("connection");
    let sql = |s: &str| s.replace("{schema}", &format!("\"{}\"", t.name));
    client
        .execute(
            &sql(
                "UPDATE {schema}.steps SET status = 'failed', outcome = 'paused',
                      error_class = 'Declined', error_message = $2, output = to_jsonb($3::text)
                  WHERE run_id = $1",
            ),
            &[&run.0, &error, &output],
        )
        .await
        .expect("fail the step");
    client
        .execute(
            &sql(
                "INSERT INTO {schema}.events (run_id, event, actor, reason, created_at)
                  VALUES ($1, 'paused', 'ops', $2, now())",
            ),
            &[&run.0, &reason],
        )
        .await
        .expect("an event");
    let text = t.ok(&["show", &run.0.to_string()]);
    assert!(text.contains(&format!("Declined: {error}")), "{text}");
    assert!(text.contains(&reason), "{text}");
    assert!(text.contains(&format!("\"{output}\"")), "{text}");
    assert!(!text.contains('…'), "nothing cut: {text}");
}
