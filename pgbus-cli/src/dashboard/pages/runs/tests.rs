use chrono::TimeZone as _;

use super::*;

fn summary(id: i64) -> RunSummary {
    let at = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
    RunSummary {
        id: RunId(id),
        workflow: "w".to_owned(),
        status: RunStatus::Ready,
        current_step: None,
        created_at: at,
        updated_at: at,
        finished_at: None,
        unrunnable: None,
        parent_run: None,
        children: 0,
    }
}

#[test]
fn a_filter_goes_through_its_links_and_forms_unchanged() {
    let filter = ListFilter {
        prefix: Some("onboarding & co".to_owned()),
        exact: false,
        status: Some(RunStatus::Paused),
        children: true,
        parent: Some(RunId(7)),
        key: Some("order-42".to_owned()),
        path: Some(r#"$.customer ? (@ == "c42")"#.to_owned()),
        created_after: Some(Utc.timestamp_micros(1_900_000_000_123_456).unwrap()),
        created_before: Some(Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()),
    };
    let query = serde_urlencoded::to_string(filter.params()).unwrap();
    let back = ListFilter::parse(&Params(serde_urlencoded::from_str(&query).unwrap())).unwrap();
    assert_eq!(back, filter, "{query}");
    let every = back.run_filter(std::time::Duration::from_secs(30));
    assert!(!every.top_level, "children are shown");
    assert_eq!(every.workflow_prefix.as_deref(), Some("onboarding & co"));
    assert_eq!(every.workflow, None, "a prefix, never an exact name");

    // The overview's links name a workflow exactly: `onboarding` is not
    // `onboarding_v2` too.
    let exact = ListFilter {
        prefix: Some("onboarding".to_owned()),
        exact: true,
        ..ListFilter::default()
    };
    let query = serde_urlencoded::to_string(exact.params()).unwrap();
    assert_eq!(query, "workflow=onboarding&exact=1");
    let back = ListFilter::parse(&Params(serde_urlencoded::from_str(&query).unwrap())).unwrap();
    assert_eq!(back, exact);
    let every = back.run_filter(std::time::Duration::from_secs(30));
    assert_eq!(
        (every.workflow.as_deref(), every.workflow_prefix.as_deref()),
        (Some("onboarding"), None)
    );
    assert_eq!(
        back.describe().into_string(),
        "top-level, of workflow <code>onboarding</code>"
    );

    // The default: top-level runs, nothing in the query.
    let none = ListFilter::default();
    assert!(none.params().is_empty());
    assert!(
        none.run_filter(std::time::Duration::from_secs(30))
            .top_level
    );
    // The children of a run are never top-level.
    let of = ListFilter {
        parent: Some(RunId(3)),
        ..ListFilter::default()
    };
    assert!(!of.run_filter(std::time::Duration::from_secs(30)).top_level);
    assert_eq!(children_link(RunId(3)), "/runs?parent=3");
}

#[test]
fn a_bad_filter_is_refused_in_words() {
    let parse =
        |query: &str| ListFilter::parse(&Params(serde_urlencoded::from_str(query).unwrap()));
    assert!(
        parse("status=lost")
            .unwrap_err()
            .starts_with("Unknown status")
    );
    assert_eq!(
        parse("parent=x").unwrap_err(),
        "`parent` is a whole number."
    );
    assert!(parse("workflow=a%00b").unwrap_err().contains("NUL"));
    assert!(
        parse("created_after=yesterday")
            .unwrap_err()
            .starts_with("A time reads like")
    );
    let times =
        parse("created_after=2026-12-03T11:57&created_before=2026-12-03T13:57:00%2B01:00").unwrap();
    let noon = Utc.with_ymd_and_hms(2026, 12, 3, 12, 57, 0).unwrap();
    assert_eq!(
        times.created_after,
        Some(noon - chrono::TimeDelta::hours(1)),
        "read as UTC"
    );
    assert_eq!(times.created_before, Some(noon));
}

#[test]
fn the_search_box_reads_an_id_a_path_or_a_key() {
    assert_eq!(Search::of("42"), Search::Run(42));
    assert_eq!(
        Search::of("$.customer"),
        Search::Path("$.customer".to_owned())
    );
    assert_eq!(Search::of("order-42"), Search::Key("order-42".to_owned()));
    assert_eq!(
        Search::of("+42"),
        Search::Key("+42".to_owned()),
        "digits only"
    );
    assert_eq!(
        Search::of("99999999999999999999"),
        Search::Key("99999999999999999999".to_owned()),
        "no such id"
    );
}

#[test]
fn the_pager_links_newer_and_older_with_every_filter() {
    let filter = ListFilter {
        prefix: Some("onboarding".to_owned()),
        ..ListFilter::default()
    };
    let full: Vec<RunSummary> = (0..i64::from(PAGE))
        .rev()
        .map(|i| summary(100 + i))
        .collect();
    let html = pager(&filter, Some("1d"), Cursor::Newest, &full).into_string();
    assert!(!html.contains("Newer"), "the newest page: {html}");
    assert!(
        html.contains(
            r#"href="/runs?workflow=onboarding&amp;within=1d&amp;before=100">Older runs"#
        ),
        "{html}"
    );
    let html = pager(&filter, None, Cursor::Before(100), &full).into_string();
    assert!(
        html.contains(r#"href="/runs?workflow=onboarding&amp;after=149">← Newer runs"#),
        "{html}"
    );
    assert!(
        html.contains(r#"href="/runs?workflow=onboarding">← Newest runs"#),
        "{html}"
    );
    // A short page reached going forward: the newest; older from its end.
    let short = vec![summary(160), summary(151)];
    let html = pager(&filter, None, Cursor::After(150), &short).into_string();
    assert!(!html.contains("Newer"), "{html}");
    assert!(html.contains("before=151"), "{html}");
    // An empty page still links on, from where it started.
    let html = pager(&filter, None, Cursor::Before(10), &[]).into_string();
    assert!(html.contains("after=9"), "{html}");
    assert!(!html.contains("Older"), "{html}");
    // Cursors at the ends of the id range: links, not an overflow.
    let html = pager(&filter, None, Cursor::Before(i64::MIN), &[]).into_string();
    assert!(html.contains(&format!("after={}", i64::MIN)), "{html}");
    let html = pager(&filter, None, Cursor::After(i64::MAX), &[]).into_string();
    assert!(html.contains(&format!("before={}", i64::MAX)), "{html}");
}

#[test]
fn the_table_links_children_and_parents() {
    let now = Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap();
    let mut parent = summary(5);
    parent.children = 3;
    let mut child = summary(6);
    child.parent_run = Some(RunId(5));
    let html = table(&[child.clone(), parent.clone()], true, now).into_string();
    assert!(
        html.contains(r#"<td class="children"><a href="/runs?parent=5">3</a></td>"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<td class="parent"><a href="/runs/5">5</a></td>"#),
        "{html}"
    );
    let html = table(&[parent], false, now).into_string();
    assert!(!html.contains("Parent"), "top-level runs have none: {html}");
}
