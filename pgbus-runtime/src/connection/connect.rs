//! Opening connections: one host at a time, each attempt bounded by the
//! connect timeout, with libpq's `allow`/`prefer` fallbacks; and the pools
//! built on it.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Hook, HookError, Manager, ManagerConfig, Pool, RecyclingMethod, Runtime};
use futures_util::future::BoxFuture;
use tokio_postgres::config::{Host, LoadBalanceHosts, SslMode as WireSslMode};
use tokio_postgres::tls::MakeTlsConnect;
use tokio_postgres::{Client, Config, Socket};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::classify::{Cause, Failure, hba_rejected, tls_failed};
use super::tls::{SslMode, Tls};
use crate::error::Error;

/// The TLS stream of a connection (used or not: a plain connection has the same
/// type).
pub(crate) type TlsStream = <MakeRustlsConnect as MakeTlsConnect<Socket>>::Stream;

/// A connection's driver, as tokio-postgres returns it.
pub(crate) type PgConnection = tokio_postgres::Connection<Socket, TlsStream>;

/// A pooled connection unused for longer than this is checked with an empty
/// query before it is handed out again.
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(1);

/// How long that check may take; a connection that does not answer in time is
/// dropped and replaced.
const CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything needed to open a connection like every other pgbus opens: the
/// settings (session options included) and the TLS side.
#[derive(Debug, Clone)]
pub(crate) struct Connector {
    /// Every setting; the hosts are tried one at a time.
    pub(crate) config: Config,
    /// The TLS mode and rustls configuration.
    pub(crate) tls: Tls,
    /// The bound of one attempt on one host.
    pub(crate) connect_timeout: Duration,
    /// How long a caller waits for a free connection of a pool this builds.
    pub(crate) pool_wait: Duration,
}

/// One host to try, with the configuration that names only it.
struct Target {
    host: String,
    port: u16,
    config: Config,
}

impl Connector {
    /// The hosts in the order to try them (shuffled under
    /// `load_balance_hosts=random`), each with its port.
    fn targets(&self) -> Vec<Target> {
        let hosts = self.config.get_hosts();
        let addrs = self.config.get_hostaddrs();
        let ports = self.config.get_ports();
        let count = hosts.len().max(addrs.len());
        let mut targets: Vec<Target> = (0..count)
            .map(|i| {
                let host = hosts.get(i);
                let addr = addrs.get(i).copied();
                let port = ports
                    .get(i)
                    .or_else(|| ports.first())
                    .copied()
                    .unwrap_or(5432);
                let shown = match (host, addr) {
                    (Some(Host::Tcp(name)), _) => name.clone(),
                    (Some(Host::Unix(path)), _) => path.display().to_string(),
                    (None, Some(addr)) => addr.to_string(),
                    (None, None) => String::new(),
                };
                Target {
                    host: shown,
                    port,
                    config: one_host(&self.config, host, addr, port),
                }
            })
            .collect();
        if self.config.get_load_balance_hosts() == LoadBalanceHosts::Random {
            // A random order without a random-number crate: sort by a hash
            // keyed afresh by the standard library for each call.
            let state = std::collections::hash_map::RandomState::new();
            targets.sort_by_cached_key(|target| {
                std::hash::BuildHasher::hash_one(&state, (&target.host, target.port))
            });
        }
        targets
    }

    /// The `host:port` of every host, in the order given.
    pub(crate) fn servers(&self) -> Vec<String> {
        let mut targets = self.targets();
        if self.config.get_load_balance_hosts() == LoadBalanceHosts::Random {
            // Keep the order given when showing them.
            targets = Self {
                config: {
                    let mut config = self.config.clone();
                    config.load_balance_hosts(LoadBalanceHosts::Disable);
                    config
                },
                ..self.clone()
            }
            .targets();
        }
        targets
            .into_iter()
            .map(|target| format!("{}:{}", target.host, target.port))
            .collect()
    }

    /// Opens a connection: tries each host in turn, as libpq does, and
    /// returns the first that works.
    ///
    /// # Errors
    /// The last host's failure, classified (see [`super::classify`]).
    pub(crate) async fn connect(&self) -> Result<(Client, PgConnection), Error> {
        self.connect_hosts(false)
            .await
            .map_err(|failure| failure.into_error(self))
    }

    /// As [`Connector::connect`], unclassified. With `last_unbounded`, the
    /// last host's attempt is not cut at the connect timeout: the pool's own
    /// create timeout bounds it, since a pool's connector must fail with a
    /// driver error, and a timeout of ours is none.
    async fn connect_hosts(&self, last_unbounded: bool) -> Result<(Client, PgConnection), Failure> {
        let targets = self.targets();
        let count = targets.len();
        let mut last = None;
        for (index, target) in targets.into_iter().enumerate() {
            let bounded = !(last_unbounded && index + 1 == count);
            match self.connect_host(&target, bounded).await {
                Ok(connected) => return Ok(connected),
                Err(cause) => {
                    last = Some(Failure {
                        host: target.host,
                        port: target.port,
                        cause,
                    });
                }
            }
        }
        Err(last.unwrap_or(Failure {
            host: String::new(),
            port: 0,
            cause: Cause::NoHost,
        }))
    }

    /// One host, with libpq's fallbacks: `allow` tries plain and then TLS when
    /// `pg_hba.conf` refuses plain; `prefer` tries TLS (plain if the server
    /// offers none) and then plain when the handshake fails or `pg_hba.conf`
    /// refuses the encrypted connection.
    async fn connect_host(
        &self,
        target: &Target,
        bounded: bool,
    ) -> Result<(Client, PgConnection), Cause> {
        match self.tls.mode {
            SslMode::Disable => self.attempt(target, WireSslMode::Disable, bounded).await,
            SslMode::Allow => match self.attempt(target, WireSslMode::Disable, bounded).await {
                Err(Cause::Pg(error)) if hba_rejected(&error) => {
                    self.attempt(target, WireSslMode::Require, bounded).await
                }
                other => other,
            },
            SslMode::Prefer => match self.attempt(target, WireSslMode::Prefer, bounded).await {
                Err(Cause::Pg(error)) if tls_failed(&error) || hba_rejected(&error) => {
                    self.attempt(target, WireSslMode::Disable, bounded).await
                }
                other => other,
            },
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                self.attempt(target, WireSslMode::Require, bounded).await
            }
        }
    }

    async fn attempt(
        &self,
        target: &Target,
        mode: WireSslMode,
        bounded: bool,
    ) -> Result<(Client, PgConnection), Cause> {
        let mut config = target.config.clone();
        config.ssl_mode(mode);
        let connecting = config.connect(self.tls.connector.clone());
        if bounded {
            match tokio::time::timeout(self.connect_timeout, connecting).await {
                Ok(connected) => connected.map_err(Cause::Pg),
                Err(_) => Err(Cause::TimedOut(self.connect_timeout)),
            }
        } else {
            connecting.await.map_err(Cause::Pg)
        }
    }

    /// How long one pooled connection may take to open: every host, each
    /// tried twice under `allow` and `prefer`, plus a second of slack.
    fn create_bound(&self) -> Duration {
        let hosts = u32::try_from(self.targets().len().max(1)).unwrap_or(u32::MAX);
        let tries = if matches!(self.tls.mode, SslMode::Allow | SslMode::Prefer) {
            2
        } else {
            1
        };
        self.connect_timeout
            .saturating_mul(hosts.saturating_mul(tries))
            .saturating_add(Duration::from_secs(1))
    }

    /// The TLS connector a cancel request for one of these connections goes
    /// out with.
    pub(crate) fn cancel_tls(&self) -> &MakeRustlsConnect {
        &self.tls.connector
    }

    /// A pool of `size` connections opened by this connector.
    ///
    /// `Fast` recycling drops a pooled connection whose client saw its socket
    /// close. The hook adds what that misses: a connection unused for over
    /// `CHECK_IDLE_AFTER` may have died since (a restart or a terminated
    /// backend whose goodbye is still unread, a half-open socket), so it must
    /// answer an empty query within `CHECK_TIMEOUT` or be replaced. A
    /// connection in steady use proves itself, so the hot path pays no extra
    /// round trip: `Verified` recycling, which checks every checkout, cost a
    /// claim-bound worker of the chaos test about 13% of its steps per second.
    /// `Clean` would also reset session state, but pgbus keeps none.
    ///
    /// # Errors
    /// [`Error::BuildPool`] when deadpool refuses the settings.
    pub(crate) fn pool(self: &Arc<Self>, size: usize) -> Result<Pool, Error> {
        let manager = Manager::from_connect(
            self.config.clone(),
            PoolConnect(Arc::clone(self)),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Ok(Pool::builder(manager)
            .max_size(size)
            .runtime(Runtime::Tokio1)
            .create_timeout(Some(self.create_bound()))
            .wait_timeout(Some(self.pool_wait))
            .pre_recycle(Hook::async_fn(|client, metrics| {
                Box::pin(async move {
                    if metrics.last_used() < CHECK_IDLE_AFTER || client.is_closed() {
                        // A closed one is dropped by `Fast` recycling right after.
                        return Ok(());
                    }
                    match tokio::time::timeout(CHECK_TIMEOUT, client.simple_query("")).await {
                        Ok(Ok(_)) => Ok(()),
                        Ok(Err(error)) => Err(HookError::Backend(error)),
                        Err(_) => Err(HookError::message("the connection did not answer")),
                    }
                })
            }))
            .build()?)
    }
}

/// deadpool's way in: opens a pooled connection with the connector.
struct PoolConnect(Arc<Connector>);

impl deadpool_postgres::Connect for PoolConnect {
    fn connect(
        &self,
        _config: &Config,
    ) -> BoxFuture<'_, Result<(Client, tokio::task::JoinHandle<()>), tokio_postgres::Error>> {
        Box::pin(async move {
            let (client, connection) = match self.0.connect_hosts(true).await {
                Ok(connected) => connected,
                Err(Failure {
                    cause: Cause::Pg(error),
                    ..
                }) => return Err(error),
                // The last host is tried unbounded, so its failure is always a
                // driver error; should that change, waiting leaves the bound
                // to the pool's create timeout rather than to a panic.
                Err(_) => std::future::pending().await,
            };
            let driver = tokio::spawn(async move {
                if let Err(error) = connection.await {
                    tracing::warn!(target: "deadpool.postgres", "Connection error: {}", error);
                }
            });
            Ok((client, driver))
        })
    }
}

/// `config` with only one host: every other setting copied over.
pub(crate) fn one_host(
    config: &Config,
    host: Option<&Host>,
    addr: Option<std::net::IpAddr>,
    port: u16,
) -> Config {
    let mut one = Config::new();
    if let Some(user) = config.get_user() {
        one.user(user);
    }
    if let Some(password) = config.get_password() {
        one.password(password);
    }
    if let Some(dbname) = config.get_dbname() {
        one.dbname(dbname);
    }
    if let Some(options) = config.get_options() {
        one.options(options);
    }
    if let Some(name) = config.get_application_name() {
        one.application_name(name);
    }
    one.ssl_mode(config.get_ssl_mode())
        .ssl_negotiation(config.get_ssl_negotiation());
    match host {
        Some(Host::Tcp(name)) => {
            one.host(name);
        }
        Some(Host::Unix(path)) => {
            one.host_path(path);
        }
        None => {}
    }
    if let Some(addr) = addr {
        one.hostaddr(addr);
    }
    one.port(port);
    if let Some(timeout) = config.get_connect_timeout() {
        one.connect_timeout(*timeout);
    }
    if let Some(timeout) = config.get_tcp_user_timeout() {
        one.tcp_user_timeout(*timeout);
    }
    one.keepalives(config.get_keepalives())
        .keepalives_idle(config.get_keepalives_idle());
    if let Some(interval) = config.get_keepalives_interval() {
        one.keepalives_interval(interval);
    }
    if let Some(retries) = config.get_keepalives_retries() {
        one.keepalives_retries(retries);
    }
    one.target_session_attrs(config.get_target_session_attrs())
        .channel_binding(config.get_channel_binding())
        .load_balance_hosts(config.get_load_balance_hosts());
    one
}
