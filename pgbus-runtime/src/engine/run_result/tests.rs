use std::time::Duration;

use serde_json::{Value, json};

use super::{
    OnPause, decode_result, result_timed_out, result_value, settle_result, settle_result_as,
};
use crate::RunId;
use crate::engine::{RunStatus, StepStatus};
use crate::error::Error;
use crate::view::{LastAttempt, ResultView};

fn view(status: RunStatus, last: Option<(StepStatus, Option<Value>)>) -> ResultView {
    ResultView {
        run_id: RunId(7),
        workflow: "w".to_owned(),
        status,
        last_attempt: last.map(|(status, output)| LastAttempt {
            step_name: "ship".to_owned(),
            attempt: 1,
            status,
            output,
        }),
        reason: Some("why".to_owned()),
        error_class: None,
        error_message: None,
    }
}

#[test]
fn the_result_is_the_last_attempts_output_when_it_completed_or_was_skipped() {
    let last = |status, output| {
        result_value(Some(&LastAttempt {
            step_name: "s".to_owned(),
            attempt: 1,
            status,
            output,
        }))
    };
    assert_eq!(
        last(StepStatus::Completed, Some(json!({"a": 1}))),
        json!({"a": 1})
    );
    assert_eq!(last(StepStatus::Skipped, Some(json!(2))), json!(2));
    assert_eq!(last(StepStatus::Completed, None), Value::Null);
    assert_eq!(last(StepStatus::Skipped, None), Value::Null);
    // A failed attempt's output is not handed on, nor is it a result.
    assert_eq!(last(StepStatus::Failed, Some(json!(3))), Value::Null);
    assert_eq!(result_value(None), Value::Null);
}

#[test]
fn a_finished_run_settles_with_its_value_and_a_running_one_does_not() {
    let finished = view(
        RunStatus::Finished,
        Some((StepStatus::Completed, Some(json!(5)))),
    );
    assert_eq!(
        settle_result(&finished, OnPause::Return).map(Result::ok),
        Some(Some(json!(5)))
    );
    for status in [RunStatus::Ready, RunStatus::Performing] {
        for on_pause in [OnPause::Return, OnPause::Wait] {
            assert!(settle_result(&view(status, None), on_pause).is_none());
        }
    }
}

#[test]
fn cancelled_is_an_error_with_the_reason() {
    let settled = settle_result(&view(RunStatus::Cancelled, None), OnPause::Wait);
    assert!(
        matches!(
            settled,
            Some(Err(Error::RunCancelled { run_id: RunId(7), reason: Some(ref r) })) if r == "why"
        ),
        "{settled:?}"
    );
}

#[test]
fn paused_returns_at_once_unless_told_to_wait_and_then_at_the_timeout() {
    let paused = view(RunStatus::Paused, None);
    assert!(matches!(
        settle_result(&paused, OnPause::Return),
        Some(Err(Error::RunPaused {
            run_id: RunId(7),
            ..
        }))
    ));
    assert!(settle_result(&paused, OnPause::Wait).is_none());
    assert!(matches!(
        result_timed_out(&paused, Duration::from_secs(1)),
        Error::RunPaused { .. }
    ));
    let running = view(RunStatus::Ready, None);
    assert!(matches!(
        result_timed_out(&running, Duration::from_secs(1)),
        Error::ResultTimeout {
            run_id: RunId(7),
            status: RunStatus::Ready,
            ..
        }
    ));
}

#[test]
fn null_decodes_as_unit_and_none_and_fails_as_a_struct() {
    let skipped = view(RunStatus::Finished, Some((StepStatus::Skipped, None)));
    assert!(matches!(
        settle_result_as::<()>(&skipped, OnPause::Return),
        Some(Ok(()))
    ));
    assert!(matches!(
        settle_result_as::<Option<u32>>(&skipped, OnPause::Return),
        Some(Ok(None))
    ));
    let decoded = decode_result::<u32>(&skipped, Value::Null);
    let Err(Error::ResultDecode {
        run_id,
        step,
        output_type,
        ..
    }) = decoded
    else {
        panic!("a decode error, not {decoded:?}");
    };
    assert_eq!(
        (run_id, step.as_deref(), output_type),
        (RunId(7), Some("ship"), "u32")
    );
}
