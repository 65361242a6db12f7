use chrono::{TimeZone as _, Utc};
use pgbus_runtime::{ConcurrencyNow, KeyNow, LimitsNow, RateNow, SlotHolder};

use super::render_limits;

fn sample() -> LimitsNow {
    LimitsNow::new(
        Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap(),
        vec![
            ConcurrencyNow::new(
                "key:orders".to_owned(),
                Some("orders".to_owned()),
                1,
                SlotHolder::Run,
            ),
            ConcurrencyNow::new("queue:mail".to_owned(), None, 4, SlotHolder::Step),
        ],
        vec![
            KeyNow::new("key:orders:a".to_owned(), "key:orders".to_owned(), 1, 2),
            KeyNow::new("key:orders:b".to_owned(), "key:orders".to_owned(), 0, 1),
            KeyNow::new(
                "workflow:gone".to_owned(),
                "workflow:gone".to_owned(),
                0,
                LimitsNow::COUNT_CAP,
            ),
        ],
        vec![
            RateNow::new(
                "key:orders".to_owned(),
                "orders".to_owned(),
                (2, 60_000),
                None,
            ),
            RateNow::new(
                "step:orders/charge".to_owned(),
                "orders".to_owned(),
                (5, 1_000),
                Some(3),
            ),
        ],
    )
}

/// A per-key limit lists each key in use under it, full ones marked; a
/// limit with nothing in use says so.
#[test]
fn each_key_shows_its_slots_and_held_rows_under_its_limit() {
    let html = render_limits(&sample()).into_string();
    assert!(
        html.contains(
            r#"<td rowspan="2"><code>key:orders</code></td><td rowspan="2">orders</td><td class="num" rowspan="2">1 per key</td><td rowspan="2">run</td><td><code>key:orders:a</code></td><td class="num full">1 of 1</td><td class="num">2</td>"#
        ),
        "{html}"
    );
    assert!(
        html.contains(r#"<tr><td><code>key:orders:b</code></td><td class="num">0 of 1</td><td class="num">1</td></tr>"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<td><code>queue:mail</code></td><td>-</td><td class="num">4</td><td>step</td><td class="empty">nothing held</td>"#),
        "{html}"
    );
}

/// A key whose limit is gone is listed apart; a count at the cap is a
/// floor; rates say their window's use, or that they have one per key.
#[test]
fn dropped_limits_capped_counts_and_rates_say_so() {
    let html = render_limits(&sample()).into_string();
    assert!(html.contains("no longer in force"), "{html}");
    assert!(
        html.contains(r#"<td><code>workflow:gone</code></td><td class="num">0</td><td class="num"><span title="at least: the read stops at 10000 rows">10000+</span></td>"#),
        "{html}"
    );
    assert!(html.contains(r#"<td>2 per 1m, per key</td><td class="num"><span title="one window per concurrency key; not listed">per key</span></td>"#), "{html}");
    assert!(
        html.contains(r#"<td>5 per 1s</td><td class="num">3 of 5</td>"#),
        "{html}"
    );
}

#[test]
fn no_limits_say_none() {
    let html = render_limits(&LimitsNow::new(
        Utc.with_ymd_and_hms(2026, 12, 3, 12, 0, 0).unwrap(),
        vec![],
        vec![],
        vec![],
    ))
    .into_string();
    assert_eq!(html.matches("None in force.").count(), 2, "{html}");
}
