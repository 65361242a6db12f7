//! The run page's timeline chart: a range-bar chart drawn on the server as
//! inline SVG (no script, nothing fetched), one row per attempt and one for the
//! run's paused periods, one bar per piece of the timeline.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use pgbus_runtime::timeline::{Piece, Segment};

/// Width of the bar area, in SVG units.
const WIDTH: f64 = 900.0;
/// Width of the row labels on the left.
const LABEL: f64 = 170.0;
/// Height of one row.
const ROW: f64 = 26.0;

/// The row a segment is drawn in: its attempt, or the run's paused row.
fn row_key(segment: &Segment) -> String {
    segment.step.as_ref().map_or_else(
        || "paused (run)".to_owned(),
        |step| format!("{step}#{}", segment.attempt.unwrap_or(0)),
    )
}

/// The CSS class of a bar: its piece, and for `ran` (and the last piece of an
/// ended attempt) how the attempt ended.
pub(crate) fn bar_class(segment: &Segment) -> String {
    match (segment.piece, segment.outcome) {
        (piece, Some(outcome)) => format!("bar {} ended-{}", piece.as_str(), outcome.as_str()),
        (Piece::Ran, None) if segment.open => "bar ran running".to_owned(),
        (piece, None) => format!("bar {}", piece.as_str()),
    }
}

/// The chart of `segments` (a run's timeline at `now`); an empty note when
/// there is nothing to draw.
pub(crate) fn timeline(segments: &[Segment], now: DateTime<Utc>) -> Markup {
    let (Some(start), Some(end)) = (
        segments.iter().map(|s| s.from).min(),
        segments
            .iter()
            .map(|s| s.to)
            .max()
            .map(|e| e.max(now.min(e))),
    ) else {
        return html! { p.empty { "Nothing to draw yet." } };
    };
    let span_ms = (end - start).num_milliseconds().max(1) as f64;
    let x = |at: DateTime<Utc>| LABEL + WIDTH * ((at - start).num_milliseconds() as f64 / span_ms);
    // Each segment's row, found once: rows in first-seen order, a map from
    // key to row, so the chart is linear in its segments.
    let mut rows: Vec<String> = Vec::new();
    let mut row_of: HashMap<String, usize> = HashMap::new();
    let placed: Vec<(usize, &Segment)> = segments
        .iter()
        .map(|segment| {
            let key = row_key(segment);
            let row = *row_of.entry(key.clone()).or_insert_with(|| {
                rows.push(key);
                rows.len() - 1
            });
            (row, segment)
        })
        .collect();
    let height = ROW * rows.len() as f64 + 24.0;
    html! {
        svg.timeline xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {} {height}", LABEL + WIDTH + 10.0))
            aria-label="timeline of the run's attempts" {
            @for (i, key) in rows.iter().enumerate() {
                // Cut to fit the label column; the bars' titles carry it whole.
                text.label x="4" y=(format!("{:.1}", ROW * i as f64 + 17.0)) { (crate::commands::clip(key, 24)) }
            }
            @for (row, segment) in &placed {
                @let key = &rows[*row];
                @let left = x(segment.from);
                @let width = (x(segment.to) - left).max(1.0);
                rect class=(bar_class(segment))
                    data-row=(key)
                    data-piece=(segment.piece.as_str())
                    x=(format!("{left:.1}")) y=(format!("{:.1}", ROW * *row as f64 + 4.0))
                    width=(format!("{width:.1}")) height=(format!("{:.1}", ROW - 8.0)) {
                    title {
                        (key) " " (segment.piece.as_str()) ": "
                        (crate::commands::took(segment.duration()))
                        @if let Some(outcome) = segment.outcome { " (" (outcome.as_str()) ")" }
                        @if segment.open { " (still going)" }
                    }
                }
            }
            text.axis x=(LABEL) y=(format!("{:.1}", height - 6.0)) { (crate::commands::time(start)) }
            text.axis x=(LABEL + WIDTH) y=(format!("{:.1}", height - 6.0)) text-anchor="end" {
                (crate::commands::time(end))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;
    use pgbus_runtime::StepOutcome;

    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::<Utc>::from_timestamp(1_900_000_000, 0).expect("a time") + TimeDelta::seconds(s)
    }

    fn piece(piece: Piece, step: Option<&str>, from: i64, to: i64) -> Segment {
        Segment {
            piece,
            step_id: step.map(|_| 1),
            step: step.map(str::to_owned),
            attempt: step.map(|_| 1),
            from: at(from),
            to: at(to),
            open: false,
            outcome: None,
        }
    }

    #[test]
    fn bars_sit_in_their_rows_in_proportion_to_time() {
        let mut ran = piece(Piece::Ran, Some("charge"), 2, 10);
        ran.outcome = Some(StepOutcome::Completed);
        let segments = [
            piece(Piece::Queued, Some("charge"), 0, 2),
            ran,
            piece(Piece::Paused, None, 5, 10),
        ];
        let svg = timeline(&segments, at(10)).into_string();
        assert_eq!(svg.matches("<rect").count(), 3);
        // The queued bar: the first fifth of the width, in row 0.
        assert!(
            svg.contains(r#"<rect class="bar queued" data-row="charge#1" data-piece="queued" x="170.0" y="4.0" width="180.0""#),
            "{svg}"
        );
        // Ran: coloured by how the attempt ended.
        assert!(svg.contains(r#"class="bar ran ended-completed""#), "{svg}");
        assert!(
            svg.contains(
                r#"data-row="paused (run)" data-piece="paused" x="620.0" y="30.0" width="450.0""#
            ),
            "{svg}"
        );
        assert!(
            svg.contains("<title>charge#1 ran: 8s (completed)</title>"),
            "{svg}"
        );
    }

    #[test]
    fn running_bars_and_empty_timelines_say_so() {
        let mut running = piece(Piece::Ran, Some("s"), 0, 3);
        running.open = true;
        assert_eq!(bar_class(&running), "bar ran running");
        assert!(
            timeline(&[running], at(3))
                .into_string()
                .contains("(still going)")
        );
        assert!(
            timeline(&[], at(0))
                .into_string()
                .contains("Nothing to draw yet.")
        );
    }

    #[test]
    fn labels_are_escaped() {
        let segments = [piece(Piece::Ran, Some("<b>x</b>"), 0, 1)];
        let svg = timeline(&segments, at(1)).into_string();
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(svg.contains("&lt;b&gt;x&lt;/b&gt;#1"), "{svg}");
    }
}
