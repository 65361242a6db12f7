//! Migrations on a real server: applied once, idempotent, safe to run
//! concurrently, and refusing a database that drifted from this build.

use std::fmt::Write as _;

use pgbus_runtime::prelude::*;
use pgbus_runtime::{Error, MIGRATIONS, RunStatus, Schema};
use sha2::{Digest as _, Sha256};

use crate::pg::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_schema_gets_every_table_and_a_bookkeeping_row() {
    let t = TestDb::unmigrated().await;
    let exists = "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1";
    assert_eq!(t.count(exists, &[&t.schema()]).await, 0);

    t.db.migrate().await.expect("migrate");

    let tables: Vec<String> = t
        .query(
            "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1 ORDER BY 1",
            &[&t.schema()],
        )
        .await
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        tables,
        [
            "batches",
            "definition_starts",
            "definitions",
            "events",
            "flow_limits",
            "pgbus_migrations",
            "rate_limits",
            "rate_windows",
            "runs",
            "schedules",
            "signals",
            "steps",
            "worker_definitions",
            "workers"
        ]
    );

    let rows = t
        .query(
            "SELECT version, name, checksum FROM {schema}.pgbus_migrations ORDER BY version",
            &[],
        )
        .await;
    let applied: Vec<(i32, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let expected: Vec<(i32, String, String)> = MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_owned(), m.checksum()))
        .collect();
    assert_eq!(applied, expected);

    // The due queue is a partial index (scheduled rows, and parked rows whose
    // wait ends, neither held back by a concurrency limit), so history never
    // enters a claim, nor does a key at its limit.
    let due_index: String = t
        .query(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'steps_due_or_waiting'",
            &[&t.schema()],
        )
        .await[0]
        .get(0);
    assert!(
        due_index.contains(
            "WHERE ((status = ANY (ARRAY['scheduled'::text, 'waiting'::text])) AND (held_by IS NULL))"
        ),
        "{due_index}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrating_again_is_a_no_op() {
    let t = TestDb::new().await;
    let before = t
        .query(
            "SELECT version, checksum, applied_at FROM {schema}.pgbus_migrations ORDER BY version",
            &[],
        )
        .await;
    t.execute(
        "INSERT INTO {schema}.workers (id, host, pid, queues, started_at, heartbeat_at)
         VALUES ('w', 'h', 1, '{default}', now(), now())",
        &[],
    )
    .await;

    t.db.migrate().await.expect("second migrate");
    t.db.migrate().await.expect("third migrate");

    let after = t
        .query(
            "SELECT version, checksum, applied_at FROM {schema}.pgbus_migrations ORDER BY version",
            &[],
        )
        .await;
    assert_eq!(before.len(), MIGRATIONS.len());
    assert_eq!(after.len(), before.len());
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b.get::<_, i32>(0), a.get::<_, i32>(0));
        assert_eq!(b.get::<_, String>(1), a.get::<_, String>(1));
        assert_eq!(
            b.get::<_, chrono::DateTime<chrono::Utc>>(2),
            a.get::<_, chrono::DateTime<chrono::Utc>>(2),
            "not applied again"
        );
    }
    assert_eq!(
        t.count("SELECT count(*) FROM {schema}.workers", &[]).await,
        1,
        "data survives"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_of_one_new_schema_both_succeed() {
    let test = TestDb::unmigrated().await;
    let others = [
        test.second_connection().await,
        test.second_connection().await,
        test.second_connection().await,
    ];
    let results = tokio::join!(
        test.db.migrate(),
        others[0].migrate(),
        others[1].migrate(),
        others[2].migrate()
    );
    for result in <[_; 4]>::from(results) {
        result.expect("every concurrent migrate succeeds");
    }
    assert_eq!(
        test.count("SELECT count(*) FROM {schema}.pgbus_migrations", &[])
            .await,
        i64::try_from(MIGRATIONS.len()).expect("small")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_applied_migration_is_refused() {
    let t = TestDb::new().await;
    t.execute(
        "UPDATE {schema}.pgbus_migrations SET checksum = 'edited' WHERE version = 1",
        &[],
    )
    .await;

    let error = t.db.migrate().await.expect_err("a changed migration");
    match error {
        Error::MigrationChanged {
            version,
            name,
            applied,
            current,
        } => {
            assert_eq!(version, 1);
            assert_eq!(name, MIGRATIONS[0].name);
            assert_eq!(applied, "edited");
            assert_eq!(current, MIGRATIONS[0].checksum());
        }
        other => panic!("expected MigrationChanged, got {other:?}"),
    }
    // Refusing changed nothing.
    let recorded: String = t
        .query(
            "SELECT checksum FROM {schema}.pgbus_migrations WHERE version = 1",
            &[],
        )
        .await[0]
        .get(0);
    assert_eq!(recorded, "edited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_this_build_does_not_know_is_refused() {
    let t = TestDb::new().await;
    t.execute(
        "INSERT INTO {schema}.pgbus_migrations (version, name, checksum)
         VALUES (999, '0999_from_the_future.sql', 'abc')",
        &[],
    )
    .await;

    let error = t.db.migrate().await.expect_err("an unknown migration");
    assert!(
        matches!(error, Error::UnknownMigration { version: 999 }),
        "{error:?}"
    );
}

#[test]
fn migrations_are_numbered_contiguously_and_match_their_files() {
    assert!(!MIGRATIONS.is_empty());
    for (index, migration) in MIGRATIONS.iter().enumerate() {
        let expected = i32::try_from(index + 1).expect("small");
        assert_eq!(migration.version, expected, "{}", migration.name);
        assert!(
            migration
                .name
                .starts_with(&format!("{:04}_", migration.version)),
            "{} starts with its zero-padded number",
            migration.name
        );
        let digest = Sha256::digest(migration.sql.as_bytes());
        let hex = digest.iter().fold(String::new(), |mut hex, byte| {
            write!(hex, "{byte:02x}").expect("writing to a String");
            hex
        });
        assert_eq!(migration.checksum(), hex, "{}", migration.name);
    }

    // Every .sql file in the crate's migrations/ is listed, with the same text.
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("migrations/")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "sql"))
        .map(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .expect("a UTF-8 name")
                .to_owned();
            let text = std::fs::read_to_string(&path).expect("readable");
            (name, text)
        })
        .collect();
    files.sort();
    let listed: Vec<(String, String)> = MIGRATIONS
        .iter()
        .map(|m| (m.name.to_owned(), m.sql.to_owned()))
        .collect();
    assert_eq!(files, listed);
}

#[test]
fn schema_names_that_are_not_plain_identifiers_are_refused() {
    for bad in [
        "",
        "1st",
        "Upper",
        "with-dash",
        "with space",
        "quote\"d",
        "semi;colon",
        "pgbus.runs",
        "ünï",
        &"x".repeat(58),
        &"x".repeat(64),
    ] {
        assert!(
            matches!(Schema::new(bad), Err(Error::InvalidSchema(ref name)) if name == bad),
            "{bad:?} is refused"
        );
    }
    for good in ["pgbus", "_private", "t_0123abc", &"x".repeat(57)] {
        assert_eq!(Schema::new(good).expect("valid").as_str(), good);
    }
}

/// The longest schema name there is migrates, starts a run and wakes its
/// workers: every identifier derived from it (the `NOTIFY` channel,
/// `pgbus_<schema>`, is the longest) fits Postgres's 63 bytes. One byte more
/// is refused before anything is created.
#[tokio::test]
async fn the_longest_schema_name_migrates_and_starts_runs() {
    let t = TestDb::with_name_of_len(pgbus_runtime::MAX_SCHEMA_NAME_LEN).await;
    assert_eq!(t.schema().len(), 57);
    let run = t
        .client()
        .start::<Tiny>(&())
        .await
        .expect("a start on the longest schema name")
        .run_id;
    assert_eq!(t.run(run).await.run.status, RunStatus::Ready);
    let longer = format!("{}x", t.schema());
    assert!(matches!(Schema::new(&longer), Err(Error::InvalidSchema(_))));
}

struct Tiny;

#[workflow(name = "migrate.tiny")]
impl Tiny {
    #[step]
    async fn only(&self, _cx: &mut StepCx<()>) {}
}
