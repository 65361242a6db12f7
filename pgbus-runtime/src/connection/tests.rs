//! Parsing, environment and settings: pure, no server.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use tokio_postgres::config::{Host, TargetSessionAttrs};

use super::connect::one_host;
use super::env::resolve;
use super::params::split;
use super::tls::{RootCert, SslMode, TlsSettings, Verification};
use super::*;

/// A lookup over `vars` only.
fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

fn no_os_user() -> Option<String> {
    None
}

#[allow(clippy::unnecessary_wraps)] // The shape of an OS-user lookup.
fn os_user_alice() -> Option<String> {
    Some("alice".to_owned())
}

fn setting_of(error: &Error) -> &str {
    match error {
        Error::InvalidSetting { setting, .. } => setting,
        other => panic!("expected InvalidSetting, got {other:?}"),
    }
}

fn hosts(config: &tokio_postgres::Config) -> Vec<String> {
    config
        .get_hosts()
        .iter()
        .map(|host| match host {
            Host::Tcp(name) => name.clone(),
            Host::Unix(path) => path.display().to_string(),
        })
        .collect()
}

#[test]
fn a_url_loses_the_tls_settings_and_keeps_its_hosts() {
    let split = split(
        "postgres://u:p@h1:5433,h2:5434/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca%20x.pem&application_name=billing&sslsni=0",
    )
    .unwrap();
    assert_eq!(
        split.rest,
        "postgres://u:p@h1:5433,h2:5434/db?application_name=billing"
    );
    assert_eq!(split.own("sslmode"), Some("verify-full"));
    assert_eq!(split.own("sslrootcert"), Some("/tmp/ca x.pem"));
    assert_eq!(split.own("sslsni"), Some("0"));
    assert!(split.keys.contains("application_name"));

    let resolved = resolve(
        "postgres://u:p@h1:5433,h2:5434/db?sslmode=verify-ca&sslrootcert=/tmp/ca.pem",
        &env_of(&[]),
        &no_os_user,
    )
    .unwrap();
    assert_eq!(hosts(&resolved.config), ["h1", "h2"]);
    assert_eq!(resolved.config.get_ports(), [5433, 5434]);
    assert_eq!(resolved.config.get_user(), Some("u"));
    assert_eq!(resolved.config.get_dbname(), Some("db"));
    assert_eq!(resolved.tls.mode, Some(SslMode::VerifyCa));
    assert_eq!(
        resolved.tls.root_cert,
        Some(RootCert::File(PathBuf::from("/tmp/ca.pem")))
    );
}

#[test]
fn a_url_with_only_tls_settings_keeps_no_question_mark() {
    let split = split("postgresql://h/db?sslmode=require").unwrap();
    assert_eq!(split.rest, "postgresql://h/db");
    let split = super::params::split("postgres://h/db").unwrap();
    assert_eq!(split.rest, "postgres://h/db");
    assert!(split.own.is_empty());
}

#[test]
fn a_key_value_string_loses_the_tls_settings_and_keeps_quoting() {
    let text = r"host=localhost  port = 5433 sslmode='verify-full' sslrootcert='/a b/ca.pem' password='it\'s \\ here' dbname=d\ b";
    let split = split(text).unwrap();
    assert_eq!(split.own("sslmode"), Some("verify-full"));
    assert_eq!(split.own("sslrootcert"), Some("/a b/ca.pem"));
    let resolved = resolve(text, &env_of(&[]), &os_user_alice).unwrap();
    assert_eq!(hosts(&resolved.config), ["localhost"]);
    assert_eq!(resolved.config.get_ports(), [5433]);
    assert_eq!(resolved.config.get_password(), Some(&br"it's \ here"[..]));
    assert_eq!(resolved.config.get_dbname(), Some("d b"));
    assert_eq!(resolved.config.get_user(), Some("alice"));
    assert_eq!(
        resolved.tls.root_cert,
        Some(RootCert::File(PathBuf::from("/a b/ca.pem")))
    );
}

#[test]
fn a_key_value_string_that_does_not_parse_names_the_setting() {
    let error = split("host=localhost port").unwrap_err();
    assert_eq!(setting_of(&error), "port");
    let error = split("host='localhost").unwrap_err();
    assert_eq!(setting_of(&error), "host");
}

#[test]
fn the_environment_fills_what_the_string_leaves_out() {
    let env = env_of(&[
        ("PGHOST", "a.internal,b.internal"),
        ("PGPORT", "6001,6002"),
        ("PGUSER", "app"),
        ("PGPASSWORD", "secret"),
        ("PGDATABASE", "orders"),
        ("PGAPPNAME", "billing"),
        ("PGSSLMODE", "require"),
        ("PGSSLROOTCERT", "/etc/ca.pem"),
        ("PGCONNECT_TIMEOUT", "1"),
        ("PGOPTIONS", "-c work_mem=64MB"),
        ("PGTARGETSESSIONATTRS", "read-write"),
        ("HOME", "/home/app"),
    ]);
    let resolved = resolve("", &env, &os_user_alice).unwrap();
    let config = &resolved.config;
    assert_eq!(hosts(config), ["a.internal", "b.internal"]);
    assert_eq!(config.get_ports(), [6001, 6002]);
    assert_eq!(config.get_user(), Some("app"));
    assert_eq!(config.get_password(), Some(&b"secret"[..]));
    assert_eq!(config.get_dbname(), Some("orders"));
    assert_eq!(config.get_application_name(), Some("billing"));
    assert_eq!(config.get_options(), Some("-c work_mem=64MB"));
    // libpq takes a one-second timeout as two.
    assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(2)));
    assert_eq!(
        config.get_target_session_attrs(),
        TargetSessionAttrs::ReadWrite
    );
    assert_eq!(resolved.tls.mode, Some(SslMode::Require));
    assert_eq!(
        resolved.tls.root_cert,
        Some(RootCert::File(PathBuf::from("/etc/ca.pem")))
    );
    assert_eq!(resolved.home, Some(PathBuf::from("/home/app")));
}

#[test]
fn the_string_wins_over_the_environment() {
    let env = env_of(&[
        ("PGHOST", "elsewhere"),
        ("PGPORT", "1"),
        ("PGUSER", "other"),
        ("PGPASSWORD", "other"),
        ("PGDATABASE", "other"),
        ("PGAPPNAME", "other"),
        ("PGSSLMODE", "disable"),
    ]);
    let resolved = resolve(
        "postgres://me:pw@db:5432/mine?application_name=mine&sslmode=verify-full&sslrootcert=system",
        &env,
        &no_os_user,
    )
    .unwrap();
    let config = &resolved.config;
    assert_eq!(hosts(config), ["db"]);
    assert_eq!(config.get_ports(), [5432]);
    assert_eq!(config.get_user(), Some("me"));
    assert_eq!(config.get_password(), Some(&b"pw"[..]));
    assert_eq!(config.get_dbname(), Some("mine"));
    assert_eq!(config.get_application_name(), Some("mine"));
    assert_eq!(resolved.tls.mode, Some(SslMode::VerifyFull));
    assert_eq!(resolved.tls.root_cert, Some(RootCert::System));
}

#[test]
fn the_user_falls_back_to_the_operating_system_user_never_to_postgres() {
    // Neither the string nor PGUSER names a user, and `USER` is unset (the
    // lookup has nothing): the OS user is taken.
    let resolved = resolve("postgres://db/app", &env_of(&[]), &os_user_alice).unwrap();
    assert_eq!(resolved.config.get_user(), Some("alice"));
    // With no OS user either, a typed error names the setting.
    let error = resolve("postgres://db/app", &env_of(&[]), &no_os_user).unwrap_err();
    assert_eq!(setting_of(&error), "user");
    // The real lookup gives the same name as the operating system.
    assert_eq!(super::env::os_user(), whoami::username().ok());
}

#[test]
fn with_no_host_anywhere_it_connects_to_localhost() {
    let resolved = resolve("dbname=app", &env_of(&[]), &os_user_alice).unwrap();
    assert_eq!(hosts(&resolved.config), ["localhost"]);
    let resolved = resolve("", &env_of(&[("PGHOSTADDR", "127.0.0.2")]), &os_user_alice).unwrap();
    assert!(resolved.config.get_hosts().is_empty());
    assert_eq!(
        resolved.config.get_hostaddrs(),
        ["127.0.0.2".parse::<std::net::IpAddr>().unwrap()]
    );
}

#[test]
fn bad_values_are_typed_errors_that_name_the_setting() {
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case<'_>; 8] = [
        ("postgres://db/app?sslmode=bogus", &[], "sslmode"),
        ("host=db sslmode=verify_full", &[], "sslmode"),
        ("postgres://db/app", &[("PGSSLMODE", "strict")], "PGSSLMODE"),
        ("postgres://db/app", &[("PGPORT", "fifty")], "PGPORT"),
        (
            "postgres://db/app",
            &[("PGCONNECT_TIMEOUT", "10s")],
            "PGCONNECT_TIMEOUT",
        ),
        ("postgres://db/app?sslcompression=1", &[], "sslcompression"),
        ("host=db keepalives=maybe", &[], "keepalives"),
        ("postgres://db/app?sslsni=yes", &[], "sslsni"),
    ];
    for (text, vars, setting) in cases {
        let Err(error) = resolve(text, &env_of(vars), &os_user_alice) else {
            panic!("{text} {vars:?} was accepted");
        };
        assert_eq!(setting_of(&error), setting, "{text} {vars:?}: {error}");
    }
    let error = "bogus".parse::<SslMode>().unwrap_err();
    assert_eq!(
        error.to_string(),
        "setting `sslmode` `bogus` is not one of disable, allow, prefer, require, verify-ca, verify-full"
    );
}

#[test]
fn sslmode_round_trips_in_libpq_spelling() {
    for mode in SslMode::ALL {
        assert_eq!(mode.as_str().parse::<SslMode>().unwrap(), mode);
        assert_eq!(mode.to_string(), mode.as_str());
    }
    assert_eq!(SslMode::default(), SslMode::Prefer);
}

#[test]
fn tls_settings_resolve_as_libpq_does() {
    let no_home = None;
    let settings = |mode, root| TlsSettings {
        mode,
        root_cert: root,
        ..TlsSettings::default()
    };
    // The default is prefer, unverified.
    let tls = settings(None, None).resolve(no_home).unwrap();
    assert_eq!(
        (tls.mode, tls.verification),
        (SslMode::Prefer, Verification::None)
    );
    let tls = settings(Some(SslMode::Require), None)
        .resolve(no_home)
        .unwrap();
    assert_eq!(tls.verification, Verification::None);
    // `system` makes verify-full the default, and refuses weaker modes.
    let tls = settings(None, Some(RootCert::System)).resolve(no_home);
    if let Ok(tls) = tls {
        assert_eq!(
            (tls.mode, tls.verification),
            (SslMode::VerifyFull, Verification::Full)
        );
    }
    let error = settings(Some(SslMode::Require), Some(RootCert::System))
        .resolve(no_home)
        .unwrap_err();
    assert_eq!(setting_of(&error), "sslmode");
    // verify-full without a root: libpq's default file, which is not there.
    let home = std::env::temp_dir().join(format!("pgbus-no-home-{}", std::process::id()));
    match settings(Some(SslMode::VerifyFull), None).resolve(Some(&home)) {
        Err(Error::UnreadableFile { setting, path, .. }) => {
            assert_eq!(setting, "sslrootcert");
            assert_eq!(path, home.join(".postgresql").join("root.crt"));
        }
        other => panic!("expected UnreadableFile, got {other:?}"),
    }
    // An unreadable root file is a typed error with its path.
    let missing = PathBuf::from("/nonexistent/pgbus/ca.pem");
    match settings(
        Some(SslMode::VerifyCa),
        Some(RootCert::File(missing.clone())),
    )
    .resolve(no_home)
    {
        Err(Error::UnreadableFile {
            setting,
            path,
            reason,
        }) => {
            assert_eq!(setting, "sslrootcert");
            assert_eq!(path, missing);
            assert!(reason.contains("No such file"), "{reason}");
        }
        other => panic!("expected UnreadableFile, got {other:?}"),
    }
    // A file that holds no certificate.
    let empty = std::env::temp_dir().join(format!("pgbus-empty-{}.pem", std::process::id()));
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let result = settings(
        Some(SslMode::VerifyFull),
        Some(RootCert::File(empty.clone())),
    )
    .resolve(no_home);
    std::fs::remove_file(&empty).unwrap();
    match result {
        Err(Error::UnreadableFile {
            setting, reason, ..
        }) => {
            assert_eq!(setting, "sslrootcert");
            assert!(reason.contains("no PEM certificate"), "{reason}");
        }
        other => panic!("expected UnreadableFile, got {other:?}"),
    }
    // A client certificate needs its key, and the other way round.
    let error = TlsSettings {
        cert: Some(PathBuf::from("/c.pem")),
        ..TlsSettings::default()
    }
    .resolve(no_home)
    .unwrap_err();
    assert_eq!(setting_of(&error), "sslkey");
    let error = TlsSettings {
        key: Some(PathBuf::from("/k.pem")),
        ..TlsSettings::default()
    }
    .resolve(no_home)
    .unwrap_err();
    assert_eq!(setting_of(&error), "sslcert");
}

#[test]
fn one_host_copies_every_other_setting() {
    let mut config: tokio_postgres::Config = "host=h1 port=6000 user=u password=p dbname=d options='-c a=b' application_name=n sslmode=require sslnegotiation=direct connect_timeout=7 tcp_user_timeout=9 keepalives=0 keepalives_idle=11 keepalives_interval=3 keepalives_retries=4 target_session_attrs=read-write channel_binding=require load_balance_hosts=random"
        .parse()
        .unwrap();
    let copy = one_host(
        &config,
        config.get_hosts().first(),
        None,
        config.get_ports()[0],
    );
    assert_eq!(copy, config, "a setting tokio-postgres added is not copied");
    config.hostaddr("127.0.0.1".parse().unwrap());
    let copy = one_host(
        &config,
        config.get_hosts().first(),
        config.get_hostaddrs().first().copied(),
        6000,
    );
    assert_eq!(copy, config);
}

#[test]
fn tcp_user_timeout_is_in_milliseconds_and_keepalives_off_turns_off_both_sides() {
    let env = env_of(&[]);
    // As libpq reads it; tokio-postgres alone would take seconds.
    let connector = super::connector(
        "postgres://u@h/d?tcp_user_timeout=2500&keepalives=0",
        &Settings::default(),
        &env,
        &no_os_user,
    )
    .unwrap();
    assert_eq!(
        connector.config.get_tcp_user_timeout(),
        Some(&Duration::from_millis(2500))
    );
    assert_eq!(connector.config.get_options(), Some("-c jit=off"));
    assert!(matches!(
        super::connector("host=h user=u tcp_user_timeout=2s", &Settings::default(), &env, &no_os_user),
        Err(Error::InvalidSetting { setting, .. }) if setting == "tcp_user_timeout"
    ));
}

#[test]
fn read_only_comes_after_the_string_s_options_which_cannot_undo_it() {
    let env = env_of(&[]);
    let read_only = Settings {
        read_only: true,
        ..Settings::default()
    };
    let connector = super::connector(
        "host=h user=u keepalives=0 options='-c default_transaction_read_only=off'",
        &read_only,
        &env,
        &no_os_user,
    )
    .unwrap();
    assert_eq!(
        connector.config.get_options(),
        Some("-c jit=off -c default_transaction_read_only=off -c default_transaction_read_only=on")
    );
}

#[test]
fn the_connector_applies_defaults_the_string_and_the_builder_in_that_order() {
    let env = env_of(&[]);
    let connector = super::connector(
        "postgres://u@h1,h2:6000/d",
        &Settings::default(),
        &env,
        &no_os_user,
    )
    .unwrap();
    let config = &connector.config;
    assert_eq!(connector.connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    assert_eq!(config.get_keepalives_idle(), DEFAULT_KEEPALIVES_IDLE);
    assert_eq!(
        config.get_keepalives_interval(),
        Some(DEFAULT_KEEPALIVES_INTERVAL)
    );
    assert_eq!(
        config.get_keepalives_retries(),
        Some(DEFAULT_KEEPALIVES_RETRIES)
    );
    assert_eq!(
        config.get_tcp_user_timeout(),
        Some(&DEFAULT_TCP_USER_TIMEOUT)
    );
    assert_eq!(
        config.get_application_name(),
        Some(DEFAULT_APPLICATION_NAME)
    );
    // The server's side of the keepalives gets the same values.
    assert_eq!(
        config.get_options(),
        Some(
            "-c jit=off -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 \
             -c tcp_keepalives_count=3 -c tcp_user_timeout=10000"
        )
    );
    assert_eq!(connector.servers(), ["h1:5432", "h2:6000"]);

    // The string's values win over the defaults.
    let connector = super::connector(
        "host=h user=u keepalives_idle=60 keepalives_interval=10 connect_timeout=3 application_name=s options='-c jit=on'",
        &Settings::default(),
        &env,
        &no_os_user,
    )
    .unwrap();
    assert_eq!(connector.connect_timeout, Duration::from_secs(3));
    assert_eq!(
        connector.config.get_keepalives_idle(),
        Duration::from_mins(1)
    );
    assert_eq!(
        connector.config.get_keepalives_interval(),
        Some(Duration::from_secs(10))
    );
    assert_eq!(connector.config.get_application_name(), Some("s"));
    // Ours first, the string's after, so the string's win in the server.
    assert_eq!(
        connector.config.get_options(),
        Some(
            "-c jit=off -c tcp_keepalives_idle=60 -c tcp_keepalives_interval=10 \
             -c tcp_keepalives_count=3 -c tcp_user_timeout=10000 -c jit=on"
        )
    );

    // The builder's win over the string's.
    let settings = Settings {
        connect_timeout: Some(Duration::from_secs(4)),
        keepalives_idle: Some(Duration::from_secs(8)),
        application_name: Some("b".to_owned()),
        statement_timeout: Some(Duration::from_millis(1500)),
        lock_timeout: Some(Duration::from_millis(700)),
        idle_in_transaction_session_timeout: Some(Duration::from_mins(1)),
        ..Settings::default()
    };
    let connector = super::connector(
        "host=h user=u keepalives_idle=60 connect_timeout=3 application_name=s",
        &settings,
        &env,
        &no_os_user,
    )
    .unwrap();
    assert_eq!(connector.connect_timeout, Duration::from_secs(4));
    assert_eq!(
        connector.config.get_keepalives_idle(),
        Duration::from_secs(8)
    );
    assert_eq!(connector.config.get_application_name(), Some("b"));
    assert_eq!(
        connector.config.get_options(),
        Some(
            "-c jit=off -c tcp_keepalives_idle=8 -c tcp_keepalives_interval=2 \
             -c tcp_keepalives_count=3 -c tcp_user_timeout=10000 -c statement_timeout=1500 \
             -c lock_timeout=700 -c idle_in_transaction_session_timeout=60000"
        )
    );

    // Behind a transaction pooler: no options of ours, the string's as given.
    let pooler = Settings {
        pooler: true,
        ..Settings::default()
    };
    let connector = super::connector("host=h user=u", &pooler, &env, &no_os_user).unwrap();
    assert_eq!(connector.config.get_options(), None);
    let connector =
        super::connector("host=h user=u options='-c a=b'", &pooler, &env, &no_os_user).unwrap();
    assert_eq!(connector.config.get_options(), Some("-c a=b"));
}

#[test]
fn pgport_fills_the_url_hosts_that_name_no_port() {
    let env = env_of(&[("PGPORT", "6432")]);
    let resolved = resolve("postgres://u@a,b:7000,[::1]/d", &env, &no_os_user).unwrap();
    assert_eq!(resolved.config.get_ports(), [6432, 7000, 6432]);
    let resolved = resolve("postgres://u:p%40@a/d?sslmode=require", &env, &no_os_user).unwrap();
    assert_eq!(resolved.config.get_ports(), [6432]);
    assert_eq!(resolved.config.get_password(), Some(&b"p@"[..]));
    let resolved = resolve("postgres://u@a/d", &env_of(&[]), &no_os_user).unwrap();
    assert_eq!(resolved.config.get_ports(), [5432]);
    let resolved = resolve("host=a,b", &env_of(&[("PGPORT", "1,2")]), &os_user_alice).unwrap();
    assert_eq!(resolved.config.get_ports(), [1, 2]);
}
