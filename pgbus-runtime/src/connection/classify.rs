//! Turning a failed connection attempt into an error that says which check
//! failed and which setting to change, by walking the driver error's source
//! chain down to the server's error or rustls's.

use std::time::Duration;

use rustls::CertificateError;

use super::connect::Connector;
use super::tls::SslMode;
use crate::error::Error;

/// Why one host could not be connected to.
#[derive(Debug)]
pub(crate) enum Cause {
    /// The driver failed (refused, TLS, authentication, the server's error).
    Pg(tokio_postgres::Error),
    /// The attempt ran past the connect timeout.
    TimedOut(Duration),
    /// There was no host to try.
    NoHost,
}

/// A failed connection: the last host tried, and why.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) cause: Cause,
}

impl Failure {
    /// The typed error for this failure.
    pub(crate) fn into_error(self, connector: &Connector) -> Error {
        let Self { host, port, cause } = self;
        match cause {
            Cause::TimedOut(after) => Error::ConnectTimeout { host, port, after },
            Cause::NoHost => Error::InvalidSetting {
                setting: "host".to_owned(),
                problem: "names no host to connect to".to_owned(),
            },
            Cause::Pg(error) => classify(
                error,
                host,
                port,
                connector.tls.mode,
                connector.config.get_user().unwrap_or_default(),
            ),
        }
    }
}

/// The rustls error somewhere in `error`'s source chain. tokio-rustls hands
/// rustls's error inside an `io::Error`, whose `source()` skips it, so each
/// `io::Error` is looked into as well.
pub(crate) fn rustls_error<'a>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(current) = next {
        if let Some(found) = current.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(found) = current
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(found);
        }
        next = current.source();
    }
    None
}

/// Whether any error in the chain says `text`.
fn says(error: &(dyn std::error::Error + 'static), text: &str) -> bool {
    let mut next = Some(error);
    while let Some(current) = next {
        if current.to_string().contains(text) {
            return true;
        }
        next = current.source();
    }
    false
}

/// Whether the TLS handshake itself failed (tokio-postgres's `Tls` kind).
pub(crate) fn tls_failed(error: &tokio_postgres::Error) -> bool {
    error.to_string() == "error performing TLS handshake" || rustls_error(error).is_some()
}

/// Whether `pg_hba.conf` has no line for the connection (SQLSTATE 28000 with
/// the server's "no `pg_hba.conf` entry" message), as opposed to a wrong password
/// or an unknown role.
pub(crate) fn hba_rejected(error: &tokio_postgres::Error) -> bool {
    error
        .as_db_error()
        .is_some_and(|db| db.code().code() == "28000" && db.message().contains("pg_hba.conf"))
}

/// The error for `error`, the failure of a connection to `host:port` as `user`
/// under `mode`.
pub(crate) fn classify(
    error: tokio_postgres::Error,
    host: String,
    port: u16,
    mode: SslMode,
    user: &str,
) -> Error {
    if let Some(db) = error.as_db_error() {
        let code = db.code().code();
        if code == "28P01" {
            return Error::WrongPassword {
                host,
                port,
                user: user.to_owned(),
                source: error,
            };
        }
        // The server says "no encryption" (PostgreSQL 12 and later) or "SSL
        // off" (before) for a plain connection `pg_hba.conf` does not let in.
        if hba_rejected(&error)
            && !mode.requires_tls()
            && (db.message().contains("no encryption") || db.message().contains("SSL off"))
        {
            return Error::TlsRequired {
                host,
                port,
                sslmode: mode,
                source: error,
            };
        }
        // PgBouncer (and proxies like it) refuse startup parameters they do
        // not know, `options` among them, with a FATAL of their own.
        if db.message().starts_with("unsupported startup parameter") {
            return Error::StartupParameterRefused {
                host,
                port,
                message: db.message().to_owned(),
            };
        }
        // The server refused this connection (an unknown database or role, too
        // many connections, a bad session setting): where, and its words.
        return Error::Connect { host, port, error };
    }
    if let Some(tls) = rustls_error(&error) {
        return match tls {
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => {
                let presented = match tls {
                    rustls::Error::InvalidCertificate(
                        CertificateError::NotValidForNameContext { presented, .. },
                    ) => presented.iter().map(|name| bare_name(name)).collect(),
                    _ => Vec::new(),
                };
                Error::HostNameMismatch {
                    host,
                    port,
                    presented,
                    source: error,
                }
            }
            rustls::Error::InvalidCertificate(why) => Error::CertificateNotTrusted {
                host,
                port,
                reason: untrusted_reason(why),
                source: error,
            },
            _ => Error::Tls { host, port, error },
        };
    }
    if says(&error, "server does not support TLS") {
        return Error::TlsRefused {
            host,
            port,
            sslmode: mode,
        };
    }
    if says(&error, "password missing") {
        return Error::PasswordMissing {
            host,
            port,
            user: user.to_owned(),
        };
    }
    if tls_failed(&error) {
        return Error::Tls { host, port, error };
    }
    Error::Connect { host, port, error }
}

/// A name as rustls reports it (`DnsName("localhost")`, an IP address in the
/// same shape) without the wrapper: `localhost`.
fn bare_name(name: &str) -> String {
    match (name.find('('), name.rfind(')')) {
        (Some(open), Some(close)) if open < close => {
            name[open + 1..close].trim_matches('"').to_owned()
        }
        _ => name.to_owned(),
    }
}

/// Why a certificate chain is not trusted, in words.
fn untrusted_reason(why: &CertificateError) -> String {
    match why {
        CertificateError::UnknownIssuer => "it is not signed by a CA in `sslrootcert`".to_owned(),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "it has expired".to_owned()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "it is not valid yet".to_owned()
        }
        CertificateError::Revoked => "it has been revoked".to_owned(),
        CertificateError::BadSignature => "its signature does not verify".to_owned(),
        CertificateError::BadEncoding => "it does not parse".to_owned(),
        other => format!("{other:?}"),
    }
}
