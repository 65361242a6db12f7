use chrono::{TimeDelta, TimeZone as _, Utc};
use pgbus_runtime::{MinuteCounts, Overview, QueueNow, WorkflowNow};

use super::render;

fn at() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 30).unwrap()
}

fn sample() -> Overview {
    let at = at();
    Overview::new(
        at,
        vec![
            WorkflowNow::new("orders.fulfil".to_owned(), 3, 0, 2),
            WorkflowNow::new("mail <b>".to_owned(), Overview::COUNT_CAP, 1, 0),
        ],
        vec![
            QueueNow::new(
                "orders".to_owned(),
                4,
                Some(at - TimeDelta::minutes(3)),
                2,
                1,
            ),
            QueueNow::new("idle".to_owned(), 0, None, 0, 5),
        ],
        (1, 2, 4),
        vec![MinuteCounts::new(
            Utc.with_ymd_and_hms(2026, 12, 3, 11, 59, 0).unwrap(),
            6,
            1,
            3,
        )],
    )
}

/// Each count of runs now links to the list of that workflow and status,
/// child runs included as they are in the count; none for zero; a count at
/// the cap is a floor.
#[test]
fn runs_now_link_into_the_filtered_list() {
    let html = render(&sample()).into_string();
    assert!(
        html.contains(
            r#"<a href="/runs?workflow=orders.fulfil&amp;exact=1&amp;status=ready&amp;children=1">3</a>"#
        ),
        "{html}"
    );
    assert!(
        html.contains(
            r#"<a href="/runs?workflow=orders.fulfil&amp;exact=1&amp;status=paused&amp;children=1">2</a>"#
        ),
        "{html}"
    );
    assert!(
        html.contains(
            r#"<a href="/runs?workflow=mail%20%3Cb%3E&amp;exact=1&amp;status=performing&amp;children=1">1</a>"#
        ),
        "names are encoded in links: {html}"
    );
    assert!(
        html.contains("mail &lt;b&gt;"),
        "and escaped in text: {html}"
    );
    assert!(
        html.contains(r#"status=ready&amp;children=1"><span title="at least: the read stops at 10000 rows">10000+</span></a>"#),
        "{html}"
    );
    assert!(!html.contains("<b>"), "{html}");
}

/// Queues: due, the oldest due's age from the overview's time, held (a link
/// to the limits), in flight.
#[test]
fn queues_say_what_is_due_held_and_running() {
    let html = render(&sample()).into_string();
    assert!(
        html.contains(
            r#"<td>orders</td><td class="num">4</td><td><span title="2026-12-03T11:57:30.000Z">due 3 min ago</span></td><td class="num"><a href="/limits">2</a></td><td class="num">1</td>"#
        ),
        "{html}"
    );
    assert!(
        html.contains(r#"<td>idle</td><td class="num">0</td><td>-</td><td class="num">0</td><td class="num">5</td>"#),
        "{html}"
    );
}

/// The last hour: failures (cancelled and paused on an error, each a link
/// to its list), pauses, and the chart.
#[test]
fn the_last_hour_counts_failures_apart_from_pauses() {
    let html = render(&sample()).into_string();
    assert!(html.contains("<strong>3</strong>failures: "), "{html}");
    assert!(
        html.contains(r#"<a href="/runs?status=cancelled&amp;children=1">1 cancelled</a>"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<a href="/runs?status=paused&amp;children=1">2 paused on an error</a>"#),
        "{html}"
    );
    assert!(html.contains("<strong>4</strong>pauses"), "{html}");
    assert!(html.contains("<strong>6</strong>runs finished"), "{html}");
    assert!(html.contains("<svg class=\"hour\""), "{html}");
}

#[test]
fn an_empty_overview_says_so() {
    let html = render(&Overview::new(at(), vec![], vec![], (0, 0, 0), vec![])).into_string();
    assert!(
        html.contains("No run is ready, performing or paused."),
        "{html}"
    );
    assert!(
        html.contains("No step is due, held back or running."),
        "{html}"
    );
    assert!(html.contains("busiest minute: 0"), "{html}");
}

#[test]
fn a_cut_list_of_workflows_says_so() {
    let whole = render(&Overview::new(at(), vec![], vec![], (0, 0, 0), vec![])).into_string();
    assert!(!whole.contains("may be missing"), "{whole}");
    let cut = Overview::new(at(), vec![], vec![], (0, 0, 0), vec![]).with_workflows_cut(true);
    let html = render(&cut).into_string();
    assert!(
        html.contains("Some workflows may be missing: more than 1000 have runs not ended"),
        "{html}"
    );
}
