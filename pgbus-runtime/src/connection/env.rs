//! libpq's environment variables, filling what the connection string leaves
//! out ("Environment Variables", section 34.15 of the PostgreSQL 15 manual),
//! and the operating system's user name as the last fallback for the user.
//!
//! Reading goes through a lookup function so tests need not touch the
//! process environment.

use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::config::TargetSessionAttrs;

use super::params::Split;
use super::tls::{RootCert, SslMode, TlsSettings};
use crate::error::Error;

/// Looks an environment variable up: `None` when unset (or empty, which
/// pgbus treats as unset).
pub(crate) type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, as a [`Lookup`].
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The operating system's user name, as libpq takes it when no user is given
/// (not `$USER`, which a service manager or container may leave unset).
pub(crate) fn os_user() -> Option<String> {
    whoami::username().ok().filter(|name| !name.is_empty())
}

/// The host libpq-compatible clients use when neither the string nor `PGHOST`
/// names one. libpq itself would use its Unix-socket directory; pgbus uses TCP
/// to the local host so that TLS settings apply alike.
pub(crate) const DEFAULT_HOST: &str = "localhost";

/// What the string and the environment say, resolved.
#[derive(Debug, Clone)]
pub(crate) struct Resolved {
    /// tokio-postgres's configuration: the string's settings, then the
    /// environment's where the string had none.
    pub(crate) config: tokio_postgres::Config,
    /// The TLS settings, from the string or `PGSSL*`.
    pub(crate) tls: TlsSettings,
    /// The settings the string named (libpq's names).
    pub(crate) keys: std::collections::BTreeSet<String>,
    /// The user's home directory, where libpq looks for `.postgresql/`.
    pub(crate) home: Option<PathBuf>,
}

/// Resolves `text` (a URL or key-value string) with `env` and `os_user`.
///
/// # Errors
/// [`Error::InvalidSetting`] naming the setting or environment variable that is
/// unknown or ill-formed.
pub(crate) fn resolve(
    text: &str,
    env: Lookup<'_>,
    os_user: &dyn Fn() -> Option<String>,
) -> Result<Resolved, Error> {
    let split = super::params::split(text)?;
    let env_ports = match env("PGPORT") {
        Some(ports) => ports
            .split(',')
            .map(|port| {
                port.trim()
                    .parse::<u16>()
                    .map_err(|_| Error::InvalidSetting {
                        setting: "PGPORT".to_owned(),
                        problem: format!("`{port}` is not a port number (1 to 65535)"),
                    })
            })
            .collect::<Result<Vec<u16>, Error>>()?,
        None => Vec::new(),
    };
    let rest = if super::params::is_url(&split.rest) && !env_ports.is_empty() {
        super::params::with_default_ports(&split.rest, &env_ports)
    } else {
        split.rest.clone()
    };
    let mut config: tokio_postgres::Config = rest.parse().map_err(|error| parse_error(&error))?;
    let tls = tls_settings(&split, env)?;

    if let Some(millis) = split.own("tcp_user_timeout") {
        // libpq's unit, milliseconds; zero is the system's default, as there.
        let millis: u64 = millis.trim().parse().map_err(|_| Error::InvalidSetting {
            setting: "tcp_user_timeout".to_owned(),
            problem: format!("`{millis}` is not a whole number of milliseconds"),
        })?;
        if millis > 0 {
            config.tcp_user_timeout(Duration::from_millis(millis));
        }
    }
    fill_hosts(&mut config, env)?;
    if config.get_ports().is_empty() {
        for port in &env_ports {
            config.port(*port);
        }
    }
    if config.get_user().is_none() {
        let user = env("PGUSER")
            .or_else(os_user)
            .ok_or_else(|| Error::InvalidSetting {
                setting: "user".to_owned(),
                problem: "is not given and the operating system's user name cannot be read; set `user` in the URL or `PGUSER`".to_owned(),
            })?;
        config.user(user);
    }
    if config.get_password().is_none()
        && let Some(password) = env("PGPASSWORD")
    {
        config.password(password);
    }
    if config.get_dbname().is_none()
        && let Some(dbname) = env("PGDATABASE")
    {
        config.dbname(dbname);
    }
    if config.get_application_name().is_none()
        && let Some(name) = env("PGAPPNAME")
    {
        config.application_name(name);
    }
    if config.get_options().is_none()
        && let Some(options) = env("PGOPTIONS")
    {
        config.options(options);
    }
    if config.get_connect_timeout().is_none()
        && let Some(seconds) = env("PGCONNECT_TIMEOUT")
    {
        let seconds: i64 = seconds.trim().parse().map_err(|_| Error::InvalidSetting {
            setting: "PGCONNECT_TIMEOUT".to_owned(),
            problem: format!("`{seconds}` is not a whole number of seconds"),
        })?;
        // As libpq: zero or less is no bound of the user's (pgbus's default
        // applies), and one second is taken as two.
        if let Ok(seconds) = u64::try_from(seconds)
            && seconds > 0
        {
            config.connect_timeout(Duration::from_secs(seconds.max(2)));
        }
    }
    if !split.keys.contains("target_session_attrs")
        && let Some(attrs) = env("PGTARGETSESSIONATTRS")
    {
        config.target_session_attrs(match attrs.as_str() {
            "any" => TargetSessionAttrs::Any,
            "read-write" => TargetSessionAttrs::ReadWrite,
            "read-only" => TargetSessionAttrs::ReadOnly,
            other => {
                return Err(Error::InvalidSetting {
                    setting: "PGTARGETSESSIONATTRS".to_owned(),
                    problem: format!("`{other}` is not one of any, read-write, read-only"),
                });
            }
        });
    }
    Ok(Resolved {
        config,
        tls,
        keys: split.keys,
        home: env("HOME").map(PathBuf::from),
    })
}

/// `PGHOST` (several, comma-separated; a path is a Unix-socket directory), else
/// `PGHOSTADDR`, else [`DEFAULT_HOST`], when the string names no host.
fn fill_hosts(config: &mut tokio_postgres::Config, env: Lookup<'_>) -> Result<(), Error> {
    if !config.get_hosts().is_empty() || !config.get_hostaddrs().is_empty() {
        return Ok(());
    }
    if let Some(hosts) = env("PGHOST") {
        for host in hosts.split(',') {
            config.host(host);
        }
    } else if let Some(addrs) = env("PGHOSTADDR") {
        for addr in addrs.split(',') {
            let addr = addr.parse().map_err(|_| Error::InvalidSetting {
                setting: "PGHOSTADDR".to_owned(),
                problem: format!("`{addr}` is not an IP address"),
            })?;
            config.hostaddr(addr);
        }
    } else {
        config.host(DEFAULT_HOST);
    }
    Ok(())
}

/// The TLS settings of the string, with `PGSSLMODE`, `PGSSLROOTCERT`,
/// `PGSSLCERT` and `PGSSLKEY` where it has none.
fn tls_settings(split: &Split, env: Lookup<'_>) -> Result<TlsSettings, Error> {
    let mode = match (split.own("sslmode"), env("PGSSLMODE")) {
        (Some(mode), _) => Some(mode.parse::<SslMode>()?),
        (None, Some(mode)) => Some(mode.parse::<SslMode>().map_err(|_| Error::InvalidSetting {
            setting: "PGSSLMODE".to_owned(),
            problem: format!(
                "`{mode}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
            ),
        })?),
        (None, None) => None,
    };
    let pick = |setting: &str, var: &str| {
        split
            .own(setting)
            .map(str::to_owned)
            .or_else(|| env(var))
            .filter(|value| !value.is_empty())
    };
    let root_cert = pick("sslrootcert", "PGSSLROOTCERT").map(|root| {
        if root == "system" {
            RootCert::System
        } else {
            RootCert::File(PathBuf::from(root))
        }
    });
    let sni = match split.own("sslsni") {
        None => None,
        Some("1") => Some(true),
        Some("0") => Some(false),
        Some(other) => {
            return Err(Error::InvalidSetting {
                setting: "sslsni".to_owned(),
                problem: format!("`{other}` is not 0 or 1"),
            });
        }
    };
    Ok(TlsSettings {
        mode,
        root_cert,
        cert: pick("sslcert", "PGSSLCERT").map(PathBuf::from),
        key: pick("sslkey", "PGSSLKEY").map(PathBuf::from),
        sni,
    })
}

/// tokio-postgres's parse error as a setting error that names the setting.
fn parse_error(error: &tokio_postgres::Error) -> Error {
    let cause =
        std::error::Error::source(error).map_or_else(|| error.to_string(), ToString::to_string);
    // tokio-postgres says "unknown option `x`" or "invalid value for option `x`".
    let named = cause
        .split('`')
        .nth(1)
        .filter(|_| cause.matches('`').count() == 2)
        .map(str::to_owned);
    match named {
        Some(setting) if cause.starts_with("unknown option") => Error::InvalidSetting {
            setting,
            problem: "is not a setting pgbus or tokio-postgres knows".to_owned(),
        },
        Some(setting) => Error::InvalidSetting {
            setting,
            problem: "has a value that is not valid".to_owned(),
        },
        None => Error::InvalidSetting {
            setting: "url".to_owned(),
            problem: format!("the connection string does not parse: {cause}"),
        },
    }
}
