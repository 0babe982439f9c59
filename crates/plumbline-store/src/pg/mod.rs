//! The PostgreSQL backend: one history shared by a team's watchers,
//! dashboards and CI jobs.
//!
//! # Why a thread of its own
//!
//! The [`Store`](crate::Store) port is synchronous, and its callers run
//! both on plain threads (the CLI) and inside Tokio (the watcher, the
//! dashboard). The synchronous `postgres` driver drives its connection
//! with a runtime of its own and panics when it is called from inside
//! another runtime; an async driver would make every caller async. So a
//! [`PostgresStore`] owns one connection on a thread of its own and each
//! store call is a job sent to that thread: the caller blocks on a plain
//! channel (as it blocks on SQLite's file lock today), never on a runtime,
//! so the store is sound whichever thread calls it. One connection per
//! store handle, as SQLite has one per handle; a process that wants more
//! opens more handles.
//!
//! # What it keeps
//!
//! The same content addressing as SQLite ([`crate::listing`] computes the
//! digests for both): raw bytes once per SHA-256, canonical forms once per
//! digest, a listing once per tool set, one small row per unchanged
//! observation. Content rows are written with `ON CONFLICT DO NOTHING`, so
//! two writers storing the same tool at once both succeed; an observation
//! locks its server's row first, so a server's observations are ordered
//! and its tool set changes are computed against the right predecessor.
//!
//! # Where
//!
//! A `postgres://` or `postgresql://` URL ([`PostgresLocation`]). Its
//! password may be `${VAR}`, read from the environment when connecting;
//! the URL is shown (in errors, logs) only with its user information and
//! query left out. `sslmode=require` connects over TLS (rustls), checking
//! the server's certificate against the system's roots, or against the
//! PEM file `sslrootcert=` names.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Duration;

use postgres::types::ToSql;
use postgres::{Client, GenericClient, Row, Statement};

use crate::StoreError;

mod leases;
mod location;
mod read;
mod record;
mod reviews;
mod rows;
mod store;

pub use location::PostgresLocation;

/// The schema migrations, in order: entry `i` takes the schema from
/// version `i` to version `i + 1`. Append only; never edit a released one.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_initial.sql"),
    include_str!("migrations/0002_leases.sql"),
    include_str!("migrations/0003_watcher_expiry.sql"),
    include_str!("migrations/0004_authorization.sql"),
    include_str!("migrations/0005_guard_events.sql"),
    include_str!("migrations/0006_history_and_server_names.sql"),
    include_str!("migrations/0007_observation_checks.sql"),
];

/// The advisory lock that makes migrating a singleton across every
/// process that opens the database ("plumblin" in ASCII).
const MIGRATION_LOCK: i64 = 0x706c_756d_626c_696e;

/// How long connecting may take when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A store in a PostgreSQL database.
pub struct PostgresStore {
    jobs: Option<mpsc::Sender<Job>>,
    worker: Option<std::thread::JoinHandle<()>>,
    /// The URL without its user information or query, for messages.
    label: PathBuf,
}

type Job = Box<dyn FnOnce(&mut Session) + Send>;

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.label)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// The schema version this build writes and reads.
    pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

    /// Connects to the database at `location` and brings its schema up
    /// to date; several processes may do so at the same moment.
    ///
    /// Fails with [`StoreError::NewerSchema`] when a newer plumbline
    /// migrated the database, rather than guess at a schema it does not
    /// know.
    pub fn open(location: &PostgresLocation) -> Result<PostgresStore, StoreError> {
        let label = PathBuf::from(location.redacted());
        let connector = location.connector()?;
        let (jobs, queue) = mpsc::channel::<Job>();
        let mut session = Session {
            connector,
            client: None,
            suspect: false,
            statements: HashMap::new(),
            label: label.clone(),
        };
        let worker = std::thread::Builder::new()
            .name("plumbline-postgres".to_owned())
            .spawn(move || {
                for job in queue {
                    job(&mut session);
                }
            })
            .map_err(|source| StoreError::Open {
                path: label.clone(),
                source: Box::new(source),
            })?;
        let store = PostgresStore {
            jobs: Some(jobs),
            worker: Some(worker),
            label,
        };
        store.run(|s| s.migrate())?;
        Ok(store)
    }

    /// The URL of the database, without user information or query.
    pub fn location(&self) -> &std::path::Path {
        &self.label
    }

    /// The schema version recorded in the database.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.run(|s| {
            let label = s.label.clone();
            s.db()
                .and_then(|mut db| {
                    db.query_one(
                        "SELECT COALESCE(max(version), 0) FROM plumbline_schema",
                        &[],
                    )
                })
                .and_then(|row| row.try_get(0))
                .map_err(|source| read_err(&label, "the schema version", source))
        })
    }

    /// Runs `job` on the connection's thread and waits for its answer.
    fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce(&mut Session) -> Result<R, StoreError> + Send + 'static,
    ) -> Result<R, StoreError> {
        let (reply, answer) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |session| {
            let answer = job(session);
            // A failed call may have lost the connection; the next one
            // checks it first.
            session.suspect |= answer.is_err();
            let _ = reply.send(answer);
        });
        let sent = self
            .jobs
            .as_ref()
            .is_some_and(|jobs| jobs.send(job).is_ok());
        if !sent {
            return Err(self.gone());
        }
        answer.recv().unwrap_or_else(|_| Err(self.gone()))
    }

    /// The error of a call made after the connection's thread stopped
    /// (a bug in the backend, never a database error).
    fn gone(&self) -> StoreError {
        StoreError::Open {
            path: self.label.clone(),
            source: "the thread that holds the PostgreSQL connection has stopped".into(),
        }
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        // Closing the queue ends the thread, which closes the connection.
        self.jobs = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}

/// How to connect: the driver's configuration and TLS.
pub(crate) struct Connector {
    config: postgres::Config,
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
}

impl Connector {
    fn connect(&self) -> Result<Client, postgres::Error> {
        match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(postgres::NoTls),
        }
    }
}

/// The connection's side: everything here runs on the store's thread.
pub(crate) struct Session {
    connector: Connector,
    /// `None` until connected, and again after the connection was lost:
    /// the next call connects anew.
    client: Option<Client>,
    /// Whether the last call failed: the connection may be gone without
    /// the driver knowing yet (a server that ended it sends its notice
    /// only as the answer to the next query).
    suspect: bool,
    /// Statements prepared on `client`, by their SQL.
    statements: HashMap<String, Statement>,
    label: PathBuf,
}

impl Session {
    /// Makes the connection (again) if there is none or it was lost.
    fn connect(&mut self) -> Result<(), postgres::Error> {
        if std::mem::take(&mut self.suspect) {
            if let Some(client) = self.client.as_mut() {
                if client.is_valid(CONNECT_TIMEOUT).is_err() {
                    self.client = None;
                }
            }
        }
        if self.client.as_ref().is_some_and(Client::is_closed) {
            self.client = None;
        }
        if self.client.is_none() {
            self.statements.clear();
            self.client = Some(self.connector.connect()?);
        }
        Ok(())
    }

    /// The connection, for statements outside a transaction.
    pub(super) fn db(&mut self) -> Result<Db<'_, &mut Client>, postgres::Error> {
        self.connect()?;
        let Session {
            client, statements, ..
        } = self;
        match client.as_mut() {
            Some(handle) => Ok(Db { handle, statements }),
            None => unreachable!("connected just above"),
        }
    }

    /// Brings the schema up to date under an advisory lock held on a
    /// connection of its own, so that two processes opening a new database
    /// at once apply each migration once; each migration is a transaction.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let known = PostgresStore::SCHEMA_VERSION;
        let label = self.label.clone();
        let open_err = |source: postgres::Error| StoreError::Open {
            path: label.clone(),
            source: Box::new(source),
        };
        let mut lock = self.connector.connect().map_err(open_err)?;
        lock.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
            .map_err(open_err)?;
        let migrated = (|| {
            lock.batch_execute(
                "CREATE TABLE IF NOT EXISTS plumbline_schema (
                     version       BIGINT PRIMARY KEY,
                     applied_at_ms BIGINT NOT NULL
                 )",
            )
            .map_err(open_err)?;
            let found: i64 = lock
                .query_one(
                    "SELECT COALESCE(max(version), 0) FROM plumbline_schema",
                    &[],
                )
                .and_then(|row| row.try_get(0))
                .map_err(open_err)?;
            if found > known {
                return Err(StoreError::NewerSchema {
                    path: label.clone(),
                    found,
                    known,
                });
            }
            for (index, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
                let version = index as i64 + 1;
                let migrate_err = |source: postgres::Error| StoreError::Migrate {
                    path: label.clone(),
                    version,
                    source: Box::new(source),
                };
                let mut tx = lock.transaction().map_err(migrate_err)?;
                tx.batch_execute(sql).map_err(migrate_err)?;
                tx.execute(
                    "INSERT INTO plumbline_schema (version, applied_at_ms) VALUES ($1, $2)",
                    &[&version, &crate::time::now_ms()],
                )
                .map_err(migrate_err)?;
                tx.commit().map_err(migrate_err)?;
            }
            Ok(())
        })();
        // Closing the connection releases the lock too; unlocking first
        // lets the next process in without waiting for the close.
        let _ = lock.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK]);
        migrated
    }
}

/// A connection (`&mut Client`) or a transaction on it.
pub(crate) trait Handle {
    type Client: GenericClient;
    fn client(&mut self) -> &mut Self::Client;
}

impl Handle for &mut Client {
    type Client = Client;
    fn client(&mut self) -> &mut Client {
        self
    }
}

impl<'t> Handle for postgres::Transaction<'t> {
    type Client = postgres::Transaction<'t>;
    fn client(&mut self) -> &mut postgres::Transaction<'t> {
        self
    }
}

/// A connection or a transaction, with the statements prepared on the
/// connection.
pub(crate) struct Db<'a, H> {
    handle: H,
    statements: &'a mut HashMap<String, Statement>,
}

/// Statements this process has sent to PostgreSQL, a prepare, BEGIN and
/// COMMIT each counted ([`crate::Store::statements`]).
pub(crate) static SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl<H: Handle> Db<'_, H> {
    /// Counts a statement sent (a prepare, a query, BEGIN, COMMIT).
    fn sending(&self) {
        SENT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The prepared statement for `sql`, prepared on first use; counts the
    /// statement about to run with it.
    fn statement(&mut self, sql: &str) -> Result<Statement, postgres::Error> {
        self.sending();
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        self.sending();
        let statement = self.handle.client().prepare(sql)?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }

    pub fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        let statement = self.statement(sql)?;
        self.handle.client().query(&statement, params)
    }

    pub fn query_opt(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        let statement = self.statement(sql)?;
        self.handle.client().query_opt(&statement, params)
    }

    pub fn query_one(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, postgres::Error> {
        let statement = self.statement(sql)?;
        self.handle.client().query_one(&statement, params)
    }

    pub fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        let statement = self.statement(sql)?;
        self.handle.client().execute(&statement, params)
    }
}

impl Db<'_, &mut Client> {
    /// A transaction on this connection, with the same statements; it
    /// rolls back when dropped without [`Db::commit`].
    pub fn transaction(&mut self) -> Result<Db<'_, postgres::Transaction<'_>>, postgres::Error> {
        self.sending();
        Ok(Db {
            handle: self.handle.transaction()?,
            statements: &mut *self.statements,
        })
    }
}

impl Db<'_, postgres::Transaction<'_>> {
    pub fn commit(self) -> Result<(), postgres::Error> {
        self.sending();
        self.handle.commit()
    }
}

pub(crate) fn read_err(
    label: &std::path::Path,
    what: impl Into<String>,
    source: postgres::Error,
) -> StoreError {
    StoreError::Read {
        path: label.to_path_buf(),
        what: what.into(),
        source: Box::new(source),
    }
}

/// Text kept as bytea (see the schema): UTF-8, checked on the way out.
pub(crate) fn text(
    label: &std::path::Path,
    bytes: Vec<u8>,
    what: &str,
) -> Result<String, StoreError> {
    String::from_utf8(bytes).map_err(|_| StoreError::Corrupt {
        path: label.to_path_buf(),
        detail: format!("{what} holds text that is not UTF-8"),
    })
}

/// [`text`] of a column that may be NULL.
pub(crate) fn opt_text(
    label: &std::path::Path,
    bytes: Option<Vec<u8>>,
    what: &str,
) -> Result<Option<String>, StoreError> {
    bytes.map(|b| text(label, b, what)).transpose()
}
