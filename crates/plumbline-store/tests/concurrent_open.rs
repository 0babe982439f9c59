//! Processes that open one new store at the same moment (a watcher
//! starting while `plumbline log` polls it; several watchers of a team
//! starting together) all get a migrated store: each opener here has a
//! connection of its own, as a process would.

use std::sync::{Arc, Barrier};

use plumbline_store::testing::TestDatabase;
use plumbline_store::{AnyStore, Location, PostgresStore, SqliteStore, StoreError};

/// Opens `location` from `openers` threads released at the same moment;
/// every one must get the schema this build knows.
fn open_at_once(location: &Location, openers: usize, known: i64) {
    let start = Arc::new(Barrier::new(openers));
    let threads: Vec<_> = (0..openers)
        .map(|_| {
            let (location, start) = (location.clone(), Arc::clone(&start));
            std::thread::spawn(move || -> Result<i64, StoreError> {
                start.wait();
                let store: AnyStore = plumbline_store::open(&location)?;
                store.schema_version()
            })
        })
        .collect();
    for opener in threads {
        let version = opener.join().expect("no panic").expect("the store opens");
        assert_eq!(version, known);
    }
}

#[test]
fn a_new_sqlite_store_opened_from_many_connections_at_once_opens_for_all() {
    let dir = tempfile::tempdir().expect("temp dir");
    for round in 0..20 {
        let path = dir.path().join(format!("s{round}.db"));
        open_at_once(&Location::Sqlite(path), 8, SqliteStore::SCHEMA_VERSION);
    }
}

#[test]
fn a_new_postgresql_database_migrated_from_many_connections_at_once_opens_for_all() {
    for _ in 0..5 {
        let database = TestDatabase::create();
        open_at_once(&database.location(), 8, PostgresStore::SCHEMA_VERSION);
        let applied: i64 = database
            .client()
            .query_one("SELECT count(*) FROM plumbline_schema", &[])
            .and_then(|row| row.try_get(0))
            .expect("versions");
        assert_eq!(
            applied,
            PostgresStore::SCHEMA_VERSION,
            "each migration once"
        );
    }
}
