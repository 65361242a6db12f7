//! What an `Error` says when printed: the server's words and SQLSTATE in
//! `Display`, the causes in `Debug`, and nothing said twice.

use pgbus_runtime::Error;
use pgbus_runtime::prelude::*;

use crate::pg::TestDb;

#[derive(Serialize, Deserialize)]
struct Nothing;

struct Unstarted;

#[workflow(input = Nothing)]
impl Unstarted {
    #[step]
    async fn only(&self, _cx: &mut StepCx<Nothing>) {}
}

#[tokio::test]
async fn a_server_error_displays_its_message_and_sqlstate_once() {
    let test = TestDb::unmigrated().await;
    let error = test
        .client()
        .start::<Unstarted>(&Nothing)
        .await
        .expect_err("the schema has no tables yet");
    let display = error.to_string();
    assert!(
        display.starts_with("database error: ERROR: relation ")
            && display.contains("does not exist (SQLSTATE 42P01)")
            && display
                .ends_with("is the schema migrated? run `Database::migrate` (or `pgbus migrate`)"),
        "{display}"
    );
    // `Debug`, what `main` prints for a returned error, is readable and says
    // it once: no struct dump, no second copy from a source chain.
    let debug = format!("{error:?}");
    assert_eq!(debug, display);
    assert!(std::error::Error::source(&error).is_none());
    assert!(matches!(&error, Error::Database(e) if e.code().is_some()));
}

#[test]
fn debug_lists_the_causes_below_the_error() {
    let json = serde_json::from_str::<u8>("[").expect_err("not a number");
    let error = Error::from(json);
    let debug = format!("{error:?}");
    assert!(
        debug.starts_with("JSON conversion failed\n\nCaused by:\n    "),
        "{debug}"
    );
}
