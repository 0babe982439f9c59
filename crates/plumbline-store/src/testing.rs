//! Stores for tests, on either backend (feature `testing`): a SQLite file
//! in a temporary directory, or a PostgreSQL database of its own, created
//! with a unique name and dropped afterwards, so tests run in parallel
//! and leave nothing behind.
//!
//! PostgreSQL is the server at `$PLUMBLINE_TEST_POSTGRES` (a URL of a
//! database the tests may connect to as a user that may create
//! databases), else `postgres://postgres@127.0.0.1:5432/postgres`. When it
//! cannot be reached the test fails with a message that says how to start
//! it: PostgreSQL tests are never skipped.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::{AnyStore, Location, PostgresLocation, StoreError};

/// The server tests create their databases on, unless
/// `PLUMBLINE_TEST_POSTGRES` names another.
pub const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Which backend a test runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A database of its own on the test server, dropped when this is.
pub struct TestDatabase {
    admin: String,
    name: String,
    url: String,
}

impl TestDatabase {
    /// Creates an empty database with a name no other test uses.
    pub fn create() -> TestDatabase {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let admin = std::env::var("PLUMBLINE_TEST_POSTGRES")
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| DEFAULT_SERVER.to_owned());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "plumbline_test_{}_{}_{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut client = admin_client(&admin);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap_or_else(|e| panic!("creating the test database {name}: {e}"));
        let url = match admin.rsplit_once('/') {
            Some((server, rest)) => match rest.split_once('?') {
                Some((_, query)) => format!("{server}/{name}?{query}"),
                None => format!("{server}/{name}"),
            },
            None => panic!("PLUMBLINE_TEST_POSTGRES={admin:?} is not a postgres:// URL"),
        };
        TestDatabase { admin, name, url }
    }

    /// The database's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database as a store location.
    pub fn location(&self) -> Location {
        Location::Postgres(PostgresLocation::new(&self.url))
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A connection to the server as its administrator (to refuse or end
    /// the database's connections, say).
    pub fn admin(&self) -> postgres::Client {
        admin_client(&self.admin)
    }

    /// A plain connection to the database, to look at it as another
    /// process would (not through the store).
    pub fn client(&self) -> postgres::Client {
        admin_client(&self.url)
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        let mut client = admin_client(&self.admin);
        // FORCE ends the connections a test left open (a store it leaked,
        // a watcher it killed).
        if let Err(e) = client.batch_execute(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )) {
            eprintln!("dropping the test database {}: {e}", self.name);
        }
    }
}

/// A connection to the test server, or a panic saying how to start it.
fn admin_client(url: &str) -> postgres::Client {
    let shown = crate::location::redacted(url);
    postgres::Client::connect(url, postgres::NoTls).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {shown} ({e}). The PostgreSQL tests need it: start \
             it (`pg_ctlcluster 15 main start`, or `.ci/run`, which installs and starts it), \
             or set PLUMBLINE_TEST_POSTGRES to the URL of a server where the tests may create \
             databases"
        )
    })
}

/// A store of a test: a SQLite file in a directory of its own, or a
/// database of its own.
pub struct TestStore {
    backend: Backend,
    location: Location,
    _dir: Option<tempfile::TempDir>,
    database: Option<TestDatabase>,
}

impl TestStore {
    /// A new, empty store on `backend` (nothing created until opened).
    pub fn new(backend: Backend) -> TestStore {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temporary directory");
                TestStore {
                    backend,
                    location: Location::Sqlite(dir.path().join("plumbline.db")),
                    _dir: Some(dir),
                    database: None,
                }
            }
            Backend::Postgres => {
                let database = TestDatabase::create();
                TestStore {
                    backend,
                    location: database.location(),
                    _dir: None,
                    database: Some(database),
                }
            }
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    pub fn location(&self) -> &Location {
        &self.location
    }

    /// The database, for a PostgreSQL store.
    pub fn database(&self) -> Option<&TestDatabase> {
        self.database.as_ref()
    }

    /// A new handle on the store, as another process would open it.
    pub fn open(&self) -> AnyStore {
        self.try_open().expect("the test store opens")
    }

    pub fn try_open(&self) -> Result<AnyStore, StoreError> {
        crate::open(&self.location)
    }

    /// Runs `sql` on a connection of its own (SQL both backends read).
    pub fn execute(&self, sql: &str) {
        match (&self.location, &self.database) {
            (Location::Sqlite(path), _) => rusqlite::Connection::open(path)
                .and_then(|conn| conn.execute_batch(sql))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            (_, Some(database)) => database
                .client()
                .batch_execute(sql)
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            _ => unreachable!("a PostgreSQL store has its database"),
        }
    }

    /// The rows of `table`, counted on a connection of its own.
    pub fn count(&self, table: &str) -> i64 {
        let sql = format!("SELECT count(*) FROM {table}");
        match (&self.location, &self.database) {
            (Location::Sqlite(path), _) => rusqlite::Connection::open(path)
                .and_then(|conn| conn.query_row(&sql, [], |row| row.get(0)))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            (_, Some(database)) => database
                .client()
                .query_one(&sql, &[])
                .and_then(|row| row.try_get(0))
                .unwrap_or_else(|e| panic!("{sql}: {e}")),
            _ => unreachable!("a PostgreSQL store has its database"),
        }
    }
}
