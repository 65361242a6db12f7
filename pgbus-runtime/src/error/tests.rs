use super::*;

#[derive(Debug, thiserror::Error)]
#[error("card declined")]
struct CardDeclined;

#[derive(Debug, thiserror::Error)]
#[error("gateway failed")]
struct Gateway {
    #[source]
    source: std::io::Error,
}

#[derive(Debug, thiserror::Error)]
#[error("layer {depth}")]
struct Layer {
    depth: usize,
    #[source]
    source: Option<Box<Layer>>,
}

#[test]
fn keeps_the_type_for_matching_and_reporting() {
    let error = StepError::from(CardDeclined);
    assert!(error.is::<CardDeclined>());
    assert!(!error.is::<Timeout>());
    assert!(error.type_name().ends_with("CardDeclined"));
    assert_eq!(error.message(), "card declined");
    assert!(error.downcast_ref::<CardDeclined>().is_some());
}

#[test]
fn collects_causes_nearest_first_and_caps_them() {
    let error = StepError::from(Gateway {
        source: std::io::Error::other("connection reset"),
    });
    assert_eq!(error.causes(), vec!["connection reset".to_owned()]);

    let mut chain = Layer {
        depth: 0,
        source: None,
    };
    for depth in 1..=8 {
        chain = Layer {
            depth,
            source: Some(Box::new(chain)),
        };
    }
    let causes = StepError::from(chain).causes();
    assert_eq!(causes.len(), MAX_ERROR_CAUSES);
    assert_eq!(causes[0], "layer 7");
}

#[test]
fn caps_long_messages_on_a_char_boundary() {
    let long = "é".repeat(MAX_ERROR_MESSAGE_CHARS + 10);
    let message = StepError::msg(long).message();
    assert_eq!(message.chars().count(), MAX_ERROR_MESSAGE_CHARS);
    assert!(message.ends_with('…'));
    let exact = "x".repeat(MAX_ERROR_MESSAGE_CHARS);
    assert_eq!(StepError::msg(exact.clone()).message(), exact);
}

#[test]
fn a_message_error_has_its_own_type() {
    let error = StepError::msg("nope");
    assert!(error.is::<Message>());
    assert_eq!(error.to_string(), "nope");
}

#[tokio::test]
async fn a_refused_connection_is_transient_and_a_malformed_request_is_not() {
    // Port 1 on the loopback: nothing listens, the kernel refuses at once.
    let mut config = tokio_postgres::Config::new();
    config.host("127.0.0.1").port(1).user("pgbus");
    let refused = config
        .connect(tokio_postgres::NoTls)
        .await
        .err()
        .expect("nothing listens on port 1");
    assert!(Error::Database(refused).is_transient());

    let malformed = "host=127.0.0.1 port=not-a-port"
        .parse::<tokio_postgres::Config>()
        .expect_err("a bad port");
    assert!(!Error::Database(malformed).is_transient());
}

#[test]
fn a_pool_that_timed_out_is_transient_and_a_closed_pool_is_not() {
    use deadpool_postgres::{PoolError, TimeoutType};
    assert!(Error::Pool(PoolError::Timeout(TimeoutType::Wait)).is_transient());
    assert!(!Error::Pool(PoolError::Closed).is_transient());
    assert!(
        !Error::RowCount {
            statement: "update_run",
            expected: 1,
            found: 0
        }
        .is_transient()
    );
}
