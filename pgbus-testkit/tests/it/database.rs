//! `TestDatabase`: a copy of the template is the schema the migrations make,
//! it is dropped also when the test panics, and its connections of its own
//! log in as pgbus's do.

use chrono::{TimeZone as _, Utc};
use pgbus_runtime::{MAX_SCHEMA_NAME_LEN, MIGRATIONS};
use pgbus_testkit::TestDatabase;

/// What the catalog says `schema` holds, one line an item, the schema's
/// name written `{schema}`: columns with their types, defaults, nullability
/// and identity; indexes; constraints; comments; sequences.
async fn shape(t: &TestDatabase) -> Vec<String> {
    let sql = "
        SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
               || ' not null ' || a.attnotnull || ' identity ' || a.attidentity::text
               || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-')
               || ' comment ' || coalesce(col_description(c.oid, a.attnum), '-')
        FROM pg_attribute a
        JOIN pg_class c ON c.oid = a.attrelid
        LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
        WHERE c.relnamespace = $1::text::regnamespace AND c.relkind = 'r'
          AND a.attnum > 0 AND NOT a.attisdropped
        UNION ALL
        SELECT 'index ' || pg_get_indexdef(i.indexrelid)
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE c.relnamespace = $1::text::regnamespace
        UNION ALL
        SELECT 'constraint ' || conrelid::regclass || ' ' || conname || ' ' || pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = $1::text::regnamespace
        UNION ALL
        SELECT 'relation ' || relkind::text || ' ' || relname
        FROM pg_class WHERE relnamespace = $1::text::regnamespace
        ORDER BY 1";
    let client = t.raw_client().await.expect("a connection");
    let schema = t.schema().as_str();
    client
        .query(sql, &[&schema])
        .await
        .expect("the catalog")
        .iter()
        .map(|row| row.get::<_, String>(0).replace(schema, "{schema}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_copy_of_the_template_is_the_schema_the_migrations_make() {
    let fresh = TestDatabase::builder()
        .unmigrated()
        .build()
        .await
        .expect("a schema name");
    fresh.db().migrate().await.expect("migrate from scratch");
    let copy = TestDatabase::new().await.expect("a copy");

    let (fresh_shape, copy_shape) = (shape(&fresh).await, shape(&copy).await);
    assert!(fresh_shape.len() > 50, "{fresh_shape:#?}");
    assert_eq!(copy_shape, fresh_shape);

    // The bookkeeping rows are the migrations', so migrating is a no-op.
    let client = copy.raw_client().await.expect("a connection");
    let rows = client
        .query(
            &copy.sql("SELECT version, name, checksum FROM {schema}.pgbus_migrations ORDER BY 1"),
            &[],
        )
        .await
        .expect("the bookkeeping rows");
    let recorded: Vec<(i32, String, String)> = rows
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let expected: Vec<(i32, String, String)> = MIGRATIONS
        .iter()
        .map(|m| (m.version, m.name.to_owned(), m.checksum()))
        .collect();
    assert_eq!(recorded, expected);
    copy.db().migrate().await.expect("a no-op");
    assert_eq!(shape(&copy).await, fresh_shape);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_schema_is_dropped_also_when_the_test_panics() {
    let (send, receive) = tokio::sync::oneshot::channel();
    let panicked = tokio::spawn(async move {
        let t = TestDatabase::new().await.expect("a copy");
        send.send(t.schema().as_str().to_owned()).expect("sent");
        panic!("the test fails while its schema exists");
    })
    .await;
    assert!(panicked.is_err_and(|e| e.is_panic()));
    let name = receive.await.expect("the name");

    let witness = TestDatabase::new().await.expect("a copy");
    let client = witness.raw_client().await.expect("a connection");
    let left: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
            &[&name],
        )
        .await
        .expect("count")
        .get(0);
    assert_eq!(left, 0, "schema {name} is left behind");
}

#[tokio::test]
async fn a_pinned_clock_is_handed_back_and_names_take_a_prefix_and_length() {
    let start = Utc
        .with_ymd_and_hms(2030, 1, 2, 3, 4, 5)
        .single()
        .expect("a time");
    let pinned = TestDatabase::pinned(start).await.expect("a copy");
    let clock = pinned.manual_clock().expect("a pinned clock");
    assert_eq!(clock.now(), start);
    clock.advance(std::time::Duration::from_secs(1));
    assert_eq!(
        pinned.db().clock().now(),
        Some(start + chrono::Duration::seconds(1))
    );
    assert!(
        TestDatabase::new()
            .await
            .expect("a copy")
            .manual_clock()
            .is_none()
    );

    let long = TestDatabase::builder()
        .prefix("bench")
        .name_len(MAX_SCHEMA_NAME_LEN)
        .build()
        .await
        .expect("a copy with the longest name");
    let name = long.schema().as_str();
    assert!(name.starts_with("bench_"), "{name}");
    assert_eq!(name.len(), MAX_SCHEMA_NAME_LEN);
    long.db()
        .client()
        .list_runs(&pgbus_runtime::RunFilter::default())
        .await
        .expect("a query");
}

#[tokio::test]
async fn a_connection_of_its_own_logs_in_as_the_pool_does() {
    let t = TestDatabase::new().await.expect("a copy");
    let pooled = t.db().pool().get().await.expect("a pooled connection");
    let own = t.raw_client().await.expect("a connection");
    let user = |row: tokio_postgres::Row| row.get::<_, String>(0);
    let pooled_user = user(
        pooled
            .query_one("SELECT current_user::text", &[])
            .await
            .expect("who"),
    );
    let own_user = user(
        own.query_one("SELECT current_user::text", &[])
            .await
            .expect("who"),
    );
    assert_eq!(own_user, pooled_user);
}

/// `SHOW synchronous_commit` on one of the test database's pooled connections.
async fn synchronous_commit(t: &TestDatabase) -> String {
    let client = t.db().pool().get().await.expect("a pooled connection");
    client
        .query_one("SHOW synchronous_commit", &[])
        .await
        .expect("the setting")
        .get(0)
}

#[tokio::test]
async fn a_test_database_commits_without_waiting_for_the_flush_unless_asked_to() {
    if std::env::var("PGOPTIONS").is_ok_and(|options| !options.is_empty()) {
        // The caller's own session options win; nothing of ours to check.
        return;
    }
    let fast = TestDatabase::new().await.expect("a test schema");
    assert_eq!(synchronous_commit(&fast).await, "off");
    let raw = fast.raw_client().await.expect("a plain connection");
    let shown: String = raw
        .query_one("SHOW synchronous_commit", &[])
        .await
        .expect("the setting")
        .get(0);
    assert_eq!(shown, "off", "its plain connections commit the same way");

    let durable = TestDatabase::builder()
        .durable_commits()
        .build()
        .await
        .expect("a test schema");
    assert_eq!(synchronous_commit(&durable).await, "on");

    // A key=value string gets the option too; a URL's own options win.
    let pairs = TestDatabase::builder()
        .url("host=127.0.0.1 port=5432 dbname=test")
        .build()
        .await
        .expect("a test schema");
    assert_eq!(synchronous_commit(&pairs).await, "off");
    let own = TestDatabase::builder()
        .url("postgres://127.0.0.1:5432/test?options=-c%20synchronous_commit%3Dlocal")
        .build()
        .await
        .expect("a test schema");
    assert_eq!(synchronous_commit(&own).await, "local");
}
