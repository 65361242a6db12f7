//! Migrations: the numbered `.sql` files of `migrations/`, applied in order, once,
//! in one transaction under an advisory lock, with a bookkeeping table of
//! checksums so an edited migration is caught instead of silently skipped.

use deadpool_postgres::Pool;
use tracing::{info, instrument};

use super::Schema;
use super::statement::{Preparer, StatementMode};
use crate::error::Error;

/// One migration file.
#[derive(Debug, Clone, Copy)]
pub struct Migration {
    /// Its number, from the file name.
    pub version: i32,
    /// The file name, e.g. `0001_init.sql`.
    pub name: &'static str,
    /// The SQL, with `{schema}` where the schema name goes.
    pub sql: &'static str,
}

impl Migration {
    /// SHA-256 hex of the file's text: what the bookkeeping table records.
    #[must_use]
    pub fn checksum(&self) -> String {
        pgbus_core::sha256_hex(self.sql.as_bytes())
    }
}

/// Every migration, in order. Append only: an applied migration is never edited.
pub const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_init.sql",
        sql: include_str!("../../migrations/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "0002_run_step_names.sql",
        sql: include_str!("../../migrations/0002_run_step_names.sql"),
    },
    Migration {
        version: 3,
        name: "0003_run_step_plan.sql",
        sql: include_str!("../../migrations/0003_run_step_plan.sql"),
    },
    Migration {
        version: 4,
        name: "0004_signal_waits.sql",
        sql: include_str!("../../migrations/0004_signal_waits.sql"),
    },
    Migration {
        version: 5,
        name: "0005_fan_out.sql",
        sql: include_str!("../../migrations/0005_fan_out.sql"),
    },
    Migration {
        version: 6,
        name: "0006_signal_pages.sql",
        sql: include_str!("../../migrations/0006_signal_pages.sql"),
    },
    Migration {
        version: 7,
        name: "0007_claim_plans.sql",
        sql: include_str!("../../migrations/0007_claim_plans.sql"),
    },
    Migration {
        version: 8,
        name: "0008_pause_events.sql",
        sql: include_str!("../../migrations/0008_pause_events.sql"),
    },
    Migration {
        version: 9,
        name: "0009_paused_runs.sql",
        sql: include_str!("../../migrations/0009_paused_runs.sql"),
    },
    Migration {
        version: 10,
        name: "0010_signals_by_run.sql",
        sql: include_str!("../../migrations/0010_signals_by_run.sql"),
    },
    Migration {
        version: 11,
        name: "0011_definition_registry.sql",
        sql: include_str!("../../migrations/0011_definition_registry.sql"),
    },
    Migration {
        version: 12,
        name: "0012_sql_start.sql",
        sql: include_str!("../../migrations/0012_sql_start.sql"),
    },
    Migration {
        version: 13,
        name: "0013_start_options.sql",
        sql: include_str!("../../migrations/0013_start_options.sql"),
    },
    Migration {
        version: 14,
        name: "0014_run_results.sql",
        sql: include_str!("../../migrations/0014_run_results.sql"),
    },
    Migration {
        version: 15,
        name: "0015_schedules.sql",
        sql: include_str!("../../migrations/0015_schedules.sql"),
    },
    Migration {
        version: 16,
        name: "0016_flow_control.sql",
        sql: include_str!("../../migrations/0016_flow_control.sql"),
    },
    Migration {
        version: 17,
        name: "0017_deadlines.sql",
        sql: include_str!("../../migrations/0017_deadlines.sql"),
    },
    Migration {
        version: 18,
        name: "0018_run_updates_in_place.sql",
        sql: include_str!("../../migrations/0018_run_updates_in_place.sql"),
    },
    Migration {
        version: 19,
        name: "0019_group_row_counts.sql",
        sql: include_str!("../../migrations/0019_group_row_counts.sql"),
    },
    Migration {
        version: 20,
        name: "0020_operator_reads.sql",
        sql: include_str!("../../migrations/0020_operator_reads.sql"),
    },
    Migration {
        version: 21,
        name: "0021_deployment_overrides.sql",
        sql: include_str!("../../migrations/0021_deployment_overrides.sql"),
    },
];

/// Applies the pending migrations to the default schema, `pgbus`.
///
/// # Errors
/// See [`migrate_schema`].
pub async fn migrate(pool: &Pool) -> Result<(), Error> {
    migrate_schema(pool, &Schema::default()).await
}

/// Applies the pending migrations to `schema`, creating it if needed. Safe to call
/// from many processes at once: they take turns on a transaction-scoped advisory
/// lock (no session state, so it also works behind a transaction-mode pooler), and
/// each applies only what the others have not.
///
/// # Errors
/// [`Error::MigrationChanged`] when an applied migration's file has changed,
/// [`Error::UnknownMigration`] when the database is ahead of this build, and
/// database errors.
#[instrument(skip_all, fields(pgbus.schema = %schema), err)]
pub async fn migrate_schema(pool: &Pool, schema: &Schema) -> Result<(), Error> {
    // Unnamed statements whatever the store's mode: a migration runs once,
    // so a cache would gain nothing, and nothing of it outlives the
    // transaction (safe behind a transaction-mode pooler).
    let prep = Preparer::new(StatementMode::Unnamed);
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    prep.in_driver_tx(&tx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
        .await?
        .execute(&tx, &[&format!("pgbus.migrate.{schema}")])
        .await?;
    // `IF NOT EXISTS` on a migrated schema makes the server send a NOTICE,
    // which the driver logs at `info` on every start: not news.
    tx.batch_execute(&schema.render(
        "SET LOCAL client_min_messages = warning;
         CREATE SCHEMA IF NOT EXISTS {schema};
         CREATE TABLE IF NOT EXISTS {schema}.pgbus_migrations (
             version    integer PRIMARY KEY,
             name       text        NOT NULL,
             checksum   text        NOT NULL,
             applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
         );",
    ))
    .await?;

    let applied_sql = schema
        .render("SELECT version, name, checksum FROM {schema}.pgbus_migrations ORDER BY version");
    let applied = prep
        .in_driver_tx(&tx, &applied_sql)
        .await?
        .query(&tx, &[])
        .await?;
    for row in &applied {
        let version: i32 = row.get(0);
        let Some(known) = MIGRATIONS.iter().find(|m| m.version == version) else {
            return Err(Error::UnknownMigration { version });
        };
        let recorded: String = row.get(2);
        let current = known.checksum();
        if recorded != current {
            return Err(Error::MigrationChanged {
                version,
                name: known.name.to_owned(),
                applied: recorded,
                current,
            });
        }
    }

    let record_sql = schema.render(
        "INSERT INTO {schema}.pgbus_migrations (version, name, checksum) VALUES ($1, $2, $3)",
    );
    for migration in MIGRATIONS {
        let done = applied
            .iter()
            .any(|row| row.get::<_, i32>(0) == migration.version);
        if done {
            continue;
        }
        tx.batch_execute(&schema.render(migration.sql)).await?;
        prep.in_driver_tx(&tx, &record_sql)
            .await?
            .execute(
                &tx,
                &[&migration.version, &migration.name, &migration.checksum()],
            )
            .await?;
        info!(pgbus.migration = migration.name, "applied migration");
    }
    tx.commit().await?;
    Ok(())
}
