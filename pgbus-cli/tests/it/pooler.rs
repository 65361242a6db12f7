//! The `pgbus` command through a private PgBouncer in transaction mode
//! (`--transaction-pooler`, or `PGBUS_TRANSACTION_POOLER`): migrate, list,
//! show and signal, beside a worker and a client going through the same
//! pooler.

use std::process::Output;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Clock, Database, RunStatus};
use pgbus_testkit::pgbouncer::{self, PgBouncer};

use crate::common::{TestSchema, json};

struct Relay;

#[workflow(name = "cli.relay")]
impl Relay {
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

/// `pgbus args...` on `t`'s schema through `bouncer`, with `env` set.
fn pgbus(t: &TestSchema, bouncer: &PgBouncer, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_pgbus"));
    command
        .args(args)
        .env("DATABASE_URL", bouncer.url("test"))
        .env("PGBUS_SCHEMA", &t.name)
        .env_remove("PGBUS_RETENTION")
        .env_remove("PGBUS_TRANSACTION_POOLER");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("run pgbus")
}

/// As [`pgbus`], which must succeed; its standard output.
fn ok(t: &TestSchema, bouncer: &PgBouncer, env: &[(&str, &str)], args: &[&str]) -> String {
    let out = pgbus(t, bouncer, env, args);
    assert!(
        out.status.success(),
        "pgbus {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_command_lists_shows_and_signals_through_pgbouncer() {
    let Some(bouncer) = pgbouncer::for_test(2) else {
        return;
    };
    let t = TestSchema::new().await;
    let flag: &[&str] = &["--transaction-pooler"];
    let migrated = ok(&t, &bouncer, &[], &[flag, &["migrate"]].concat());
    assert_eq!(migrated, format!("schema {} is up to date\n", t.name));

    // Without the flag the startup options are refused: the flag matters.
    let refused = pgbus(&t, &bouncer, &[], &["runs"]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    // ... and the error says what to do about it.
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("refused a startup parameter") && said.contains("--transaction-pooler"),
        "{said}"
    );

    let db = Database::builder(&bouncer.url("test"))
        .schema(t.db.schema().clone())
        .clock(Clock::Database)
        .transaction_pooler(true)
        .connect()
        .await
        .expect("connect through pgbouncer");
    let run = db.client().start::<Relay>(&()).await.expect("start").run_id;
    let worker = db.worker().register(Relay).build().expect("worker");
    worker.run_until_idle().await.expect("run");

    let env = [("PGBUS_TRANSACTION_POOLER", "true")];
    let listed = json(&ok(&t, &bouncer, &env, &["runs", "--json"]));
    assert_eq!(listed[0]["id"], run.0, "{listed}");
    assert_eq!(listed[0]["status"], "ready");
    let shown = ok(&t, &bouncer, &env, &["show", &run.0.to_string()]);
    assert!(shown.contains("step_waiting"), "{shown}");

    let sent = ok(&t, &bouncer, &env, &["signal", &run.0.to_string(), "go"]);
    assert!(sent.contains("signal"), "{sent}");
    worker.run_until_idle().await.expect("run");
    let shown = json(&ok(
        &t,
        &bouncer,
        &env,
        &["show", &run.0.to_string(), "--json"],
    ));
    assert_eq!(shown["run"]["run"]["status"], "finished", "{shown}");
    assert_eq!(
        db.client().run(run).await.expect("read").run.status,
        RunStatus::Finished
    );
}
