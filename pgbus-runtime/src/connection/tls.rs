//! TLS as libpq does it: the `sslmode` ladder, the roots `sslrootcert` names,
//! the client certificate of `sslcert`/`sslkey`, and the rustls configuration
//! that carries them out.
//!
//! The semantics follow libpq's documentation ("SSL Support", section 34.19 of
//! the PostgreSQL 15 manual): `disable`, `allow` and `prefer` never check the
//! server's certificate; `require` checks it only when a root certificate is
//! given (then it is `verify-ca`, as in libpq); `verify-ca` checks that a trusted
//! CA signed it; `verify-full` also that it names the host connected to.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::Error;

/// libpq's `sslmode`: whether TLS is used, and what of the server's certificate
/// is checked. The default is [`SslMode::Prefer`], as in libpq.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum SslMode {
    /// Plain TCP only.
    Disable,
    /// Plain first; TLS when the server refuses a plain connection (its
    /// `pg_hba.conf` has only `hostssl` lines). The certificate is not checked.
    Allow,
    /// TLS first; plain when the server does not offer TLS or the handshake
    /// fails. The certificate is not checked.
    #[default]
    Prefer,
    /// TLS or nothing. The certificate is not checked unless `sslrootcert` is
    /// given (or `~/.postgresql/root.crt` exists), which makes it `verify-ca`.
    Require,
    /// TLS, and the server's certificate chain must end at a root of
    /// `sslrootcert`; the host name is not checked.
    VerifyCa,
    /// As `verify-ca`, and the certificate must name the host connected to (a
    /// DNS name or an IP address in its subject alternative names).
    VerifyFull,
}

impl SslMode {
    /// Every mode, weakest first.
    pub const ALL: [Self; 6] = [
        Self::Disable,
        Self::Allow,
        Self::Prefer,
        Self::Require,
        Self::VerifyCa,
        Self::VerifyFull,
    ];

    /// The mode as libpq spells it: `disable`, `allow`, `prefer`, `require`,
    /// `verify-ca` or `verify-full`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Allow => "allow",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// Whether the connection must be encrypted.
    #[must_use]
    pub const fn requires_tls(self) -> bool {
        matches!(self, Self::Require | Self::VerifyCa | Self::VerifyFull)
    }
}

impl fmt::Display for SslMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SslMode {
    type Err = Error;

    /// Parses libpq's spelling.
    ///
    /// # Errors
    /// [`Error::InvalidSetting`] naming `sslmode` for any other value.
    fn from_str(value: &str) -> Result<Self, Error> {
        Self::ALL
            .into_iter()
            .find(|mode| mode.as_str() == value)
            .ok_or_else(|| Error::InvalidSetting {
                setting: "sslmode".to_owned(),
                problem: format!(
                    "`{value}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                ),
            })
    }
}

/// Where the roots that vouch for the server's certificate come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// A PEM file of one or more CA certificates.
    File(PathBuf),
    /// The platform's trusted roots (`sslrootcert=system`, libpq 16).
    System,
}

/// The TLS settings of a connection string, as given (defaults not applied).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TlsSettings {
    /// `sslmode` (or `PGSSLMODE`), if given.
    pub(crate) mode: Option<SslMode>,
    /// `sslrootcert` (or `PGSSLROOTCERT`).
    pub(crate) root_cert: Option<RootCert>,
    /// `sslcert` (or `PGSSLCERT`).
    pub(crate) cert: Option<PathBuf>,
    /// `sslkey` (or `PGSSLKEY`).
    pub(crate) key: Option<PathBuf>,
    /// `sslsni`: whether to send the host name in the handshake (default yes).
    pub(crate) sni: Option<bool>,
}

/// How the server's certificate is checked, once the settings are resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verification {
    /// Not at all (the handshake's signatures still are).
    None,
    /// The chain, not the name.
    Chain,
    /// The chain and the name.
    Full,
}

/// The TLS side of a connection, resolved: the mode, what is verified, and the
/// rustls configuration.
#[derive(Clone)]
pub(crate) struct Tls {
    pub(crate) mode: SslMode,
    pub(crate) verification: Verification,
    /// tokio-postgres's TLS connector on the rustls configuration.
    pub(crate) connector: tokio_postgres_rustls::MakeRustlsConnect,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tls")
            .field("mode", &self.mode)
            .field("verification", &self.verification)
            .finish_non_exhaustive()
    }
}

/// The crypto provider every connection uses: rustls's `ring` one, chosen
/// explicitly so the process-wide default (which an application may set to
/// another) is neither needed nor changed.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsSettings {
    /// Resolves the settings into a rustls configuration. `home` is the user's
    /// home directory, where libpq looks for `.postgresql/root.crt` when
    /// `sslrootcert` is not given.
    ///
    /// # Errors
    /// [`Error::InvalidSetting`] for settings that do not fit together
    /// (`sslrootcert=system` below `verify-full`, `sslcert` without `sslkey`),
    /// [`Error::UnreadableFile`] for a root certificate, client certificate or
    /// key that cannot be read or holds nothing usable.
    pub(crate) fn resolve(&self, home: Option<&Path>) -> Result<Tls, Error> {
        let system = self.root_cert == Some(RootCert::System);
        // libpq 16: `sslrootcert=system` makes `verify-full` the default and
        // refuses anything weaker, since any public CA could vouch for any name.
        let mode = match self.mode {
            Some(mode) if system && mode != SslMode::VerifyFull => {
                return Err(Error::InvalidSetting {
                    setting: "sslmode".to_owned(),
                    problem: format!(
                        "`{mode}` may not be used with `sslrootcert=system`; use `sslmode=verify-full`"
                    ),
                });
            }
            Some(mode) => mode,
            None if system => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        let root = self.root(mode, home)?;
        let verification = match (mode, &root) {
            (SslMode::VerifyFull, _) => Verification::Full,
            (SslMode::VerifyCa, _) | (SslMode::Require, Some(_)) => Verification::Chain,
            _ => Verification::None,
        };
        let provider = provider();
        let verifier: Arc<dyn ServerCertVerifier> = match (verification, root) {
            (Verification::None, _) | (_, None) => Arc::new(NameBlind {
                roots: None,
                algorithms: provider.signature_verification_algorithms,
            }),
            (Verification::Chain, Some(root)) => Arc::new(NameBlind {
                roots: Some(Arc::new(load_roots(&root)?)),
                algorithms: provider.signature_verification_algorithms,
            }),
            (Verification::Full, Some(root)) => WebPkiServerVerifier::builder_with_provider(
                Arc::new(load_roots(&root)?),
                Arc::clone(&provider),
            )
            .build()
            .map_err(|error| Error::InvalidSetting {
                setting: "sslrootcert".to_owned(),
                problem: format!("its roots cannot verify certificates: {error}"),
            })?,
        };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|error| Error::InvalidSetting {
                setting: "sslmode".to_owned(),
                problem: format!("TLS cannot be set up: {error}"),
            })?
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let mut config = match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                let chain = load_certs(cert, "sslcert")?;
                let key =
                    PrivateKeyDer::from_pem_file(key).map_err(|error| Error::UnreadableFile {
                        setting: "sslkey",
                        path: key.clone(),
                        reason: pem_reason(&error, "private key"),
                    })?;
                builder.with_client_auth_cert(chain, key).map_err(|error| {
                    Error::InvalidSetting {
                        setting: "sslkey".to_owned(),
                        problem: format!("does not fit `sslcert`: {error}"),
                    }
                })?
            }
            (Some(_), None) => {
                return Err(Error::InvalidSetting {
                    setting: "sslkey".to_owned(),
                    problem: "must be set with `sslcert` (the client certificate's private key)"
                        .to_owned(),
                });
            }
            (None, Some(_)) => {
                return Err(Error::InvalidSetting {
                    setting: "sslcert".to_owned(),
                    problem: "must be set with `sslkey` (the certificate the key belongs to)"
                        .to_owned(),
                });
            }
            (None, None) => builder.with_no_client_auth(),
        };
        config.enable_sni = self.sni.unwrap_or(true);
        Ok(Tls {
            mode,
            verification,
            connector: tokio_postgres_rustls::MakeRustlsConnect::new(config),
        })
    }

    /// The roots for `mode`: `sslrootcert`, else libpq's default file
    /// `~/.postgresql/root.crt` (under `require` only if it exists).
    fn root(&self, mode: SslMode, home: Option<&Path>) -> Result<Option<RootCert>, Error> {
        let default_root = home.map(|home| home.join(".postgresql").join("root.crt"));
        Ok(match (&self.root_cert, mode) {
            (Some(root), _) => Some(root.clone()),
            // As libpq: `require` verifies when the default root file exists.
            (None, SslMode::Require) => default_root
                .filter(|path| path.is_file())
                .map(RootCert::File),
            (None, SslMode::VerifyCa | SslMode::VerifyFull) => match default_root {
                Some(path) if path.is_file() => Some(RootCert::File(path)),
                Some(path) => {
                    return Err(Error::UnreadableFile {
                        setting: "sslrootcert",
                        path,
                        reason: format!(
                            "it does not exist, and `sslmode={mode}` needs a root certificate; name one with `sslrootcert=/path/to/ca.pem`, use the platform's roots with `sslrootcert=system`, or lower `sslmode` to `require`"
                        ),
                    });
                }
                None => {
                    return Err(Error::InvalidSetting {
                        setting: "sslrootcert".to_owned(),
                        problem: format!(
                            "`sslmode={mode}` needs a root certificate and there is no home directory to find `.postgresql/root.crt` in; set `sslrootcert`"
                        ),
                    });
                }
            },
            (None, _) => None,
        })
    }
}

/// What a PEM reading error says, in words for an operator.
fn pem_reason(error: &rustls::pki_types::pem::Error, what: &str) -> String {
    use rustls::pki_types::pem::Error as Pem;
    match error {
        Pem::Io(error) => error.to_string(),
        Pem::NoItemsFound => format!("it holds no PEM {what}"),
        other => format!("it is not a valid PEM {what} file: {other}"),
    }
}

/// The certificates of a PEM file; at least one.
fn load_certs(path: &Path, setting: &'static str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let unreadable = |reason: String| Error::UnreadableFile {
        setting,
        path: path.to_owned(),
        reason,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|error| unreadable(pem_reason(&error, "certificate")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| unreadable(pem_reason(&error, "certificate")))?;
    if certs.is_empty() {
        return Err(unreadable("it holds no PEM certificate".to_owned()));
    }
    Ok(certs)
}

/// The roots `root` names.
fn load_roots(root: &RootCert) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    match root {
        RootCert::File(path) => {
            for (index, cert) in load_certs(path, "sslrootcert")?.into_iter().enumerate() {
                roots.add(cert).map_err(|error| Error::UnreadableFile {
                    setting: "sslrootcert",
                    path: path.clone(),
                    reason: format!(
                        "certificate {} in it is not a usable CA certificate: {error}",
                        index + 1
                    ),
                })?;
            }
        }
        RootCert::System => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let errors: Vec<String> = found.errors.iter().map(ToString::to_string).collect();
                return Err(Error::InvalidSetting {
                    setting: "sslrootcert".to_owned(),
                    problem: format!(
                        "`system`: no trusted roots could be loaded from the platform ({}); name a CA file instead",
                        if errors.is_empty() {
                            "none found".to_owned()
                        } else {
                            errors.join("; ")
                        }
                    ),
                });
            }
        }
    }
    Ok(roots)
}

/// The verifier for every mode short of `verify-full`; the server's name is
/// never looked at.
///
/// With `roots` (`verify-ca`, and `require` with a root file) the chain must
/// end at one of them. Without (`disable`, `allow`, `prefer`, and `require`
/// without roots) any certificate is accepted, as libpq does. Either way the
/// handshake's signatures are still checked, so the session is bound to the
/// certificate's key.
#[derive(Debug)]
struct NameBlind {
    roots: Option<Arc<RootCertStore>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for NameBlind {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(roots) = &self.roots {
            let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                roots,
                intermediates,
                now,
                self.algorithms.all,
            )?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
