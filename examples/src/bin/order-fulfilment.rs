//! Runs the order-fulfilment workflow on a real PostgreSQL: migrates, starts a
//! batch of runs, plays the payment processor (its `payment.settled` signals
//! reach some runs before they wait and the rest while they wait), runs a worker
//! until every run has ended, and prints what each run did, its vendors' child
//! runs included.
//!
//! `DATABASE_URL` picks the database (default: the local server, database
//! `postgres`, as the current user) and `PGBUS_SCHEMA` the schema (default
//! `pgbus`). Behind a transaction-mode pooler such as PgBouncer, set
//! `PGBUS_TRANSACTION_POOLER=true`, and `PGBUS_LISTEN_URL` to a direct URL for
//! the worker's `LISTEN` (without one it polls). Set `RUST_LOG=debug` for the
//! worker's logs.
//!
//! `order-fulfilment --print-definitions` prints what its worker runs, as the
//! JSON document `pgbus deploy-check` reads, and exits without connecting:
//! `order-fulfilment --print-definitions > defs.json && pgbus deploy-check
//! defs.json` before deploying a new version of it.

use std::process::ExitCode;
use std::time::Duration;

use pgbus_examples::{Fulfil, NotifyVendor, Order, Settlement};
use pgbus_runtime::{
    Client, Clock, DEFAULT_DATABASE_URL, Database, RunId, RunStatus, RunView, Schema, Workflow,
};

const ORDERS: i64 = 5;

#[tokio::main]
async fn main() -> ExitCode {
    // Before a deploy: what this binary's worker runs, for `pgbus
    // deploy-check`. No database needed.
    if std::env::args()
        .skip(1)
        .any(|arg| arg == "--print-definitions")
    {
        print!("{}", pgbus_examples::definitions().to_json());
        return ExitCode::SUCCESS;
    }
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    // Boxed: the demo's whole program is one future, past clippy's
    // `large_futures` bound, and it lives once.
    match Box::pin(run()).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<bool, String> {
    let db = connect().await?;
    db.migrate()
        .await
        .map_err(|e| format!("migration failed: {e}"))?;
    let client = db.client();

    let definition = <Fulfil as Workflow>::DEFINITION;
    println!(
        "starting {ORDERS} runs of {} (digest {}…)",
        definition.name,
        &definition.digest[..12]
    );
    let mut runs = Vec::new();
    for id in 1..=ORDERS {
        let order = Order {
            id,
            amount_cents: 1_000 * id,
            gift_wrap: id % 2 == 0,
        };
        let run = client
            .start::<Fulfil>(&order)
            .await
            .map_err(|e| format!("could not start a run: {e}"))?;
        runs.push(run.run_id);
    }

    // The payment processor settles even orders at once (the signal is kept
    // until their `await_payment` step gets to it) and odd ones three seconds
    // later (the step is waiting by then, and the signal wakes it).
    let processor = tokio::spawn(settle_payments(client.clone(), runs.clone()));

    // The gateway fails twice per order before it recovers: the charge policy
    // reattempts it.
    let mut worker = db
        .worker()
        .register(Fulfil::new(2))
        .register(NotifyVendor)
        .concurrency(8)
        .poll_interval(Duration::from_millis(200));
    if let Ok(direct) = std::env::var("PGBUS_LISTEN_URL") {
        worker = worker.listen_url(direct);
    }
    let worker = worker
        .build()
        .map_err(|e| format!("could not build the worker: {e}"))?;
    let all_ended = wait_until_ended(&client, &runs);
    worker
        .run_until(all_ended)
        .await
        .map_err(|e| format!("worker failed: {e}"))?;
    processor
        .await
        .map_err(|e| format!("the payment processor task failed: {e}"))??;

    let mut all_finished = true;
    for run in &runs {
        let view = client
            .run(*run)
            .await
            .map_err(|e| format!("could not read run {run}: {e}"))?;
        all_finished &= view.run.status == RunStatus::Finished;
        print_run(&view);
        for batch in &view.batches {
            println!(
                "  batch {}: {} child runs, {} finished, {} cancelled ({})",
                batch.id, batch.total, batch.finished, batch.cancelled, batch.status
            );
        }
    }
    let by_status = count_by_status(&db, &runs)
        .await
        .map_err(|e| format!("could not count runs: {e}"))?;
    println!("\nin SQL: {by_status}");
    println!(
        "{} of {ORDERS} runs finished",
        if all_finished {
            ORDERS.to_string()
        } else {
            "not all".to_owned()
        }
    );
    Ok(all_finished)
}

/// Sends each run's `payment.settled` signal: even orders at once, odd ones
/// three seconds later.
async fn settle_payments(client: Client, runs: Vec<RunId>) -> Result<(), String> {
    let settle = |run: RunId| {
        let client = client.clone();
        async move {
            let settlement = Settlement {
                reference: format!("PAY-{run}"),
            };
            client
                .signal(run, "payment.settled", &settlement)
                .await
                .map(|_| ())
                .map_err(|e| format!("could not signal run {run}: {e}"))
        }
    };
    let (now, later): (Vec<_>, Vec<_>) = runs.iter().enumerate().partition(|(i, _)| i % 2 == 1);
    for (_, run) in now {
        settle(*run).await?;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    for (_, run) in later {
        settle(*run).await?;
    }
    Ok(())
}

/// Resolves once every run is finished or cancelled (or paused, which needs an
/// operator), checking a few times a second.
async fn wait_until_ended(client: &Client, runs: &[RunId]) {
    loop {
        let mut open = 0;
        for run in runs {
            match client.run(*run).await {
                Ok(view) if matches!(view.run.status, RunStatus::Ready | RunStatus::Performing) => {
                    open += 1;
                }
                Ok(_) => {}
                Err(_) => open += 1,
            }
        }
        if open == 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn print_run(view: &RunView) {
    let took = view.run.finished_at.map_or_else(
        || "-".to_owned(),
        |end| format!("{} ms", (end - view.run.created_at).num_milliseconds()),
    );
    println!(
        "\nrun {}  {}  ({} step attempts, {took} from start to end)",
        view.run.id,
        view.run.status,
        view.steps.len()
    );
    for step in &view.steps {
        let ran = step.ran().map_or_else(
            || "-".to_owned(),
            |d| format!("{} ms", d.num_milliseconds()),
        );
        let outcome = step.outcome.map_or("-", |o| o.as_str());
        let status = step.status.as_str();
        let error = step.error_message.as_deref().unwrap_or("");
        let waited =
            step.waiting_since
                .zip(step.started_at)
                .map_or_else(String::new, |(since, woken)| {
                    let on = step.waiting_for.as_deref().unwrap_or("its child runs");
                    format!(
                        "waited {} ms for {on}  ",
                        (woken - since).num_milliseconds()
                    )
                });
        println!(
            "  {:<14} attempt {}  {:<10} {:<12} ran {:>6}  {waited}{error}",
            step.step_name, step.attempt, status, outcome, ran
        );
    }
}

/// The runs' statuses straight from the `runs` table, e.g. `finished: 5`.
async fn count_by_status(db: &Database, runs: &[RunId]) -> Result<String, pgbus_runtime::Error> {
    let client = db.pool().get().await?;
    let ids: Vec<i64> = runs.iter().map(|run| run.0).collect();
    let sql = format!(
        "SELECT status, count(*) FROM \"{}\".runs WHERE id = ANY($1) GROUP BY status ORDER BY status",
        db.schema()
    );
    // Unnamed, with its parameter's type: nothing is left prepared, so this
    // also works behind a transaction-mode pooler.
    let rows = client
        .query_typed(&sql, &[(&ids, tokio_postgres::types::Type::INT8_ARRAY)])
        .await?;
    Ok(rows
        .iter()
        .map(|row| format!("{}: {}", row.get::<_, String>(0), row.get::<_, i64>(1)))
        .collect::<Vec<_>>()
        .join(", "))
}

/// An error with its causes, on one line.
/// The database of `DATABASE_URL` (schema `PGBUS_SCHEMA`, through a pooler
/// when `PGBUS_TRANSACTION_POOLER` is set), or what to do when there is none.
async fn connect() -> Result<Database, String> {
    let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.to_owned());
    let schema = std::env::var("PGBUS_SCHEMA").unwrap_or_else(|_| "pgbus".to_owned());
    let schema = Schema::new(&schema).map_err(|e| format!("PGBUS_SCHEMA: {e}"))?;
    let pooler = std::env::var("PGBUS_TRANSACTION_POOLER")
        .is_ok_and(|v| matches!(v.as_str(), "1" | "true" | "yes" | "on"));
    let connected = if pooler {
        Database::builder(&url)
            .schema(schema)
            .clock(Clock::Database)
            .transaction_pooler(true)
            .connect()
            .await
    } else {
        Database::connect_with(&url, schema, Clock::Database).await
    };
    let db = connected.map_err(|error| match error {
        // Nothing answered (refused, or silent past the connect timeout).
        pgbus_runtime::Error::Connect { .. } | pgbus_runtime::Error::ConnectTimeout { .. }
            if error.is_transient() =>
        {
            format!(
                "no PostgreSQL answered at {url}: {error}\n\
                 Start the local server (on Debian: `pg_ctlcluster 15 main start`) or point \
                 DATABASE_URL at one, e.g. DATABASE_URL=postgres://user@host:5432/db"
            )
        }
        // A server answered and refused (TLS, password, no such database):
        // the error says which setting to change.
        _ => format!("could not connect to {url}: {error}"),
    })?;
    Ok(db)
}
