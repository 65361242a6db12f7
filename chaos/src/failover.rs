//! Failover mode: a private primary and a streaming standby (synchronous
//! replication unless `--async`), workers and a client on a two-host URL with
//! `target_session_attrs=read-write`, the primary stopped (immediate) and the
//! standby promoted while runs are going on. Then the chaos run's checks, and
//! how long the workers took to go on.

use std::time::{Duration, Instant};

use crate::capture::Captured;
use crate::cluster::Cluster;
use crate::options::OutageOptions;
use crate::outage::{self, Load, Starts, secs};
use crate::workflow::STEPS;

/// The standby's replication `application_name`, which the primary's
/// `synchronous_standby_names` names.
const STANDBY: &str = "standby";

pub(crate) fn main(options: &OutageOptions) -> Result<bool, String> {
    let began = Instant::now();
    let captured = outage::logging();
    let replication = if options.asynchronous {
        "asynchronous"
    } else {
        "synchronous"
    };
    println!(
        "pgbus failover: {} runs of {} steps, {} workers x {} bodies, {replication} replication, deadline {} s",
        options.runs,
        STEPS.len(),
        options.workers,
        options.concurrency,
        options.deadline.as_secs()
    );
    let mut primary = Cluster::create(options.pg_bin.as_deref(), options.keep)?;
    if !options.asynchronous {
        // Every commit waits until the standby has flushed it, so a commit the
        // primary acknowledged is on the standby when it is promoted.
        primary.set("synchronous_standby_names", STANDBY);
    }
    primary.start()?;
    // The standby runs without `synchronous_standby_names`: once promoted it
    // has no standby of its own, and its commits must not wait for one.
    let mut standby = Cluster::create_standby(&primary, STANDBY)?;
    standby.start()?;
    println!(
        "primary on port {}, standby on port {} ({}, {})",
        primary.port(),
        standby.port(),
        primary.dir().display(),
        standby.dir().display()
    );
    let passed = outage::block_on(run(options, &primary, &standby, &captured, began));
    if !matches!(passed, Ok(true)) {
        primary.keep();
        standby.keep();
    }
    passed
}

async fn run(
    options: &OutageOptions,
    primary: &Cluster,
    standby: &Cluster,
    captured: &Captured,
    began: Instant,
) -> Result<bool, String> {
    let deadline = began + options.deadline;
    let sync_state = if options.asynchronous {
        "async"
    } else {
        "sync"
    };
    wait_streaming(primary, sync_state, deadline).await?;
    crate::supervisor::prepare(primary).await?;
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres\
         ?target_session_attrs=read-write&connect_timeout=2",
        primary.port(),
        standby.port()
    );
    println!("workers and client on {url}");
    let checker = outage::connect(&url, Duration::from_secs(10)).await?;
    let load = Load::start(&url, &url, options).await?;
    let half = load.wait_half_started(options.runs, deadline).await?;
    let steps_before = captured.completed_steps();

    // The failover: the primary goes away as in a crash, and the standby is
    // promoted at once (an operator's or a failover manager's job; Patroni
    // and pg_auto_failover take seconds to decide, which comes on top).
    let stop = Instant::now();
    tokio::task::block_in_place(|| primary.stop_immediately())?;
    let stopped = Instant::now();
    tokio::task::block_in_place(|| standby.promote())?;
    let promoted = Instant::now();
    println!(
        "{:>6.2} s primary stopped after {steps_before} steps and {half} runs started; standby promoted {} later",
        stop.duration_since(began).as_secs_f64(),
        secs(promoted - stopped)
    );

    let ended = load.wait_ended(&checker, options.runs, deadline).await;
    let finished = Instant::now();
    let starts = load.stop_within_bound().await?;
    if !ended {
        println!("deadline passed before every run ended");
    }

    let serving: i32 = checker
        .pool()
        .get()
        .await
        .map_err(|e| e.to_string())?
        .query_one("SELECT inet_server_port()", &[])
        .await
        .map_err(|e| e.to_string())?
        .get(0);
    let times = Times {
        began,
        stop,
        stopped,
        promoted,
        finished,
        steps_before,
    };
    let figures = figures(options, standby.port(), serving, captured, &starts, &times);
    let passed = outage::report(&checker, options.runs, &starts, captured, figures).await?;
    Ok(ended && passed)
}

/// When things happened.
#[derive(Clone, Copy)]
struct Times {
    began: Instant,
    stop: Instant,
    stopped: Instant,
    promoted: Instant,
    finished: Instant,
    steps_before: usize,
}

/// The failover's own figures.
fn figures(
    options: &OutageOptions,
    standby_port: u16,
    serving: i32,
    captured: &Captured,
    starts: &Starts,
    times: &Times,
) -> Vec<(&'static str, String)> {
    let Times {
        began,
        stop,
        stopped,
        promoted,
        finished,
        steps_before,
    } = *times;
    let first_step = captured.first_after(stopped, crate::capture::Logged::is_completed_step);
    let first_start = starts.at.iter().find(|at| **at >= stopped).copied();
    let noticed = captured.first_after(stop, |e| e.level <= tracing::Level::WARN);
    let since_stop = |at: Option<Instant>| at.map_or_else(|| "-".to_owned(), |at| secs(at - stop));
    let mut figures = vec![
        ("replication", replication_figure(options)),
        (
            "failover",
            format!(
                "immediate stop took {}, promotion {}; the checks read port {serving} (the standby: {})",
                secs(stopped - stop),
                secs(promoted - stopped),
                standby_port
            ),
        ),
        (
            "first warning",
            format!("{} after the stop", since_stop(noticed.map(|e| e.at))),
        ),
        (
            "time to resume",
            format!(
                "{} from the stop to the first step completed on the new primary ({} after promotion)",
                since_stop(first_step.as_ref().map(|e| e.at)),
                first_step.map_or_else(
                    || "-".to_owned(),
                    |e| secs(e.at.saturating_duration_since(promoted))
                )
            ),
        ),
        (
            "client",
            format!(
                "first start after the stop {}; {} tries again after a connection error, {} of them found their run already committed",
                since_stop(first_start),
                starts.retries,
                starts.found_on_retry
            ),
        ),
    ];
    figures.extend(outage::across_figures(captured, "stop", stop, steps_before));
    figures.push((
        "wall time",
        format!(
            "{} ({} from the stop to the last run ended)",
            secs(finished - began),
            secs(finished - stop)
        ),
    ));
    figures
}

fn replication_figure(options: &OutageOptions) -> String {
    if options.asynchronous {
        "asynchronous: commits acknowledged before the standby has them may be lost".to_owned()
    } else {
        format!("synchronous (synchronous_standby_names = '{STANDBY}', synchronous_commit = on)")
    }
}

/// Waits until `primary` streams to the standby with `sync_state` (`sync` or
/// `async`): before that a synchronous primary's commits would wait.
async fn wait_streaming(
    primary: &Cluster,
    sync_state: &str,
    deadline: Instant,
) -> Result<(), String> {
    let db = outage::connect(&primary.url(), Duration::from_secs(10)).await?;
    let client = db.pool().get().await.map_err(|e| e.to_string())?;
    loop {
        let state: Option<String> = client
            .query_opt(
                "SELECT sync_state FROM pg_stat_replication
                 WHERE application_name = $1 AND state = 'streaming'",
                &[&STANDBY],
            )
            .await
            .map_err(|e| e.to_string())?
            .map(|row| row.get(0));
        if state.as_deref() == Some(sync_state) {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "the standby did not stream ({sync_state}) in time: {state:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
