//! `pgbus show --follow`: the run, then its new events and status changes
//! as a worker moves it, through a pause, until it ends (exit 0); Ctrl-C
//! stops it (exit 130). The follower is a child process; the test waits on
//! what it prints, each wait bounded only as a safety net.

use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use pgbus_runtime::RunStatus;
use pgbus_runtime::prelude::*;

use super::{Ops, work};
use crate::common::{TestSchema, database_url};

/// Longer than any wait here should take: a hang fails instead of blocking.
const SAFETY_NET: Duration = Duration::from_mins(1);

/// `pgbus show RUN --follow` on `t`, with each output's lines on a channel.
struct Follower {
    child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

impl Follower {
    fn start(t: &TestSchema, run: RunId) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_pgbus"))
            .args(["show", &run.0.to_string(), "--follow"])
            .env("DATABASE_URL", database_url())
            .env("PGBUS_SCHEMA", &t.name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run pgbus");
        let lines = |read: Box<dyn std::io::Read + Send>| {
            let (send, receive) = channel();
            std::thread::spawn(move || {
                for line in std::io::BufReader::new(read).lines() {
                    let Ok(line) = line else { break };
                    if send.send(line).is_err() {
                        break;
                    }
                }
            });
            receive
        };
        let stdout = lines(Box::new(child.stdout.take().expect("stdout")));
        let stderr = lines(Box::new(child.stderr.take().expect("stderr")));
        Self {
            child,
            stdout,
            stderr,
        }
    }

    /// The lines of `from` up to and with the first that has `part`.
    fn until(from: &Receiver<String>, part: &str) -> Vec<String> {
        let mut seen = Vec::new();
        loop {
            match from.recv_timeout(SAFETY_NET) {
                Ok(line) => {
                    let found = line.contains(part);
                    seen.push(line);
                    if found {
                        return seen;
                    }
                }
                Err(e) => panic!("no line with `{part}` ({e}) after:\n{}", seen.join("\n")),
            }
        }
    }

    /// Its exit code, once it exits, and the rest of its standard output.
    fn exit(mut self) -> (Option<i32>, String) {
        let (send, receive) = channel();
        std::thread::spawn(move || {
            let _ = send.send(self.child.wait());
        });
        let status = receive
            .recv_timeout(SAFETY_NET)
            .expect("the follower exits")
            .expect("wait");
        let rest: Vec<String> = self.stdout.iter().collect();
        (status.code(), rest.join("\n"))
    }
}

#[tokio::test]
async fn follow_prints_what_happens_through_a_pause_until_the_run_ends() {
    let t = TestSchema::new().await;
    let client = t.db.client();
    let run = client.start::<Ops>(&()).await.expect("start").run_id;
    work(&t).await;
    assert_eq!(t.status(run).await, RunStatus::Ready, "parked on `go`");

    let follower = Follower::start(&t, run);
    Follower::until(&follower.stderr, "following run");
    let shown = Follower::until(&follower.stdout, "step_waiting");
    assert!(
        shown[0].starts_with(&format!("run {}  cli.ops  ready", run.0)),
        "{shown:?}"
    );

    client.pause(run, "ops", "a look").await.expect("pause");
    let paused = Follower::until(&follower.stdout, "still following");
    let paused = paused.join("\n");
    assert!(
        paused.contains(&format!("run {}: ready -> paused", run.0)),
        "{paused}"
    );
    assert!(
        paused.contains("paused") && paused.contains("a look"),
        "{paused}"
    );

    client.resume(run, "ops", "go on").await.expect("resume");
    client.signal(run, "go", &()).await.expect("signal");
    work(&t).await;
    assert_eq!(t.status(run).await, RunStatus::Finished);

    let (code, rest) = follower.exit();
    assert_eq!(code, Some(0), "{rest}");
    assert!(rest.contains("third#1"), "{rest}");
    assert!(rest.contains("step_completed"), "{rest}");
    assert!(
        rest.lines()
            .last()
            .is_some_and(|l| l.contains(&format!("run {}: ", run.0)) && l.contains("-> finished")),
        "the last line says it ended: {rest}"
    );
    // Every event once, in order.
    let ids: Vec<i64> = rest
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{rest}");
}

#[tokio::test]
async fn follow_stops_on_ctrl_c_with_130_and_ends_at_once_for_an_ended_run() {
    let t = TestSchema::new().await;
    let run = t.db.client().start::<Ops>(&()).await.expect("start").run_id;
    let follower = Follower::start(&t, run);
    Follower::until(&follower.stderr, "following run");
    let interrupt = Command::new("kill")
        .args(["-INT", &follower.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(interrupt.success());
    let stderr = follower.stderr;
    let (code, _) = Follower {
        stderr: channel().1,
        ..follower
    }
    .exit();
    assert_eq!(code, Some(130));
    Follower::until(&stderr, "stopped following");

    t.db.client()
        .cancel(run, "ops", "done")
        .await
        .expect("cancel");
    let follower = Follower::start(&t, run);
    Follower::until(&follower.stderr, "nothing to follow");
    let (code, _) = follower.exit();
    assert_eq!(code, Some(0));
}
