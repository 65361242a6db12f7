use super::*;

#[test]
fn parses_every_spelling_and_prints_it_back() {
    for word in ExceptionAction::ALL {
        assert_eq!(ExceptionAction::parse(word).unwrap().as_str(), *word);
    }
    for word in FailureAction::ALL {
        assert_eq!(FailureAction::parse(word).unwrap().as_str(), *word);
    }
    for word in Report::ALL {
        assert_eq!(Report::parse(word).unwrap().to_string(), *word);
    }
    for word in EntryKind::ALL {
        assert_eq!(EntryKind::parse(word).unwrap().as_str(), *word);
    }
    for word in OnTimeout::ALL {
        assert_eq!(OnTimeout::parse(word).unwrap().as_str(), *word);
    }
}

#[test]
fn on_timeout_accepts_a_bang_except_on_run() {
    assert_eq!(OnTimeout::parse("pause!"), Ok(OnTimeout::Pause));
    assert_eq!(OnTimeout::parse("cancel!"), Ok(OnTimeout::Cancel));
    assert_eq!(OnTimeout::parse("skip!"), Ok(OnTimeout::Skip));
    let err = OnTimeout::parse("run!").unwrap_err();
    assert_eq!(err.suggestion, Some("run"));
    assert!(OnTimeout::parse("pause!!").is_err());
}

#[test]
fn unknown_words_list_the_allowed_values_and_suggest_the_closest() {
    let err = ExceptionAction::parse("reatempt").unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown value `reatempt`, expected `pause`, `reattempt`, `cancel` or `skip`; did you mean `reattempt`?"
    );
    let err = Report::parse("sometimes").unwrap_err();
    assert_eq!(err.suggestion, None);
    assert_eq!(
        err.to_string(),
        "unknown value `sometimes`, expected `always`, `never` or `terminal_only`"
    );
}

#[test]
fn synonyms_from_other_engines_are_suggested() {
    assert_eq!(
        ExceptionAction::parse("retry").unwrap_err().suggestion,
        Some("reattempt")
    );
    assert_eq!(
        did_you_mean("max_retries", options::ON_EXCEPTION),
        Some("max_reattempts")
    );
    assert_eq!(did_you_mean("delay", options::STEP), Some("wait"));
    assert_eq!(
        did_you_mean("max_concurrency", options::WORKFLOW),
        Some("concurrency")
    );
    assert_eq!(did_you_mean("throttle", options::STEP), Some("rate_limit"));
    // A synonym is only offered where its word is allowed.
    assert_eq!(did_you_mean("retry", options::STEP), None);
    let run_bang = OnTimeout::parse("run!").unwrap_err().to_string();
    assert_eq!(
        run_bang,
        "unknown value `run!`, expected `pause`, `cancel`, `skip` or `run`; \
         the `!` spelling is accepted on `pause!`, `cancel!` and `skip!` only; did you mean `run`?"
    );
}

#[test]
fn did_you_mean_finds_typos_and_ignores_strangers() {
    assert_eq!(did_you_mean("wiat", options::STEP), Some("wait"));
    assert_eq!(did_you_mean("timout", options::STEP), Some("timeout"));
    assert_eq!(
        did_you_mean("wait_timout", options::STEP),
        Some("wait_timeout")
    );
    assert_eq!(did_you_mean("zzz", options::STEP), None);
}

#[test]
fn backticked_joins_like_prose() {
    assert_eq!(backticked(&[]), "");
    assert_eq!(backticked(&["a"]), "`a`");
    assert_eq!(backticked(&["a", "b"]), "`a` or `b`");
    assert_eq!(backticked(&["a", "b", "c"]), "`a`, `b` or `c`");
}

#[test]
fn closest_takes_names_known_at_run_time() {
    let names = ["payment.settled".to_owned(), "order.shipped".to_owned()];
    assert_eq!(
        closest("payment.setled", names.iter().map(String::as_str)),
        Some("payment.settled")
    );
    assert_eq!(closest("refund", names.iter().map(String::as_str)), None);
    assert_eq!(closest("anything", std::iter::empty()), None);
}

#[test]
fn every_option_has_a_shape_whose_example_writes_it() {
    let places = [
        (options::WORKFLOW, options::WORKFLOW_SHAPES),
        (options::STEP, options::STEP_SHAPES),
        (options::FAN_OUT, options::FAN_OUT_SHAPES),
        (options::ON_EXCEPTION, options::ON_EXCEPTION_SHAPES),
        (options::WAIT_FOR, options::WAIT_FOR_SHAPES),
    ];
    for (names, shapes) in places {
        assert_eq!(names.len(), shapes.len());
        for name in names {
            let shape = options::shape(shapes, name).expect("a shape for every option");
            assert!(
                shape.example.starts_with(&format!("{name} = "))
                    || shape.example.starts_with(&format!("{name}(")),
                "the example of `{name}` writes it: {}",
                shape.example
            );
            assert!(!shape.needs.is_empty() && !shape.needs.ends_with('.'));
        }
    }
    assert_eq!(options::shape(options::STEP_SHAPES, "nope"), None);
}

#[test]
fn a_word_option_names_every_word_it_takes() {
    let words: [(&[options::Shape], &str, &[&str]); 8] = [
        (options::ON_EXCEPTION_SHAPES, "action", ExceptionAction::ALL),
        (
            options::ON_EXCEPTION_SHAPES,
            "terminal_action",
            FailureAction::ALL,
        ),
        (options::ON_EXCEPTION_SHAPES, "report", Report::ALL),
        (
            options::FAN_OUT_SHAPES,
            "on_batch_failure",
            FailureAction::ALL,
        ),
        (options::STEP_SHAPES, "on_timeout", OnTimeout::ALL),
        (options::WORKFLOW_SHAPES, "slot", crate::SlotHolder::ALL),
        (
            options::WORKFLOW_SHAPES,
            "on_deadline",
            crate::DeadlineAction::ALL,
        ),
        (
            options::WORKFLOW_SHAPES,
            "catch_up",
            crate::schedule::CatchUp::WORDS,
        ),
    ];
    for (shapes, name, allowed) in words {
        let needs = options::shape(shapes, name).expect("a shape").needs;
        assert_eq!(
            needs,
            format!("{} in quotes", backticked(allowed)),
            "{name}"
        );
    }
}
