//! The digest a confirming form carries tells sets of runs apart, whatever
//! their order; the pages' words read as sentences.

use pgbus_runtime::RunId;

use super::{digest, runs_counted, verb};

#[test]
fn the_digest_is_of_the_set_not_its_order_nor_its_size() {
    let ids = |ids: &[i64]| ids.iter().copied().map(RunId).collect::<Vec<_>>();
    let confirmed = digest(&ids(&[22, 18, 17, 16]));
    assert_eq!(confirmed.len(), 64);
    assert!(
        confirmed
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    );
    assert_eq!(confirmed, digest(&ids(&[16, 17, 18, 22])), "order aside");
    assert_ne!(
        confirmed,
        digest(&ids(&[22, 19, 18, 16])),
        "as many runs, another set"
    );
    // Each id ends with a newline, so ids cannot run into each other.
    assert_ne!(digest(&ids(&[1, 23])), digest(&ids(&[12, 3])));
    assert_eq!(
        digest(&[]),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "SHA-256 of nothing"
    );
}

#[test]
fn the_words_of_a_bulk_action() {
    assert_eq!(verb("cancel"), ("Cancel", "cancelled"));
    assert_eq!(verb("resume"), ("Resume", "resumed"));
    assert_eq!(verb("skip"), ("Skip the steps of", "skipped"));
    assert_eq!(runs_counted(1), "1 run");
    assert_eq!(runs_counted(4_i64), "4 runs");
    assert_eq!(runs_counted(0), "0 runs");
}
