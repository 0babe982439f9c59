//! The SQLite backend: one embedded database file, in WAL mode.
//!
//! This is the only module that knows SQL. The schema lives in
//! `src/migrations/NNNN_*.sql`, compiled into the binary and applied in
//! order, each in its own transaction, with `PRAGMA user_version` recording
//! how many have been applied.
//!
//! Every observation is written in one `BEGIN IMMEDIATE` transaction: the
//! content it needs (raw tools, tool versions, documents, its tool set),
//! the observation row and its problems commit together or not at all, so
//! a process killed mid-write leaves no half-written observation. Accepting
//! a change is one such transaction too: the baseline's materialisation,
//! its edits and the verdict commit together.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::model::{
    AlertCounts, AlertId, Baseline, BaselineEdit, BaselineTool, NewAlert, NewObservation,
    NewReview, Observation, ObservationId, ObservationSummary, OutboxAlert, Outcome, Problem,
    ProblemKind, Review, ReviewStatus, Server, ToolEntry, ToolHistoryEntry,
};
use crate::{canonicalize, digest, Digest, Store, StoreError};

/// The schema migrations, in order: entry `i` takes the schema from
/// version `i` to version `i + 1`. Append only; never edit a released one.
const MIGRATIONS: &[&str] = &[
    include_str!("migrations/0001_initial.sql"),
    include_str!("migrations/0002_alerts.sql"),
    include_str!("migrations/0003_reviews.sql"),
    include_str!("migrations/0004_tool_set_changes.sql"),
    include_str!("migrations/0005_drift_summaries.sql"),
    include_str!("migrations/0006_alert_delivery.sql"),
];

/// How long a write waits for another process's write to finish before
/// failing with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// The domain-separation prefix of a tool set's digest, so a tool set can
/// never share a digest with a tool or a document.
const TOOL_SET_DIGEST_PREFIX: &[u8] = b"plumbline tool set v1\0";

/// A store in one SQLite file.
pub struct SqliteStore {
    conn: Connection,
    /// The file, for messages; `:memory:` for an in-memory store.
    path: PathBuf,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// The schema version this build writes and reads.
    pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

    /// Opens the store at `path`, creating the file and its parent
    /// directories if needed, and brings its schema up to date.
    ///
    /// Fails with [`StoreError::NewerSchema`] when the file was written by
    /// a newer plumbline, rather than guess at a schema it does not know.
    pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore, StoreError> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|source| StoreError::CreateDir {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        })?;
        SqliteStore::configure(conn, path)
    }

    /// An empty store in memory, gone when dropped: for unit tests and
    /// throwaway runs. WAL does not apply to it.
    pub fn open_in_memory() -> Result<SqliteStore, StoreError> {
        let path = PathBuf::from(":memory:");
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        })?;
        SqliteStore::configure(conn, path)
    }

    fn configure(conn: Connection, path: PathBuf) -> Result<SqliteStore, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        };
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // WAL lets readers (a dashboard, `plumbline log`) run while an
        // observation is written; with it, synchronous=NORMAL is still
        // crash-safe (a power loss may drop the last commits, never corrupt
        // the file) and saves an fsync per observation. This is also the
        // first statement that reads the file, so a file that is not a
        // SQLite database fails here.
        //
        // Switching a new file to WAL takes a lock that the busy handler
        // does not wait for: when two processes open a new store at once (a
        // watcher starting while `plumbline log` runs) one is refused, so
        // retry within the busy timeout.
        let started = std::time::Instant::now();
        let _mode: String = loop {
            match conn.pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get(0)) {
                Err(rusqlite::Error::SqliteFailure(e, _))
                    if e.code == rusqlite::ErrorCode::DatabaseBusy
                        && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                other => break other.map_err(open_err)?,
            }
        };
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(open_err)?;
        let mut store = SqliteStore { conn, path };
        store.migrate()?;
        Ok(store)
    }

    /// The file this store lives in (`:memory:` for an in-memory store).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The schema version recorded in the file.
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .map_err(|source| self.read_err("the schema version", source))
    }

    /// Writes everything in the write-ahead log into the database file and
    /// empties the log, e.g. before measuring or copying the file.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .map_err(|source| self.read_err("a checkpoint", source))
    }

    /// Runs SQLite's `PRAGMA integrity_check`; `Ok(())` when the file is
    /// sound, otherwise [`StoreError::Corrupt`] with SQLite's findings.
    pub fn integrity_check(&self) -> Result<(), StoreError> {
        let mut stmt = self
            .conn
            .prepare("PRAGMA integrity_check")
            .map_err(|source| self.read_err("an integrity check", source))?;
        let findings = stmt
            .query_map([], |row| row.get::<_, String>(0))
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(|source| self.read_err("an integrity check", source))?;
        if findings == ["ok"] {
            Ok(())
        } else {
            Err(self.corrupt(findings.join("; ")))
        }
    }

    /// Applies the migrations the file lacks, one transaction each.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let known = SqliteStore::SCHEMA_VERSION;
        for (index, sql) in MIGRATIONS.iter().enumerate() {
            let version = index as i64 + 1;
            let migrate_err = |source| StoreError::Migrate {
                path: self.path.clone(),
                version,
                source: Box::new(source),
            };
            // IMMEDIATE takes the write lock before reading the version, so
            // two processes opening a new file at once cannot both apply the
            // same migration.
            let tx = self
                .conn
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(migrate_err)?;
            let found: i64 = tx
                .pragma_query_value(None, "user_version", |row| row.get(0))
                .map_err(migrate_err)?;
            if found > known {
                return Err(StoreError::NewerSchema {
                    path: self.path.clone(),
                    found,
                    known,
                });
            }
            if found < 0 {
                return Err(StoreError::Corrupt {
                    path: self.path.clone(),
                    detail: format!("negative schema version {found}"),
                });
            }
            if found >= version {
                continue;
            }
            tx.execute_batch(sql).map_err(migrate_err)?;
            tx.pragma_update(None, "user_version", version)
                .map_err(migrate_err)?;
            tx.commit().map_err(migrate_err)?;
        }
        // With no pending migration the loop may not have looked at all (a
        // build with zero migrations) or stopped early; check once more so a
        // newer file is always refused.
        let found = self.schema_version()?;
        if found > known {
            return Err(StoreError::NewerSchema {
                path: self.path.clone(),
                found,
                known,
            });
        }
        Ok(())
    }

    fn update_alert(&mut self, sql: &str, args: impl rusqlite::Params) -> Result<(), StoreError> {
        let changed = self
            .conn
            .prepare_cached(sql)
            .and_then(|mut stmt| stmt.execute(args))
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                server: String::new(),
                what: "an alert",
                source: Box::new(source),
            })?;
        if changed == 1 {
            Ok(())
        } else {
            Err(self.corrupt("no such alert"))
        }
    }

    /// Alerts of the outbox selected by `tail` (a `WHERE … ORDER BY …
    /// LIMIT …` over `alerts a`).
    fn outbox(
        &self,
        tail: &str,
        args: impl rusqlite::Params,
        what: impl Into<String>,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        let sql = format!(
            "SELECT a.id, s.name, a.observation_id, a.channel, a.key, a.body, a.created_at_ms,
                    a.attempts, a.last_error, a.next_attempt_at_ms, a.delivered_at_ms, a.failed_at_ms
             FROM alerts a JOIN servers s ON s.id = a.server_id {tail}"
        );
        self.conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(args, |row| {
                    Ok(OutboxAlert {
                        id: AlertId(row.get(0)?),
                        server: row.get(1)?,
                        observation: ObservationId(row.get(2)?),
                        channel: row.get(3)?,
                        key: row.get(4)?,
                        body: row.get(5)?,
                        created_at_ms: row.get(6)?,
                        attempts: row.get(7)?,
                        last_error: row.get(8)?,
                        next_attempt_at_ms: row.get(9)?,
                        delivered_at_ms: row.get(10)?,
                        failed_at_ms: row.get(11)?,
                    })
                })?
                .collect()
            })
            .map_err(|source| self.read_err(what, source))
    }

    fn read_err(&self, what: impl Into<String>, source: rusqlite::Error) -> StoreError {
        StoreError::Read {
            path: self.path.clone(),
            what: what.into(),
            source: Box::new(source),
        }
    }

    fn corrupt(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    fn server_id(&self, server: &str) -> Result<i64, StoreError> {
        self.conn
            .prepare_cached("SELECT id FROM servers WHERE name = ?1")
            .and_then(|mut stmt| stmt.query_row([server], |row| row.get(0)).optional())
            .map_err(|source| self.read_err(format!("server {server:?}"), source))?
            .ok_or_else(|| StoreError::UnknownServer {
                path: self.path.clone(),
                server: server.to_owned(),
            })
    }

    /// Summaries matching `filter` (a SQL condition on `o`), in `order`.
    fn summaries(
        &self,
        what: &str,
        filter: &str,
        order_and_limit: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<ObservationSummary>, StoreError> {
        let sql = format!(
            "SELECT o.id, s.name, o.started_at_ms, o.finished_at_ms, o.outcome, o.error,
                    o.protocol_version, ts.digest, ts.tool_count,
                    (SELECT count(*) FROM observation_problems p WHERE p.observation_id = o.id)
             FROM observations o
             JOIN servers s ON s.id = o.server_id
             LEFT JOIN tool_sets ts ON ts.id = o.tool_set_id
             WHERE {filter}
             {order_and_limit}"
        );
        let rows = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(params, SummaryRow::read)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(what, source))?;
        rows.into_iter().map(|row| row.into_summary(self)).collect()
    }

    fn document(&self, id: Option<i64>) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(id) = id else { return Ok(None) };
        self.conn
            .prepare_cached("SELECT body FROM documents WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
            .map_err(|source| self.read_err(format!("document {id}"), source))?
            .map(Some)
            .ok_or_else(|| self.corrupt(format!("document {id} is missing")))
    }

    fn digest_from(&self, bytes: &[u8], what: &str) -> Result<Digest, StoreError> {
        Digest::from_slice(bytes)
            .ok_or_else(|| self.corrupt(format!("{what} has a digest of {} bytes", bytes.len())))
    }
}

/// An observation row as read, before its values are checked.
struct SummaryRow {
    id: i64,
    server: String,
    started_at_ms: i64,
    finished_at_ms: i64,
    outcome: String,
    error: Option<String>,
    protocol_version: Option<String>,
    tool_set: Option<Vec<u8>>,
    tool_count: Option<i64>,
    problem_count: i64,
}

impl SummaryRow {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<SummaryRow> {
        Ok(SummaryRow {
            id: row.get(0)?,
            server: row.get(1)?,
            started_at_ms: row.get(2)?,
            finished_at_ms: row.get(3)?,
            outcome: row.get(4)?,
            error: row.get(5)?,
            protocol_version: row.get(6)?,
            tool_set: row.get(7)?,
            tool_count: row.get(8)?,
            problem_count: row.get(9)?,
        })
    }

    fn into_summary(self, store: &SqliteStore) -> Result<ObservationSummary, StoreError> {
        let what = format!("observation {}", self.id);
        let outcome = match (self.outcome.as_str(), self.error) {
            ("ok", None) => Outcome::Ok,
            ("failed", Some(error)) => Outcome::Failed { error },
            (other, _) => {
                return Err(store.corrupt(format!("{what} has outcome {other:?}")));
            }
        };
        let tool_set = match (&outcome, self.tool_set) {
            (Outcome::Ok, Some(bytes)) => Some(store.digest_from(&bytes, &what)?),
            (Outcome::Failed { .. }, None) => None,
            _ => {
                return Err(store.corrupt(format!("{what} has a tool set that its outcome denies")));
            }
        };
        let count = |n: i64, of: &str| {
            u32::try_from(n).map_err(|_| store.corrupt(format!("{what} has {n} {of}")))
        };
        Ok(ObservationSummary {
            id: ObservationId(self.id),
            server: self.server,
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            outcome,
            protocol_version: self.protocol_version,
            tool_set,
            tool_count: count(self.tool_count.unwrap_or(0), "tools")?,
            problem_count: count(self.problem_count, "problems")?,
        })
    }
}

impl Store for SqliteStore {
    fn drift_summary(
        &self,
        old: &Digest,
        new: &Digest,
        grader: &str,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT summary FROM drift_summaries
                 WHERE old_set = ?1 AND new_set = ?2 AND grader = ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_row(
                    params![&old.as_bytes()[..], &new.as_bytes()[..], grader],
                    |row| row.get(0),
                )
                .optional()
            })
            .map_err(|source| self.read_err("a drift summary", source))
    }

    fn put_drift_summary(
        &mut self,
        old: &Digest,
        new: &Digest,
        grader: &str,
        summary: &[u8],
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO drift_summaries (old_set, new_set, grader, summary)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (old_set, new_set, grader) DO UPDATE SET summary = excluded.summary",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    &old.as_bytes()[..],
                    &new.as_bytes()[..],
                    grader,
                    summary
                ])
            })
            .map_err(|source| StoreError::WriteDerived {
                path: self.path.clone(),
                what: "a drift summary",
                source: Box::new(source),
            })?;
        Ok(())
    }

    fn put_server(&mut self, name: &str, identity: &str) -> Result<(), StoreError> {
        let canonical =
            canonicalize(identity.as_bytes()).map_err(|source| StoreError::InvalidIdentity {
                server: name.to_owned(),
                source: Box::new(source),
            })?;
        // The canonical form of valid UTF-8 JSON is valid UTF-8.
        let identity = String::from_utf8_lossy(&canonical);
        self.conn
            .prepare_cached(
                "INSERT INTO servers (name, identity) VALUES (?1, ?2)
                 ON CONFLICT (name) DO UPDATE SET identity = excluded.identity",
            )
            .and_then(|mut stmt| stmt.execute(params![name, identity]))
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                server: name.to_owned(),
                what: "the server",
                source: Box::new(source),
            })?;
        Ok(())
    }

    fn servers(&self) -> Result<Vec<Server>, StoreError> {
        self.conn
            .prepare_cached("SELECT name, identity FROM servers ORDER BY name")
            .and_then(|mut stmt| {
                stmt.query_map([], |row| {
                    Ok(Server {
                        name: row.get(0)?,
                        identity: row.get(1)?,
                    })
                })?
                .collect()
            })
            .map_err(|source| self.read_err("the servers", source))
    }

    fn record_observation(
        &mut self,
        observation: &NewObservation,
    ) -> Result<ObservationId, StoreError> {
        let invalid = |reason: String| StoreError::InvalidObservation {
            server: observation.server.clone(),
            reason,
        };
        if !observation.outcome.is_ok() && !observation.tools.is_empty() {
            return Err(invalid(format!(
                "a failed observation has no tool set, but {} tools were given",
                observation.tools.len()
            )));
        }
        if u32::try_from(observation.tools.len()).is_err() {
            return Err(invalid(format!(
                "{} tools is more than the store can number",
                observation.tools.len()
            )));
        }
        // Hash before taking the write lock: the lock is held only for SQL
        // and for canonicalising tools the store has never seen.
        let raw_digests: Vec<Digest> = observation.tools.iter().map(|t| digest(&t.raw)).collect();

        let path = self.path.clone();
        let server = observation.server.clone();
        let write_err = |what: &'static str| {
            let path = path.clone();
            let server = server.clone();
            move |source| StoreError::Write {
                path,
                server,
                what,
                source: Box::new(source),
            }
        };

        let server_id = self.server_id(&observation.server)?;
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(write_err("a transaction"))?;

        let mut problems: BTreeSet<Problem> = observation.problems.iter().cloned().collect();
        let mut entries: Vec<Entry> = Vec::with_capacity(observation.tools.len());
        let mut first_position: HashMap<&str, u32> = HashMap::new();
        for (index, (tool, raw_digest)) in observation.tools.iter().zip(&raw_digests).enumerate() {
            // Bounded by the check above.
            let position = index as u32;
            let (raw_tool_id, canonical_digest) = put_raw_tool(&tx, &tool.raw, raw_digest)
                .map_err(write_err("a tool's raw bytes"))?;
            if canonical_digest.is_none() {
                // Parse again only to say why: the error is not stored with
                // the raw bytes, and malformed tools are rare.
                let message = match canonicalize(&tool.raw) {
                    Err(e) => e.to_string(),
                    Ok(_) => "the tool has no canonical form in the store".to_owned(),
                };
                problems.insert(Problem {
                    position: Some(position),
                    kind: ProblemKind::MalformedTool,
                    tool_name: tool.name.clone(),
                    message,
                });
            }
            if let Some(name) = tool.name.as_deref() {
                if let Some(first) = first_position.get(name) {
                    problems.insert(Problem {
                        position: Some(position),
                        kind: ProblemKind::DuplicateName,
                        tool_name: Some(name.to_owned()),
                        message: format!("the name is also listed at position {first}"),
                    });
                } else {
                    first_position.insert(name, position);
                }
            }
            entries.push(Entry {
                position,
                name: tool.name.as_deref(),
                raw_tool_id,
                raw_digest: *raw_digest,
                canonical_digest,
            });
        }

        let tool_set_id = match observation.outcome {
            Outcome::Ok => Some(put_tool_set(&tx, &entries).map_err(write_err("the tool set"))?),
            Outcome::Failed { .. } => None,
        };
        let server_info_id = put_document(&tx, observation.server_info.as_deref())
            .map_err(write_err("serverInfo"))?;
        let capabilities_id = put_document(&tx, observation.capabilities.as_deref())
            .map_err(write_err("capabilities"))?;
        let instructions_id =
            put_document(&tx, observation.instructions.as_deref().map(str::as_bytes))
                .map_err(write_err("instructions"))?;
        let error = match &observation.outcome {
            Outcome::Ok => None,
            Outcome::Failed { error } => Some(error.as_str()),
        };
        tx.prepare_cached(
            "INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome, error,
                 protocol_version, server_info_id, capabilities_id, instructions_id, tool_set_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                server_id,
                observation.started_at_ms,
                observation.finished_at_ms,
                observation.outcome.as_str(),
                error,
                observation.protocol_version,
                server_info_id,
                capabilities_id,
                instructions_id,
                tool_set_id,
            ])
        })
        .map_err(write_err("the observation"))?;
        let id = tx.last_insert_rowid();

        if let Some(set) = tool_set_id {
            // Inside the transaction, so the previous success is settled.
            let previous: Option<(i64, i64)> = tx
                .prepare_cached(
                    "SELECT id, tool_set_id FROM observations
                     WHERE server_id = ?1 AND outcome = 'ok' AND id < ?2
                     ORDER BY id DESC LIMIT 1",
                )
                .and_then(|mut stmt| {
                    stmt.query_row(params![server_id, id], |r| Ok((r.get(0)?, r.get(1)?)))
                        .optional()
                })
                .map_err(write_err("the previous observation"))?;
            if let Some((previous_id, previous_set)) = previous {
                if previous_set != set {
                    tx.prepare_cached(
                        "INSERT INTO tool_set_changes (observation_id, server_id, previous_id)
                         VALUES (?1, ?2, ?3)",
                    )
                    .and_then(|mut stmt| stmt.execute(params![id, server_id, previous_id]))
                    .map_err(write_err("the tool set change"))?;
                }
            }
        }

        if !problems.is_empty() {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT INTO observation_problems
                         (observation_id, seq, kind, position, tool_name, message)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                )
                .map_err(write_err("the problems"))?;
            for (seq, p) in problems.iter().enumerate() {
                stmt.execute(params![
                    id,
                    seq as i64,
                    p.kind.as_str(),
                    p.position,
                    p.tool_name,
                    p.message
                ])
                .map_err(write_err("the problems"))?;
            }
        }
        tx.commit().map_err(write_err("the commit"))?;
        Ok(ObservationId(id))
    }

    fn timeline(&self, server: &str, limit: u32) -> Result<Vec<ObservationSummary>, StoreError> {
        let server_id = self.server_id(server)?;
        self.summaries(
            &format!("the timeline of server {server:?}"),
            "o.server_id = ?1",
            "ORDER BY o.id DESC LIMIT ?2",
            params![server_id, limit],
        )
    }

    fn tool_set_changes(
        &self,
        server: &str,
    ) -> Result<Vec<(ObservationSummary, ObservationSummary)>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the tool set changes of server {server:?}");
        let pairs: Vec<(i64, i64)> = self
            .conn
            .prepare_cached(
                "SELECT observation_id, previous_id FROM tool_set_changes
                 WHERE server_id = ?1 ORDER BY observation_id",
            )
            .and_then(|mut stmt| {
                stmt.query_map([server_id], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .map_err(|source| self.read_err(&what, source))?;
        // Both sides of every change, read at once.
        let by_id: HashMap<i64, ObservationSummary> = self
            .summaries(
                &what,
                "o.id IN (SELECT observation_id FROM tool_set_changes WHERE server_id = ?1
                          UNION SELECT previous_id FROM tool_set_changes WHERE server_id = ?1)",
                "",
                [server_id],
            )?
            .into_iter()
            .map(|o| (o.id.0, o))
            .collect();
        let summary = |id: i64| -> Result<ObservationSummary, StoreError> {
            by_id
                .get(&id)
                .cloned()
                .ok_or_else(|| self.corrupt(format!("{what} name a missing observation {id}")))
        };
        pairs
            .into_iter()
            .map(|(new, old)| Ok((summary(new)?, summary(old)?)))
            .collect()
    }

    fn observation_summary(
        &self,
        id: ObservationId,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        Ok(self
            .summaries(&format!("observation {id}"), "o.id = ?1", "", [id.0])?
            .into_iter()
            .next())
    }

    fn observation(&self, id: ObservationId) -> Result<Option<Observation>, StoreError> {
        let what = format!("observation {id}");
        let Some(summary) = self
            .summaries(&what, "o.id = ?1", "", [id.0])?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let (server_info_id, capabilities_id, instructions_id) = self
            .conn
            .prepare_cached(
                "SELECT server_info_id, capabilities_id, instructions_id
                 FROM observations WHERE id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([id.0], |row| {
                    Ok((
                        row.get::<_, Option<i64>>(0)?,
                        row.get::<_, Option<i64>>(1)?,
                        row.get::<_, Option<i64>>(2)?,
                    ))
                })
            })
            .map_err(|source| self.read_err(&what, source))?;
        let instructions = match self.document(instructions_id)? {
            None => None,
            Some(bytes) => Some(
                String::from_utf8(bytes)
                    .map_err(|_| self.corrupt(format!("{what} has instructions not in UTF-8")))?,
            ),
        };

        let tool_rows = self
            .conn
            .prepare_cached(
                "SELECT e.position, e.name, r.digest, v.digest
                 FROM observations o
                 JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
                 JOIN raw_tools r ON r.id = e.raw_tool_id
                 LEFT JOIN tool_versions v ON v.id = r.tool_version_id
                 WHERE o.id = ?1
                 ORDER BY e.position",
            )
            .and_then(|mut stmt| {
                stmt.query_map([id.0], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, Option<String>>(1)?,
                        row.get::<_, Vec<u8>>(2)?,
                        row.get::<_, Option<Vec<u8>>>(3)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(format!("the tools of {what}"), source))?;
        let mut tools = Vec::with_capacity(tool_rows.len());
        for (position, name, raw, canonical) in tool_rows {
            tools.push(ToolEntry {
                position: u32::try_from(position)
                    .map_err(|_| self.corrupt(format!("{what} has a tool at {position}")))?,
                name,
                raw_digest: self.digest_from(&raw, &what)?,
                canonical_digest: canonical.map(|c| self.digest_from(&c, &what)).transpose()?,
            });
        }

        let problem_rows = self
            .conn
            .prepare_cached(
                "SELECT position, kind, tool_name, message FROM observation_problems
                 WHERE observation_id = ?1 ORDER BY seq",
            )
            .and_then(|mut stmt| {
                stmt.query_map([id.0], |row| {
                    Ok((
                        row.get::<_, Option<u32>>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<String>>(2)?,
                        row.get::<_, String>(3)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(format!("the problems of {what}"), source))?;
        let mut problems = Vec::with_capacity(problem_rows.len());
        for (position, kind, tool_name, message) in problem_rows {
            let kind = ProblemKind::from_stored(&kind)
                .ok_or_else(|| self.corrupt(format!("{what} has a problem of kind {kind:?}")))?;
            problems.push(Problem {
                position,
                kind,
                tool_name,
                message,
            });
        }

        Ok(Some(Observation {
            summary,
            server_info: self.document(server_info_id)?,
            capabilities: self.document(capabilities_id)?,
            instructions,
            tools,
            problems,
        }))
    }

    fn latest_successful(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        let server_id = self.server_id(server)?;
        let before = before.map_or(i64::MAX, |id| id.0);
        let found = self.summaries(
            &format!("the latest successful observation of server {server:?}"),
            "o.server_id = ?1 AND o.id < ?2 AND o.outcome = 'ok'",
            "ORDER BY o.id DESC LIMIT 1",
            params![server_id, before],
        )?;
        Ok(found.into_iter().next())
    }

    fn tool_version(&self, canonical: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .prepare_cached("SELECT canonical FROM tool_versions WHERE digest = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([&canonical.as_bytes()[..]], |row| row.get(0))
                    .optional()
            })
            .map_err(|source| self.read_err(format!("tool version {canonical}"), source))
    }

    fn raw_tool(&self, raw: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .prepare_cached("SELECT raw FROM raw_tools WHERE digest = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([&raw.as_bytes()[..]], |row| row.get(0))
                    .optional()
            })
            .map_err(|source| self.read_err(format!("raw tool {raw}"), source))
    }

    fn enqueue_alert(&mut self, alert: &NewAlert) -> Result<Option<AlertId>, StoreError> {
        let server_id = self.server_id(&alert.server)?;
        let inserted = self
            .conn
            .prepare_cached(
                "INSERT INTO alerts (server_id, observation_id, channel, key, body, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (observation_id, channel, key) DO NOTHING",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![
                    server_id,
                    alert.observation.0,
                    alert.channel,
                    alert.key,
                    alert.body,
                    alert.created_at_ms
                ])
            })
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                server: alert.server.clone(),
                what: "an alert",
                source: Box::new(source),
            })?;
        Ok((inserted == 1).then(|| AlertId(self.conn.last_insert_rowid())))
    }

    fn pending_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        self.outbox(
            "WHERE a.delivered_at_ms IS NULL AND a.failed_at_ms IS NULL ORDER BY a.id LIMIT ?1",
            params![limit],
            "the pending alerts",
        )
    }

    fn due_alerts(
        &self,
        channel: &str,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        self.outbox(
            "WHERE a.channel = ?1 AND a.delivered_at_ms IS NULL AND a.failed_at_ms IS NULL
               AND a.next_attempt_at_ms <= ?2
             ORDER BY a.next_attempt_at_ms, a.id LIMIT ?3",
            params![channel, now_ms, limit],
            format!("the due alerts of channel {channel:?}"),
        )
    }

    fn next_alert_due(&self, channel: &str) -> Result<Option<i64>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT min(next_attempt_at_ms) FROM alerts
                 WHERE channel = ?1 AND delivered_at_ms IS NULL AND failed_at_ms IS NULL",
            )
            .and_then(|mut stmt| stmt.query_row([channel], |row| row.get(0)))
            .map_err(|source| self.read_err(format!("the alerts of channel {channel:?}"), source))
    }

    fn failed_alerts(&self, limit: u32) -> Result<Vec<OutboxAlert>, StoreError> {
        self.outbox(
            "WHERE a.failed_at_ms IS NOT NULL ORDER BY a.failed_at_ms DESC, a.id DESC LIMIT ?1",
            params![limit],
            "the failed alerts",
        )
    }

    fn alert_counts(&self) -> Result<AlertCounts, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT count(*) FILTER (WHERE delivered_at_ms IS NULL AND failed_at_ms IS NULL),
                        count(*) FILTER (WHERE failed_at_ms IS NOT NULL),
                        count(*) FILTER (WHERE delivered_at_ms IS NOT NULL)
                 FROM alerts",
            )
            .and_then(|mut stmt| {
                stmt.query_row([], |row| {
                    let count = |i| row.get::<_, i64>(i).map(|n| n.max(0) as u64);
                    Ok(AlertCounts {
                        pending: count(0)?,
                        failed: count(1)?,
                        delivered: count(2)?,
                    })
                })
            })
            .map_err(|source| self.read_err("the alert counts", source))
    }

    fn pending_alert_channels(&self) -> Result<Vec<(String, u64)>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT channel, count(*) FROM alerts
                 WHERE delivered_at_ms IS NULL AND failed_at_ms IS NULL
                 GROUP BY channel ORDER BY channel",
            )
            .and_then(|mut stmt| {
                stmt.query_map([], |row| {
                    Ok((row.get(0)?, row.get::<_, i64>(1)?.max(0) as u64))
                })?
                .collect()
            })
            .map_err(|source| self.read_err("the channels of pending alerts", source))
    }

    fn mark_alert_delivered(&mut self, id: AlertId, at_ms: i64) -> Result<(), StoreError> {
        self.update_alert(
            "UPDATE alerts SET delivered_at_ms = ?2, attempts = attempts + 1, last_error = NULL WHERE id = ?1",
            params![id.0, at_ms],
        )
    }

    fn mark_alert_failed(
        &mut self,
        id: AlertId,
        error: &str,
        at_ms: i64,
        retry_at_ms: Option<i64>,
    ) -> Result<(), StoreError> {
        match retry_at_ms {
            Some(retry) => self.update_alert(
                "UPDATE alerts SET attempts = attempts + 1, last_error = ?2, next_attempt_at_ms = ?3
                 WHERE id = ?1",
                params![id.0, error, retry],
            ),
            None => self.update_alert(
                "UPDATE alerts SET attempts = attempts + 1, last_error = ?2, failed_at_ms = ?3
                 WHERE id = ?1",
                params![id.0, error, at_ms],
            ),
        }
    }

    fn retire_alerts(
        &mut self,
        channel: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<u64, StoreError> {
        let changed = self
            .conn
            .prepare_cached(
                "UPDATE alerts SET last_error = ?2, failed_at_ms = ?3
                 WHERE channel = ?1 AND delivered_at_ms IS NULL AND failed_at_ms IS NULL",
            )
            .and_then(|mut stmt| stmt.execute(params![channel, reason, at_ms]))
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                server: String::new(),
                what: "the alerts of a channel",
                source: Box::new(source),
            })?;
        Ok(changed as u64)
    }

    fn tool_history(&self, server: &str, tool: &str) -> Result<Vec<ToolHistoryEntry>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the history of tool {tool:?} of server {server:?}");
        let observations = self
            .conn
            .prepare_cached(
                "SELECT id, finished_at_ms, tool_set_id FROM observations
                 WHERE server_id = ?1 AND outcome = 'ok' ORDER BY id",
            )
            .and_then(|mut stmt| {
                stmt.query_map([server_id], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, i64>(1)?,
                        row.get::<_, i64>(2)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(&what, source))?;

        // Unchanged observations share a tool set, so look each set up once.
        let mut states: HashMap<i64, ToolState> = HashMap::new();
        let mut previous = ToolState::Absent;
        let mut history = Vec::new();
        for (id, finished_at_ms, tool_set_id) in observations {
            let state = match states.get(&tool_set_id) {
                Some(state) => *state,
                None => {
                    let state = self.tool_state(tool_set_id, tool, &what)?;
                    states.insert(tool_set_id, state);
                    state
                }
            };
            if state != previous {
                history.push(ToolHistoryEntry {
                    observation: ObservationId(id),
                    finished_at_ms,
                    canonical_digest: match state {
                        ToolState::Present(d) => d,
                        ToolState::Absent => None,
                    },
                    present: state != ToolState::Absent,
                });
                previous = state;
            }
        }
        Ok(history)
    }

    fn mark_reviewed(&mut self, review: &NewReview) -> Result<(), StoreError> {
        self.write_review(review, ReviewStatus::Reviewed, &[])
    }

    fn accept_change(
        &mut self,
        review: &NewReview,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError> {
        self.write_review(review, ReviewStatus::Accepted, edits)
    }

    fn reviews(&self, server: &str) -> Result<Vec<Review>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the reviews of server {server:?}");
        let rows = self
            .conn
            .prepare_cached(
                "SELECT r.observation_id, r.tool_name, r.status, r.reviewer, r.at_ms, r.note
                 FROM reviews r JOIN observations o ON o.id = r.observation_id
                 WHERE o.server_id = ?1
                 ORDER BY r.observation_id, r.tool_name",
            )
            .and_then(|mut stmt| {
                stmt.query_map([server_id], |row| {
                    Ok((
                        row.get::<_, i64>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, String>(2)?,
                        row.get::<_, String>(3)?,
                        row.get::<_, i64>(4)?,
                        row.get::<_, Option<String>>(5)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(&what, source))?;
        rows.into_iter()
            .map(|(observation, tool, status, reviewer, at_ms, note)| {
                let status = ReviewStatus::from_stored(&status).ok_or_else(|| {
                    self.corrupt(format!("{what}: a review has status {status:?}"))
                })?;
                Ok(Review {
                    observation: ObservationId(observation),
                    tool,
                    status,
                    reviewer,
                    at_ms,
                    note,
                })
            })
            .collect()
    }

    fn baseline(&self, server: &str) -> Result<Option<Baseline>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the baseline of server {server:?}");
        let explicit: bool = self
            .conn
            .prepare_cached("SELECT EXISTS (SELECT 1 FROM baseline_servers WHERE server_id = ?1)")
            .and_then(|mut stmt| stmt.query_row([server_id], |row| row.get(0)))
            .map_err(|source| self.read_err(&what, source))?;
        let mut tools = BTreeMap::new();
        if explicit {
            let rows = self
                .conn
                .prepare_cached(
                    "SELECT b.tool_name, v.digest, b.observation_id, b.accepted_by, b.accepted_at_ms
                     FROM baselines b JOIN tool_versions v ON v.id = b.tool_version_id
                     WHERE b.server_id = ?1 ORDER BY b.tool_name",
                )
                .and_then(|mut stmt| {
                    stmt.query_map([server_id], |row| {
                        Ok((
                            row.get::<_, String>(0)?,
                            row.get::<_, Vec<u8>>(1)?,
                            row.get::<_, i64>(2)?,
                            row.get::<_, Option<String>>(3)?,
                            row.get::<_, Option<i64>>(4)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|source| self.read_err(&what, source))?;
            for (name, digest, observation, accepted_by, accepted_at_ms) in rows {
                tools.insert(
                    name,
                    BaselineTool {
                        canonical_digest: self.digest_from(&digest, &what)?,
                        observation: ObservationId(observation),
                        accepted_by,
                        accepted_at_ms,
                    },
                );
            }
        } else {
            let Some(first) = self
                .summaries(
                    &what,
                    "o.server_id = ?1 AND o.outcome = 'ok'",
                    "ORDER BY o.id LIMIT 1",
                    [server_id],
                )?
                .into_iter()
                .next()
            else {
                return Ok(None);
            };
            let Some(observation) = self.observation(first.id)? else {
                return Err(self.corrupt(format!("{what}: observation {} vanished", first.id)));
            };
            // The first tool of a name is the tool (a later one is a
            // recorded duplicate); a malformed one has no version to keep.
            let mut seen = BTreeSet::new();
            for entry in observation.tools {
                let Some(name) = entry.name else { continue };
                if !seen.insert(name.clone()) {
                    continue;
                }
                if let Some(canonical_digest) = entry.canonical_digest {
                    tools.insert(
                        name,
                        BaselineTool {
                            canonical_digest,
                            observation: first.id,
                            accepted_by: None,
                            accepted_at_ms: None,
                        },
                    );
                }
            }
        }
        Ok(Some(Baseline {
            server: server.to_owned(),
            explicit,
            tools,
        }))
    }
}

impl SqliteStore {
    /// Records a verdict and, for an acceptance, applies `edits` to the
    /// server's baseline, in one transaction.
    fn write_review(
        &mut self,
        review: &NewReview,
        status: ReviewStatus,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let invalid = |reason: &str| StoreError::InvalidReview {
            observation: review.observation,
            tool: review.tool.clone(),
            reason: reason.to_owned(),
        };
        let what = format!("observation {}", review.observation);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| StoreError::Write {
                path: path.clone(),
                server: String::new(),
                what: "a transaction",
                source: Box::new(source),
            })?;
        let target: Option<(i64, String, String)> = tx
            .prepare_cached(
                "SELECT o.server_id, s.name, o.outcome
                 FROM observations o JOIN servers s ON s.id = o.server_id
                 WHERE o.id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([review.observation.0], |row| {
                    Ok((row.get(0)?, row.get(1)?, row.get(2)?))
                })
                .optional()
            })
            .map_err(|source| StoreError::Read {
                path: path.clone(),
                what,
                source: Box::new(source),
            })?;
        let Some((server_id, server, outcome)) = target else {
            return Err(invalid("there is no such observation"));
        };
        let write_err = |what: &'static str| {
            let path = path.clone();
            let server = server.clone();
            move |source| StoreError::Write {
                path,
                server,
                what,
                source: Box::new(source),
            }
        };
        if outcome != "ok" {
            return Err(invalid("the observation failed, so it has no change"));
        }
        if status == ReviewStatus::Accepted {
            materialise_baseline(&tx, server_id, review.at_ms)
                .map_err(write_err("the implicit baseline"))?;
            // Accepting an older change after a newer one must not roll
            // the baseline back behind the reviewer's back.
            for edit in edits {
                let (BaselineEdit::Set { tool, .. } | BaselineEdit::Remove { tool }) = edit;
                let held: Option<i64> = tx
                    .prepare_cached(
                        "SELECT observation_id FROM baselines
                         WHERE server_id = ?1 AND tool_name = ?2",
                    )
                    .and_then(|mut stmt| {
                        stmt.query_row(params![server_id, tool], |row| row.get(0))
                            .optional()
                    })
                    .map_err(write_err("the baseline"))?;
                if let Some(held) = held.filter(|h| *h > review.observation.0) {
                    return Err(invalid(&format!(
                        "the baseline already holds a later version of {tool:?}, from observation {held}"
                    )));
                }
            }
            for edit in edits {
                match edit {
                    BaselineEdit::Set {
                        tool,
                        canonical_digest,
                    } => {
                        let version: Option<i64> = tx
                            .prepare_cached("SELECT id FROM tool_versions WHERE digest = ?1")
                            .and_then(|mut stmt| {
                                stmt.query_row([&canonical_digest.as_bytes()[..]], |row| row.get(0))
                                    .optional()
                            })
                            .map_err(write_err("the baseline"))?;
                        let Some(version) = version else {
                            return Err(invalid(&format!(
                                "tool version {canonical_digest} is not in the store"
                            )));
                        };
                        tx.prepare_cached(
                            "INSERT INTO baselines (server_id, tool_name, tool_version_id,
                                 observation_id, accepted_by, accepted_at_ms)
                             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                             ON CONFLICT (server_id, tool_name) DO UPDATE SET
                                 tool_version_id = excluded.tool_version_id,
                                 observation_id = excluded.observation_id,
                                 accepted_by = excluded.accepted_by,
                                 accepted_at_ms = excluded.accepted_at_ms",
                        )
                        .and_then(|mut stmt| {
                            stmt.execute(params![
                                server_id,
                                tool,
                                version,
                                review.observation.0,
                                review.reviewer,
                                review.at_ms
                            ])
                        })
                        .map_err(write_err("the baseline"))?;
                    }
                    BaselineEdit::Remove { tool } => {
                        tx.prepare_cached(
                            "DELETE FROM baselines WHERE server_id = ?1 AND tool_name = ?2",
                        )
                        .and_then(|mut stmt| stmt.execute(params![server_id, tool]))
                        .map_err(write_err("the baseline"))?;
                    }
                }
            }
        }
        tx.prepare_cached(
            "INSERT INTO reviews (observation_id, tool_name, status, reviewer, at_ms, note)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT (observation_id, tool_name) DO UPDATE SET
                 status = excluded.status,
                 reviewer = excluded.reviewer,
                 at_ms = excluded.at_ms,
                 note = excluded.note",
        )
        .and_then(|mut stmt| {
            stmt.execute(params![
                review.observation.0,
                review.tool,
                status.as_str(),
                review.reviewer,
                review.at_ms,
                review.note
            ])
        })
        .map_err(write_err("the review"))?;
        tx.commit().map_err(write_err("the commit"))?;
        Ok(())
    }
}

/// Turns a server's implicit baseline (the tools of its first successful
/// observation: the first tool of each name, when it is well formed) into
/// rows, unless that was done before.
fn materialise_baseline(tx: &Transaction<'_>, server_id: i64, at_ms: i64) -> rusqlite::Result<()> {
    let done: bool = tx
        .prepare_cached("SELECT EXISTS (SELECT 1 FROM baseline_servers WHERE server_id = ?1)")?
        .query_row([server_id], |row| row.get(0))?;
    if done {
        return Ok(());
    }
    let first: Option<(i64, i64)> = tx
        .prepare_cached(
            "SELECT id, tool_set_id FROM observations
             WHERE server_id = ?1 AND outcome = 'ok' ORDER BY id LIMIT 1",
        )?
        .query_row([server_id], |row| Ok((row.get(0)?, row.get(1)?)))
        .optional()?;
    if let Some((observation_id, tool_set_id)) = first {
        tx.prepare_cached(
            "INSERT INTO baselines (server_id, tool_name, tool_version_id, observation_id,
                 accepted_by, accepted_at_ms)
             SELECT ?1, e.name, r.tool_version_id, ?2, NULL, NULL
             FROM tool_set_entries e JOIN raw_tools r ON r.id = e.raw_tool_id
             WHERE e.tool_set_id = ?3 AND e.name IS NOT NULL
               AND r.tool_version_id IS NOT NULL
               AND e.position = (SELECT min(f.position) FROM tool_set_entries f
                                 WHERE f.tool_set_id = e.tool_set_id AND f.name = e.name)",
        )?
        .execute(params![server_id, observation_id, tool_set_id])?;
    }
    tx.prepare_cached(
        "INSERT INTO baseline_servers (server_id, materialised_at_ms) VALUES (?1, ?2)",
    )?
    .execute(params![server_id, at_ms])?;
    Ok(())
}

/// A tool's state in one tool set: absent, or present with its canonical
/// digest (`None` when malformed).
#[derive(Clone, Copy, PartialEq, Eq)]
enum ToolState {
    Absent,
    Present(Option<Digest>),
}

impl SqliteStore {
    /// The state of the first tool called `tool` in a tool set (a later
    /// duplicate is a recorded problem, not a second version).
    fn tool_state(
        &self,
        tool_set_id: i64,
        tool: &str,
        what: &str,
    ) -> Result<ToolState, StoreError> {
        let row: Option<Option<Vec<u8>>> = self
            .conn
            .prepare_cached(
                "SELECT v.digest
                 FROM tool_set_entries e
                 JOIN raw_tools r ON r.id = e.raw_tool_id
                 LEFT JOIN tool_versions v ON v.id = r.tool_version_id
                 WHERE e.tool_set_id = ?1 AND e.name = ?2
                 ORDER BY e.position LIMIT 1",
            )
            .and_then(|mut stmt| {
                stmt.query_row(params![tool_set_id, tool], |row| row.get(0))
                    .optional()
            })
            .map_err(|source| self.read_err(what, source))?;
        Ok(match row {
            None => ToolState::Absent,
            Some(None) => ToolState::Present(None),
            Some(Some(bytes)) => ToolState::Present(Some(self.digest_from(&bytes, what)?)),
        })
    }
}

/// One tool of a listing being written.
struct Entry<'a> {
    position: u32,
    name: Option<&'a str>,
    raw_tool_id: i64,
    raw_digest: Digest,
    canonical_digest: Option<Digest>,
}

/// Stores a tool's raw bytes unless already present; returns their row id
/// and the digest of their canonical form (`None` when malformed).
fn put_raw_tool(
    tx: &Transaction<'_>,
    raw: &[u8],
    raw_digest: &Digest,
) -> rusqlite::Result<(i64, Option<Digest>)> {
    let found: Option<(i64, Option<Vec<u8>>)> = tx
        .prepare_cached(
            "SELECT r.id, v.digest FROM raw_tools r
             LEFT JOIN tool_versions v ON v.id = r.tool_version_id
             WHERE r.digest = ?1",
        )?
        .query_row([&raw_digest.as_bytes()[..]], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    if let Some((id, canonical_digest)) = found {
        // A stored digest of the wrong length cannot come from this code;
        // treat it as "no canonical form" rather than fail the observation.
        return Ok((id, canonical_digest.and_then(|d| Digest::from_slice(&d))));
    }
    let (tool_version_id, canonical_digest) = match canonicalize(raw) {
        Ok(canonical) => {
            let canonical_digest = digest(&canonical);
            let id = put_content(
                tx,
                "SELECT id FROM tool_versions WHERE digest = ?1",
                "INSERT INTO tool_versions (digest, canonical) VALUES (?1, ?2)",
                &canonical_digest,
                &canonical,
            )?;
            (Some(id), Some(canonical_digest))
        }
        Err(_) => (None, None),
    };
    tx.prepare_cached("INSERT INTO raw_tools (digest, raw, tool_version_id) VALUES (?1, ?2, ?3)")?
        .execute(params![&raw_digest.as_bytes()[..], raw, tool_version_id])?;
    Ok((tx.last_insert_rowid(), canonical_digest))
}

/// Stores a document unless already present; returns its row id.
fn put_document(tx: &Transaction<'_>, body: Option<&[u8]>) -> rusqlite::Result<Option<i64>> {
    let Some(body) = body else { return Ok(None) };
    put_content(
        tx,
        "SELECT id FROM documents WHERE digest = ?1",
        "INSERT INTO documents (digest, body) VALUES (?1, ?2)",
        &digest(body),
        body,
    )
    .map(Some)
}

/// Looks content up by digest and inserts it when absent.
fn put_content(
    tx: &Transaction<'_>,
    select: &str,
    insert: &str,
    content_digest: &Digest,
    body: &[u8],
) -> rusqlite::Result<i64> {
    let key = &content_digest.as_bytes()[..];
    if let Some(id) = tx
        .prepare_cached(select)?
        .query_row([key], |row| row.get(0))
        .optional()?
    {
        return Ok(id);
    }
    tx.prepare_cached(insert)?.execute(params![key, body])?;
    Ok(tx.last_insert_rowid())
}

/// Stores a tool set unless already present; returns its row id.
fn put_tool_set(tx: &Transaction<'_>, entries: &[Entry<'_>]) -> rusqlite::Result<i64> {
    let set_digest = tool_set_digest(entries);
    let key = &set_digest.as_bytes()[..];
    if let Some(id) = tx
        .prepare_cached("SELECT id FROM tool_sets WHERE digest = ?1")?
        .query_row([key], |row| row.get(0))
        .optional()?
    {
        return Ok(id);
    }
    tx.prepare_cached("INSERT INTO tool_sets (digest, tool_count) VALUES (?1, ?2)")?
        .execute(params![key, entries.len() as i64])?;
    let id = tx.last_insert_rowid();
    let mut stmt = tx.prepare_cached(
        "INSERT INTO tool_set_entries (tool_set_id, position, name, raw_tool_id)
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    for e in entries {
        stmt.execute(params![id, e.position, e.name, e.raw_tool_id])?;
    }
    Ok(id)
}

/// The digest of an ordered listing: over each entry's position, name, raw
/// digest and canonical digest, with lengths and presence flags written
/// out so that no two different listings encode to the same bytes.
fn tool_set_digest(entries: &[Entry<'_>]) -> Digest {
    let mut bytes = Vec::with_capacity(TOOL_SET_DIGEST_PREFIX.len() + entries.len() * 100);
    bytes.extend_from_slice(TOOL_SET_DIGEST_PREFIX);
    bytes.extend_from_slice(&(entries.len() as u64).to_be_bytes());
    for e in entries {
        bytes.extend_from_slice(&e.position.to_be_bytes());
        match e.name {
            Some(name) => {
                bytes.push(1);
                bytes.extend_from_slice(&(name.len() as u64).to_be_bytes());
                bytes.extend_from_slice(name.as_bytes());
            }
            None => bytes.push(0),
        }
        bytes.extend_from_slice(e.raw_digest.as_bytes());
        match &e.canonical_digest {
            Some(d) => {
                bytes.push(1);
                bytes.extend_from_slice(d.as_bytes());
            }
            None => bytes.push(0),
        }
    }
    digest(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok_observation(server: &str, tools: &[&str]) -> NewObservation {
        NewObservation {
            server: server.to_owned(),
            started_at_ms: 1_700_000_000_000,
            finished_at_ms: 1_700_000_000_250,
            outcome: Outcome::Ok,
            protocol_version: Some("2025-06-18".to_owned()),
            server_info: Some(br#"{"name":"demo","version":"1.0.0"}"#.to_vec()),
            capabilities: Some(br#"{"tools":{"listChanged":true}}"#.to_vec()),
            instructions: None,
            tools: tools
                .iter()
                .map(|raw| crate::RawTool {
                    name: plumbline_base::json::parse_tool(raw.as_bytes())
                        .ok()
                        .and_then(|v| v.get("name").and_then(|n| n.as_str()).map(str::to_owned)),
                    raw: raw.as_bytes().to_vec(),
                })
                .collect(),
            problems: Vec::new(),
        }
    }

    fn store_with(server: &str) -> SqliteStore {
        let mut store = SqliteStore::open_in_memory().expect("in-memory store");
        store
            .put_server(server, r#"{"transport":"stdio","command":"demo"}"#)
            .expect("server registered");
        store
    }

    #[test]
    fn in_memory_store_is_migrated_to_the_current_schema() {
        let store = SqliteStore::open_in_memory().expect("in-memory store");
        assert_eq!(
            store.schema_version().ok(),
            Some(SqliteStore::SCHEMA_VERSION)
        );
        assert!(store.integrity_check().is_ok());
    }

    #[test]
    fn tool_set_digest_depends_on_order_names_and_content() {
        let a = digest(b"a");
        let b = digest(b"b");
        let entry = |position, name, raw| Entry {
            position,
            name,
            raw_tool_id: 0,
            raw_digest: raw,
            canonical_digest: Some(raw),
        };
        let ab = tool_set_digest(&[entry(0, Some("x"), a), entry(1, Some("y"), b)]);
        let ba = tool_set_digest(&[entry(0, Some("x"), b), entry(1, Some("y"), a)]);
        let renamed = tool_set_digest(&[entry(0, Some("z"), a), entry(1, Some("y"), b)]);
        let unnamed = tool_set_digest(&[entry(0, None, a), entry(1, Some("y"), b)]);
        let ab_again = tool_set_digest(&[entry(0, Some("x"), a), entry(1, Some("y"), b)]);
        assert_eq!(ab, ab_again);
        let all = BTreeSet::from([ab, ba, renamed, unnamed]);
        assert_eq!(all.len(), 4);
        // Row ids are not content: they must not change the digest.
        let mut other_ids = entry(0, Some("x"), a);
        other_ids.raw_tool_id = 99;
        assert_eq!(tool_set_digest(&[other_ids, entry(1, Some("y"), b)]), ab);
    }

    #[test]
    fn observing_unknown_server_is_an_error_naming_it() {
        let mut store = SqliteStore::open_in_memory().expect("in-memory store");
        let err = store
            .record_observation(&ok_observation("ghost", &[r#"{"name":"a"}"#]))
            .expect_err("unknown server");
        assert!(matches!(err, StoreError::UnknownServer { ref server, .. } if server == "ghost"));
        assert!(err.to_string().contains("\"ghost\""));
    }

    #[test]
    fn failed_observation_with_tools_is_rejected() {
        let mut store = store_with("s");
        let mut obs = ok_observation("s", &[r#"{"name":"a"}"#]);
        obs.outcome = Outcome::Failed {
            error: "timeout".to_owned(),
        };
        assert!(matches!(
            store.record_observation(&obs),
            Err(StoreError::InvalidObservation { .. })
        ));
        assert!(store.timeline("s", 10).expect("timeline").is_empty());
    }

    #[test]
    fn identity_that_is_not_an_object_is_rejected() {
        let mut store = SqliteStore::open_in_memory().expect("in-memory store");
        assert!(matches!(
            store.put_server("s", "[1]"),
            Err(StoreError::InvalidIdentity { .. })
        ));
    }

    #[test]
    fn put_server_updates_identity_and_lists_servers_by_name() {
        let mut store = SqliteStore::open_in_memory().expect("in-memory store");
        store
            .put_server("zeta", r#"{"url":"http://127.0.0.1/a"}"#)
            .expect("put");
        store
            .put_server("alpha", r#"{ "command" : "x" }"#)
            .expect("put");
        store
            .put_server("zeta", r#"{"url":"http://127.0.0.1/b"}"#)
            .expect("put");
        let servers = store.servers().expect("servers");
        assert_eq!(
            servers,
            vec![
                Server {
                    name: "alpha".into(),
                    identity: r#"{"command":"x"}"#.into()
                },
                Server {
                    name: "zeta".into(),
                    identity: r#"{"url":"http://127.0.0.1/b"}"#.into()
                },
            ]
        );
    }

    #[test]
    fn tool_history_lists_first_version_changes_removal_and_return() {
        let mut store = store_with("s");
        let v1 = r#"{"name":"t","description":"one"}"#;
        let v2 = r#"{"name":"t","description":"two"}"#;
        let other = r#"{"name":"u"}"#;
        let listings: [&[&str]; 6] = [
            &[other],
            &[other, v1],
            &[v1, other],
            &[v2, other],
            &[other],
            &[v1],
        ];
        let mut ids = Vec::new();
        for tools in listings {
            ids.push(
                store
                    .record_observation(&ok_observation("s", tools))
                    .expect("recorded"),
            );
        }
        let failed = NewObservation {
            outcome: Outcome::Failed {
                error: "down".into(),
            },
            ..ok_observation("s", &[])
        };
        store.record_observation(&failed).expect("failure recorded");

        let history = store.tool_history("s", "t").expect("history");
        let d = |raw: &str| canonicalize(raw.as_bytes()).map(|c| digest(&c)).ok();
        let got: Vec<(ObservationId, bool, Option<Digest>)> = history
            .iter()
            .map(|h| (h.observation, h.present, h.canonical_digest))
            .collect();
        assert_eq!(
            got,
            vec![
                (ids[1], true, d(v1)),
                (ids[3], true, d(v2)),
                (ids[4], false, None),
                (ids[5], true, d(v1)),
            ]
        );
    }

    #[test]
    fn latest_successful_skips_failures_and_respects_before() {
        let mut store = store_with("s");
        let first = store
            .record_observation(&ok_observation("s", &[r#"{"name":"a"}"#]))
            .expect("ok");
        let failed = store
            .record_observation(&NewObservation {
                outcome: Outcome::Failed {
                    error: "boom".into(),
                },
                ..ok_observation("s", &[])
            })
            .expect("failed");
        let latest = store.latest_successful("s", None).expect("read");
        assert_eq!(latest.map(|o| o.id), Some(first));
        let before_first = store.latest_successful("s", Some(first)).expect("read");
        assert_eq!(before_first, None);
        let before_failed = store.latest_successful("s", Some(failed)).expect("read");
        assert_eq!(before_failed.map(|o| o.id), Some(first));
    }

    #[test]
    fn observation_that_does_not_exist_reads_as_none() {
        let store = store_with("s");
        assert_eq!(store.observation(ObservationId(42)).expect("read"), None);
    }
}
