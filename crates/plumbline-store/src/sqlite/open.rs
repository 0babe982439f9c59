//! Opening a store file (configuration, migrations) and the helpers every query shares.

use super::*;

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

    pub(super) fn configure(conn: Connection, path: PathBuf) -> Result<SqliteStore, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.clone(),
            source: Box::new(source),
        };
        conn.busy_timeout(BUSY_TIMEOUT).map_err(open_err)?;
        // Every statement run is counted ([`crate::Store::statements`]).
        conn.trace_v2(
            rusqlite::trace::TraceEventCodes::SQLITE_TRACE_PROFILE,
            Some(count_statement),
        );
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
    pub(super) fn migrate(&mut self) -> Result<(), StoreError> {
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

    pub(super) fn update_alert(
        &mut self,
        sql: &str,
        args: impl rusqlite::Params,
    ) -> Result<(), StoreError> {
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
    pub(super) fn outbox(
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

    pub(super) fn read_err(&self, what: impl Into<String>, source: rusqlite::Error) -> StoreError {
        StoreError::Read {
            path: self.path.clone(),
            what: what.into(),
            source: Box::new(source),
        }
    }

    pub(super) fn corrupt(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    pub(super) fn server_id(&self, server: &str) -> Result<i64, StoreError> {
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
    pub(super) fn summaries(
        &self,
        what: &str,
        filter: &str,
        order_and_limit: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<ObservationSummary>, StoreError> {
        let sql = format!(
            "SELECT o.id, s.name, o.started_at_ms, o.finished_at_ms, o.outcome, o.error,
                    o.protocol_version, ts.digest, ts.tool_count,
                    (SELECT count(*) FROM observation_problems p WHERE p.observation_id = o.id),
                    ad.digest
             FROM observations o
             JOIN servers s ON s.id = o.server_id
             LEFT JOIN tool_sets ts ON ts.id = o.tool_set_id
             LEFT JOIN documents ad ON ad.id = o.authorization_id
             WHERE {filter}
             {order_and_limit}"
        );
        let rows = self
            .conn
            .prepare_cached(&sql)
            .and_then(|mut stmt| {
                stmt.query_map(params, read_summary_row)?
                    .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(what, source))?;
        rows.into_iter()
            .map(|row| row.into_summary(&self.path))
            .collect()
    }

    /// The server's latest observation before `before` (or overall) that
    /// meets `condition` (SQL on `o`).
    pub(super) fn latest_where(
        &self,
        server: &str,
        before: Option<ObservationId>,
        condition: &str,
        what: &str,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        let server_id = self.server_id(server)?;
        let before = before.map_or(i64::MAX, |id| id.0);
        let found = self.summaries(
            &format!("{what} of server {server:?}"),
            &format!("o.server_id = ?1 AND o.id < ?2 AND {condition}"),
            "ORDER BY o.id DESC LIMIT 1",
            rusqlite::params![server_id, before],
        )?;
        Ok(found.into_iter().next())
    }

    pub(super) fn document(&self, id: Option<i64>) -> Result<Option<Vec<u8>>, StoreError> {
        let Some(id) = id else { return Ok(None) };
        self.conn
            .prepare_cached("SELECT body FROM documents WHERE id = ?1")
            .and_then(|mut stmt| stmt.query_row([id], |row| row.get(0)).optional())
            .map_err(|source| self.read_err(format!("document {id}"), source))?
            .map(Some)
            .ok_or_else(|| self.corrupt(format!("document {id} is missing")))
    }

    pub(super) fn digest_from(&self, bytes: &[u8], what: &str) -> Result<Digest, StoreError> {
        Digest::from_slice(bytes)
            .ok_or_else(|| self.corrupt(format!("{what} has a digest of {} bytes", bytes.len())))
    }
}

/// An observation row of [`SqliteStore::summaries`]' query.
fn read_summary_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<SummaryRow> {
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
        authorization: row.get(10)?,
    })
}

/// Statements SQLite has run in this process, on every connection.
pub(super) static RUN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn count_statement(_: rusqlite::trace::TraceEvent<'_>) {
    RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}
