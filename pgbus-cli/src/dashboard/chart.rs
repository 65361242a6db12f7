//! The dashboard's charts, drawn on the server as inline SVG (no script,
//! nothing fetched): the run page's timeline, a range-bar chart with one row
//! per attempt and one for the run's paused periods, one bar per piece of the
//! timeline; and the overview's last hour, one stacked column per minute.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use maud::{Markup, html};
use pgbus_runtime::MinuteCounts;
use pgbus_runtime::timeline::{Piece, Segment};

use super::when::ago;

/// Width of the bar area, in SVG units.
const WIDTH: f64 = 900.0;
/// Width of the row labels on the left, at least: wider for longer labels,
/// up to [`LABEL_CHARS_AT_MOST`] characters.
const LABEL: f64 = 170.0;
/// About how wide one character of a label is (12px system-ui), in SVG
/// units, with the column's margin.
const LABEL_CHAR: f64 = 7.0;
const LABEL_MARGIN: f64 = 12.0;
/// The most characters of a label the column grows for (334 units), so the
/// bars keep most of the chart.
const LABEL_CHARS_AT_MOST: usize = 46;
/// The narrowest a bar is drawn, in SVG units (about 3 pixels at the
/// chart's usual size): a step that ran for a millisecond of a minute-long
/// run still shows, a sliver wider than its share of time.
const MIN_BAR: f64 = 3.0;
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
    // Each segment's row, found once: rows in first-seen order, a map from
    // key to row, so the chart is linear in its segments.
    let mut rows: Vec<String> = Vec::new();
    let mut row_of: HashMap<String, usize> = HashMap::new();
    let mut placed: Vec<(usize, &Segment)> = segments
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
    // `ran` bars last, so a sliver widened to `MIN_BAR` lies on top of the
    // piece that follows it rather than under it (a stable sort: rows and
    // times keep their order otherwise).
    placed.sort_by_key(|(_, segment)| segment.piece == Piece::Ran);
    // The label column fits the longest label, within bounds; a label
    // longer than that is cut, and its `<title>` (a tooltip) holds it whole.
    let longest = rows.iter().map(|k| k.chars().count()).max().unwrap_or(0);
    let label_chars = longest.min(LABEL_CHARS_AT_MOST);
    let label = (label_chars as f64 * LABEL_CHAR + LABEL_MARGIN).max(LABEL);
    let span_ms = (end - start).num_milliseconds().max(1) as f64;
    let x = |at: DateTime<Utc>| label + WIDTH * ((at - start).num_milliseconds() as f64 / span_ms);
    let height = ROW * rows.len() as f64 + 24.0;
    html! {
        svg.timeline xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {} {height}", label + WIDTH + 10.0))
            aria-label="timeline of the run's attempts" {
            @for (i, key) in rows.iter().enumerate() {
                text.label x="4" y=(format!("{:.1}", ROW * i as f64 + 17.0)) {
                    title { (key) }
                    (crate::commands::clip(key, label_chars))
                }
            }
            @for (row, segment) in &placed {
                @let key = &rows[*row];
                @let width = (x(segment.to) - x(segment.from)).max(MIN_BAR);
                // A widened bar at the end of the chart stays inside it.
                @let left = x(segment.from).min(label + WIDTH - width);
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
            // The ends of the time axis, and how long before the page's now.
            text.axis x=(label) y=(format!("{:.1}", height - 6.0)) {
                (crate::commands::time(start)) " (" (ago(start, now)) ")"
            }
            text.axis x=(label + WIDTH) y=(format!("{:.1}", height - 6.0)) text-anchor="end" {
                (crate::commands::time(end)) " (" (ago(end, now)) ")"
            }
        }
    }
}

/// Height of the last hour's chart, in SVG units, and of its bar area.
const HOUR_HEIGHT: f64 = 130.0;
const HOUR_BARS: f64 = 100.0;
/// The minutes the last hour's chart has a column for: the hour is
/// `(at - 1h, at]`, so the minute holding `at - 1h` and the one holding `at`
/// both show.
const HOUR_COLUMNS: i64 = 61;

/// The runs that ended or paused in each minute of the hour before `at`
/// (the overview's [`MinuteCounts`]), one stacked column per minute, oldest
/// on the left: finished at the bottom, then cancelled, then paused, each in
/// the colour the run page gives that end. Scaled to the busiest minute,
/// whose count the chart says; a minute with nothing is a gap.
/// One minute's column as `(class, y, height)` pieces, bottom up, for the
/// counts that are not zero.
fn stack(m: &MinuteCounts, per_run: f64) -> Vec<(&'static str, f64, f64)> {
    let mut top = HOUR_BARS + 4.0;
    [
        ("finished", m.finished),
        ("cancelled", m.cancelled),
        ("paused", m.paused),
    ]
    .into_iter()
    .filter(|(_, n)| *n > 0)
    .map(|(class, n)| {
        let height = n as f64 * per_run;
        top -= height;
        (class, top, height)
    })
    .collect()
}

pub(crate) fn last_hour(minutes: &[MinuteCounts], at: DateTime<Utc>) -> Markup {
    use chrono::{DurationRound as _, TimeDelta};
    let last = at.duration_trunc(TimeDelta::minutes(1)).unwrap_or(at);
    let first = last - TimeDelta::minutes(HOUR_COLUMNS - 1);
    let shown: Vec<&MinuteCounts> = minutes
        .iter()
        .filter(|m| m.minute >= first && m.minute <= last)
        .collect();
    let busiest = shown
        .iter()
        .map(|m| m.finished + m.cancelled + m.paused)
        .max()
        .unwrap_or(0);
    let column = WIDTH / HOUR_COLUMNS as f64;
    let per_run = if busiest > 0 {
        HOUR_BARS / busiest as f64
    } else {
        0.0
    };
    html! {
        svg.hour xmlns="http://www.w3.org/2000/svg" role="img"
            viewBox=(format!("0 0 {WIDTH} {HOUR_HEIGHT}"))
            aria-label="runs ended and paused per minute over the last hour" {
            line.base x1="0" y1=(HOUR_BARS + 4.0) x2=(WIDTH) y2=(HOUR_BARS + 4.0) {}
            @for m in shown {
                @let i = (m.minute - first).num_minutes() as f64;
                @let x = format!("{:.1}", i * column + 1.0);
                @let width = format!("{:.1}", (column - 2.0).max(1.0));
                g.minute data-minute=(crate::commands::time(m.minute)) {
                    title {
                        (crate::commands::time(m.minute)) ": " (m.finished) " finished, "
                        (m.cancelled) " cancelled, " (m.paused) " paused"
                    }
                    @for (class, y, height) in stack(m, per_run) {
                        rect class=(class) x=(x) y=(format!("{y:.1}")) width=(width) height=(format!("{height:.1}")) {}
                    }
                }
            }
            text.axis x="0" y=(HOUR_HEIGHT - 6.0) { (ago(first, at)) }
            text.axis x=(WIDTH) y=(HOUR_HEIGHT - 6.0) text-anchor="end" { "now" }
            text.axis x="0" y="12" { "busiest minute: " (busiest) }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{DurationRound as _, TimeDelta};
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

    /// A step that ran one millisecond of a minute still shows, on top of
    /// what follows it, and a widened bar at the end stays in the chart.
    #[test]
    fn a_millisecond_sliver_is_drawn_wide_enough_and_on_top() {
        let start = at(0);
        let ms = |n: i64| start + TimeDelta::milliseconds(n);
        let mut ran = piece(Piece::Ran, Some("quick"), 0, 0);
        ran.from = ms(30_000);
        ran.to = ms(30_001);
        let mut waited = piece(Piece::Waited, Some("quick"), 0, 0);
        waited.to = ms(30_000);
        let mut queued = piece(Piece::Queued, Some("quick"), 0, 0);
        queued.from = ms(30_001);
        queued.to = ms(59_999);
        let mut last = piece(Piece::Ran, Some("quick"), 0, 0);
        last.from = ms(59_999);
        last.to = ms(60_000);
        let svg = timeline(&[waited, ran, queued, last], ms(60_000)).into_string();
        let rects: Vec<&str> = svg.split("<rect").skip(1).collect();
        assert_eq!(rects.len(), 4, "{svg}");
        // Drawn after the waited and queued bars, so nothing covers them.
        assert!(rects[2].contains("data-piece=\"ran\""), "{svg}");
        assert!(rects[3].contains("data-piece=\"ran\""), "{svg}");
        assert!(
            rects[2].contains(r#"x="620.0" y="4.0" width="3.0""#),
            "{}",
            rects[2]
        );
        // The last sliver ends at the chart's right edge, not past it.
        assert!(
            rects[3].contains(r#"x="1067.0" y="4.0" width="3.0""#),
            "{}",
            rects[3]
        );
        assert!(
            rects[2].contains("<title>quick#1 ran: 1ms</title>"),
            "{svg}"
        );
    }

    /// A long label widens its column (up to a bound) instead of being cut;
    /// one longer still is cut, and its tooltip holds it whole.
    #[test]
    fn labels_are_whole_where_there_is_room_and_in_their_tooltip() {
        let medium = "reserve_inventory_for_the_order";
        let svg = timeline(&[piece(Piece::Ran, Some(medium), 0, 1)], at(1)).into_string();
        assert!(
            svg.contains(&format!("<title>{medium}#1</title>{medium}#1</text>")),
            "{svg}"
        );
        // 33 characters at 7 units and a margin of 12: a column of 243.
        assert!(svg.contains(r#"viewBox="0 0 1153 50""#), "{svg}");
        let long = "x".repeat(80);
        let svg = timeline(&[piece(Piece::Ran, Some(&long), 0, 1)], at(1)).into_string();
        assert!(svg.contains(&format!("<title>{long}#1</title>")), "{svg}");
        assert!(
            svg.contains(&format!(">{}…</text>", "x".repeat(45))),
            "{svg}"
        );
        assert!(
            svg.contains(r#"viewBox="0 0 1244 50""#),
            "the column at its widest: {svg}"
        );
    }

    #[test]
    fn labels_are_escaped() {
        let segments = [piece(Piece::Ran, Some("<b>x</b>"), 0, 1)];
        let svg = timeline(&segments, at(1)).into_string();
        assert!(!svg.contains("<b>"), "{svg}");
        assert!(svg.contains("&lt;b&gt;x&lt;/b&gt;#1"), "{svg}");
    }

    /// One column per minute of the hour, stacked finished, cancelled,
    /// paused from the bottom, scaled to the busiest minute; a minute
    /// outside the hour is left out.
    #[test]
    fn the_last_hour_stacks_each_minute() {
        use pgbus_runtime::MinuteCounts;
        let now = at(30);
        let minute = |back: i64, f, c, p| {
            let start = now.duration_trunc(TimeDelta::minutes(1)).expect("a minute")
                - TimeDelta::minutes(back);
            MinuteCounts::new(start, f, c, p)
        };
        let svg = last_hour(
            &[minute(61, 9, 9, 9), minute(60, 1, 0, 0), minute(0, 2, 1, 1)],
            now,
        )
        .into_string();
        assert_eq!(svg.matches("<rect").count(), 4, "{svg}");
        assert!(svg.contains("busiest minute: 4"), "{svg}");
        // The oldest column on the left; one run is a quarter of the height.
        assert!(
            svg.contains(r#"<rect class="finished" x="1.0" y="79.0" width="12.8" height="25.0">"#),
            "{svg}"
        );
        // The newest column at the right: finished, cancelled, paused, up.
        let last = &svg[svg.rfind("<g class=\"minute\"").expect("a column")..];
        assert!(
            last.contains(r#"class="finished" x="886.2" y="54.0" width="12.8" height="50.0""#),
            "{last}"
        );
        assert!(
            last.contains(r#"class="cancelled" x="886.2" y="29.0" width="12.8" height="25.0""#),
            "{last}"
        );
        assert!(
            last.contains(r#"class="paused" x="886.2" y="4.0" width="12.8" height="25.0""#),
            "{last}"
        );
        assert!(
            last.contains(": 2 finished, 1 cancelled, 1 paused</title>"),
            "{last}"
        );
    }
}
