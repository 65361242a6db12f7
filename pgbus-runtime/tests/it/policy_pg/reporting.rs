//! `report` decides which errors reach the error hook.

use std::any::type_name;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pgbus_runtime::prelude::*;
use pgbus_runtime::{ErrorReport, RunId};

use crate::pg::TestDb;

#[derive(Debug, thiserror::Error)]
#[error("reported always")]
struct Always;

#[derive(Debug, thiserror::Error)]
#[error("reported never")]
struct Never;

#[derive(Debug, thiserror::Error)]
#[error("reported at the end")]
struct TerminalOnly;

#[derive(Debug, thiserror::Error)]
#[error("skipped, reported at the end")]
struct SkippedTerminalOnly;

#[derive(Debug, thiserror::Error)]
#[error("no policy")]
struct Unmatched;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
enum Mode {
    Always,
    Never,
    TerminalOnly,
    SkippedTerminalOnly,
    Unmatched,
}

struct Reporting;

#[workflow(name = "policy.reporting", input = Mode)]
impl Reporting {
    #[step(
        on_exception(
            matching(Always),
            action = "reattempt",
            wait = "0s",
            max_reattempts = 2,
            report = "always"
        ),
        on_exception(
            matching(Never),
            action = "reattempt",
            wait = "0s",
            max_reattempts = 2,
            report = "never"
        ),
        on_exception(
            matching(TerminalOnly),
            action = "reattempt",
            wait = "0s",
            max_reattempts = 2,
            report = "terminal_only"
        ),
        on_exception(
            matching(SkippedTerminalOnly),
            action = "skip",
            report = "terminal_only"
        )
    )]
    async fn fail(&self, cx: &mut StepCx<Mode>) -> Result<(), StepError> {
        Err(match cx.input() {
            Mode::Always => Always.into(),
            Mode::Never => Never.into(),
            Mode::TerminalOnly => TerminalOnly.into(),
            Mode::SkippedTerminalOnly => SkippedTerminalOnly.into(),
            Mode::Unmatched => Unmatched.into(),
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_decides_which_errors_reach_the_error_hook() {
    let t = TestDb::new().await;
    let reports: Arc<Mutex<Vec<ErrorReport>>> = Arc::default();
    let sink = Arc::clone(&reports);
    let worker =
        t.db.worker()
            .register(Reporting)
            .on_error(move |report| sink.lock().expect("not poisoned").push(report.clone()))
            .build()
            .expect("worker");
    let client = t.client();
    let mut runs: HashMap<RunId, Mode> = HashMap::new();
    for mode in [
        Mode::Always,
        Mode::Never,
        Mode::TerminalOnly,
        Mode::SkippedTerminalOnly,
        Mode::Unmatched,
    ] {
        runs.insert(
            client
                .start::<Reporting>(&mode)
                .await
                .expect("start")
                .run_id,
            mode,
        );
    }
    worker.run_until_idle().await.expect("run");

    let reports = reports.lock().expect("not poisoned").clone();
    let for_mode = |mode: Mode| -> Vec<(i32, String)> {
        reports
            .iter()
            .filter(|r| runs[&r.run_id] == mode)
            .map(|r| (r.attempt, r.verb.clone()))
            .collect()
    };
    let reattempt = "Reattempt { wait_ms: 0 }".to_owned();
    assert_eq!(
        for_mode(Mode::Always),
        [
            (1, reattempt.clone()),
            (2, reattempt),
            (
                3,
                "Pause { reason: \"step failed after 3 attempts in a row: reported always\" }"
                    .to_owned()
            )
        ]
    );
    assert_eq!(for_mode(Mode::Never), []);
    let terminal = for_mode(Mode::TerminalOnly);
    assert_eq!(terminal.len(), 1, "{terminal:?}");
    assert_eq!(terminal[0].0, 3);
    assert!(terminal[0].1.starts_with("Pause"), "{terminal:?}");
    let skipped = for_mode(Mode::SkippedTerminalOnly);
    assert_eq!(skipped.len(), 1, "a non-reattempt action is terminal");
    assert!(skipped[0].1.starts_with("Skip"), "{skipped:?}");
    assert_eq!(
        for_mode(Mode::Unmatched).len(),
        1,
        "the default pause reports"
    );

    for report in &reports {
        assert_eq!(report.workflow, "policy.reporting");
        assert_eq!(report.step, "fail");
        let mode = runs[&report.run_id];
        let expected = match mode {
            Mode::Always => type_name::<Always>(),
            Mode::Never => type_name::<Never>(),
            Mode::TerminalOnly => type_name::<TerminalOnly>(),
            Mode::SkippedTerminalOnly => type_name::<SkippedTerminalOnly>(),
            Mode::Unmatched => type_name::<Unmatched>(),
        };
        assert_eq!(report.class, expected);
    }

    // The rows keep every error, reported or not.
    for (run_id, mode) in &runs {
        let view = t.run(*run_id).await;
        assert!(
            view.steps.iter().all(|s| s.error_class.is_some()),
            "{mode:?}"
        );
        let attempts = view.steps.len();
        let expected = match mode {
            Mode::Always | Mode::Never | Mode::TerminalOnly => 3,
            Mode::SkippedTerminalOnly | Mode::Unmatched => 1,
        };
        assert_eq!(attempts, expected, "{mode:?}");
    }
}
