//! `pgbus deploy-check FILE` against runs parked at each position of a
//! workflow, for new versions that add, remove (with and without a
//! gravestone), rename a step and change the signal one waits for: the counts
//! per verdict, the exit code, and the testkit's replay of each run's `pgbus
//! show --json` giving the same verdict.

use std::path::PathBuf;

use pgbus_runtime::deploy::Definitions;
use pgbus_runtime::engine::VerdictKind;
use pgbus_runtime::prelude::*;

use crate::common::{TestSchema, json, stdout};

struct V1;

#[workflow(name = "cli.deploy")]
impl V1 {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

struct Added;

#[workflow(name = "cli.deploy")]
impl Added {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step]
    async fn audit(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

struct Buried;

#[workflow(name = "cli.deploy")]
impl Buried {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    removed_step!(charge);
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

struct Removed;

#[workflow(name = "cli.deploy")]
impl Removed {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

struct Renamed;

#[workflow(name = "cli.deploy")]
impl Renamed {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn charge_card(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "paid")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

struct Resignalled;

#[workflow(name = "cli.deploy")]
impl Resignalled {
    #[step]
    async fn reserve(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn charge(&self, _cx: &mut StepCx<()>) {}
    #[step(wait_for = "payment.settled")]
    async fn await_payment(&self, _cx: &mut StepCx<()>) {}
    #[step(wait = "1h")]
    async fn ship(&self, _cx: &mut StepCx<()>) {}
}

/// Runs of [`V1`] parked at each position, worked by a real worker: at
/// `reserve` (scheduled), `charge` (scheduled, an hour off), `charge` again
/// but paused by an operator, `await_payment` (parked for `paid`) and `ship`
/// (scheduled, an hour off); in that order.
async fn parked(t: &TestSchema) -> [RunId; 5] {
    let client = t.db.client();
    let start = || async { client.start::<V1>(&()).await.expect("start").run_id };
    let (at_charge, paused, at_await, at_ship) =
        (start().await, start().await, start().await, start().await);
    let worker = t.db.worker().register(V1).build().expect("worker");
    worker.run_until_idle().await.expect("run");
    // `charge` is an hour off: make it due for the runs that go past it.
    for run in [at_await, at_ship] {
        t.execute(
            "UPDATE {schema}.steps SET scheduled_at = now() WHERE run_id = $1 AND step_name = 'charge'",
            run,
        )
        .await;
    }
    worker.run_until_idle().await.expect("run");
    client.signal(at_ship, "paid", &()).await.expect("signal");
    worker.run_until_idle().await.expect("run");
    client
        .pause(paused, "ops", "held for the test")
        .await
        .expect("pause");
    let at_reserve = start().await;
    [at_reserve, at_charge, paused, at_await, at_ship]
}

/// `definitions` written to a file of this test.
fn file(t: &TestSchema, name: &str, definitions: &Definitions) -> PathBuf {
    let path = std::env::temp_dir().join(format!("{}-{name}.json", t.name));
    std::fs::write(&path, definitions.to_json()).expect("write");
    path
}

/// `pgbus deploy-check FILE --json`: its exit code and report.
fn check(t: &TestSchema, path: &std::path::Path) -> (Option<i32>, serde_json::Value) {
    let out = t.pgbus(&["deploy-check", path.to_str().expect("a path"), "--json"]);
    (out.status.code(), json(&stdout(&out)))
}

/// The report's counts for `cli.deploy`, in [`VerdictKind::ALL`]'s order.
fn counts(report: &serde_json::Value) -> Vec<i64> {
    let workflow = &report["workflows"][0];
    assert_eq!(workflow["workflow"], "cli.deploy");
    VerdictKind::ALL
        .iter()
        .map(|kind| workflow["counts"][kind.as_str()].as_i64().expect("a count"))
        .collect()
}

/// The testkit's replay of each run's `pgbus show --json`.
fn replayed(t: &TestSchema, runs: &[RunId], new: &Definitions) -> Vec<VerdictKind> {
    runs.iter()
        .map(|run| {
            let show = json(&t.ok(&["show", &run.0.to_string(), "--json"]));
            pgbus_testkit::deploy::verdict(&show, new)
                .expect("a verdict")
                .verdict
        })
        .collect()
}

#[tokio::test]
async fn deploy_check_counts_each_verdict_and_fails_when_runs_would_stop() {
    use VerdictKind::{
        Advances as A, MissesInserted as M, PausesStepNotDefined as P, SkipsGravestone as S,
        Waits as W,
    };
    let t = TestSchema::new().await;
    let runs = parked(&t).await;
    // Per version: each run's verdict (at reserve, at charge, paused at
    // charge, parked at await_payment, at ship) and the exit code.
    let cases: [(&str, Definitions, [VerdictKind; 5], i32); 6] = [
        (
            "same",
            Definitions::of([V1::DEFINITION]),
            [A, A, A, A, A],
            0,
        ),
        (
            "added",
            Definitions::of([Added::DEFINITION]),
            [M, M, M, M, M],
            0,
        ),
        (
            "buried",
            Definitions::of([Buried::DEFINITION]),
            [S, S, S, A, A],
            0,
        ),
        (
            "removed",
            Definitions::of([Removed::DEFINITION]),
            [P, P, P, A, A],
            3,
        ),
        (
            "renamed",
            Definitions::of([Renamed::DEFINITION]),
            [P, P, P, M, M],
            3,
        ),
        (
            "resignalled",
            Definitions::of([Resignalled::DEFINITION]),
            [A, A, A, W, A],
            3,
        ),
    ];
    for (name, new, verdicts, code) in cases {
        let (exit, report) = check(&t, &file(&t, name, &new));
        assert_eq!(exit, Some(code), "{name}: {report:#}");
        let expected: Vec<i64> = VerdictKind::ALL
            .iter()
            .map(|kind| i64::try_from(verdicts.iter().filter(|v| *v == kind).count()).unwrap())
            .collect();
        assert_eq!(counts(&report), expected, "{name}: {report:#}");
        assert_eq!(
            replayed(&t, &runs, &new),
            verdicts,
            "{name}: the testkit's replay of `pgbus show --json` agrees"
        );
    }
    text_names_the_positions_that_stop(&t);
}

/// The text of `deploy-check`: counts per workflow and digest, the positions
/// that stop named, and how many runs would stop.
fn text_names_the_positions_that_stop(t: &TestSchema) {
    let removed = file(t, "removed", &Definitions::of([Removed::DEFINITION]));
    let out = t.pgbus(&[
        "deploy-check",
        removed.to_str().expect("a path"),
        "--lost-worker-threshold",
        "1h",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let text = stdout(&out);
    assert!(
        text.lines()
            .next()
            .is_some_and(|h| h.contains("SKIPS GRAVESTONE")),
        "{text}"
    );
    assert!(
        text.contains(
            "1 run at `charge` (scheduled, ready): pauses with StepNotDefined at `charge`"
        ),
        "{text}"
    );
    assert!(
        text.contains("1 run at `charge` (scheduled, paused)"),
        "{text}"
    );
    assert!(
        text.contains("1 run at `reserve` (scheduled, ready)"),
        "{text}"
    );
    assert!(
        text.contains("3 of 5 runs in flight would pause or wait"),
        "{text}"
    );
    let live = &V1::DEFINITION.digest[..12];
    assert!(
        text.contains(&format!("live now: {live} (1 worker)")),
        "{text}"
    );

    let same = file(t, "same", &Definitions::of([V1::DEFINITION]));
    let text = t.ok(&["deploy-check", same.to_str().expect("a path")]);
    assert!(
        text.ends_with("no run in flight would pause or wait (5 checked)\n"),
        "{text}"
    );
}

#[tokio::test]
async fn a_bad_definitions_file_is_an_error_not_a_verdict() {
    let t = TestSchema::new().await;
    let missing = std::env::temp_dir().join(format!("{}-missing.json", t.name));
    let err = t.fails(&["deploy-check", missing.to_str().expect("a path")], 1);
    assert!(err.contains("cannot read the definitions file"), "{err}");

    let bad = std::env::temp_dir().join(format!("{}-bad.json", t.name));
    std::fs::write(&bad, "{\"format\": 1,").expect("write");
    let err = t.fails(&["deploy-check", bad.to_str().expect("a path")], 1);
    assert!(
        err.contains("invalid definitions document: not JSON"),
        "{err}"
    );

    let mut later: serde_json::Value =
        serde_json::from_str(&Definitions::of([V1::DEFINITION]).to_json()).expect("JSON");
    later["format"] = serde_json::json!(2);
    std::fs::write(&bad, later.to_string()).expect("write");
    let err = t.fails(&["deploy-check", bad.to_str().expect("a path")], 1);
    assert!(
        err.contains("format 2 is not one this version reads (1)"),
        "{err}"
    );

    // Said before anything connects: no database needed to find it bad.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"))
        .args(["deploy-check", bad.to_str().expect("a path")])
        .env("DATABASE_URL", "postgres://127.0.0.1:1/nothing")
        .output()
        .expect("run pgbus");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("format 2"));
    t.fails(&["deploy-check"], 2);
}
