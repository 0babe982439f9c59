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
//!
//! This file holds the [`Store`] implementation, one SQL statement or
//! transaction per operation; [`open`] opens and migrates a file and holds
//! the helpers every query shares, [`write`] stores an observation's
//! content once by digest, and [`reviews`] writes verdicts and baselines.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use crate::lease::{Lease, LeaseClaim, LeaseToken};
use crate::listing::{
    check_observation, entries, implicit_baseline, inventory_text, tool_history, tool_set_digest,
    Entry, SummaryRow, ToolState,
};
use crate::model::{
    AlertCounts, AlertId, Baseline, BaselineEdit, BaselineTool, NewAlert, NewObservation,
    NewReview, Normalized, Observation, ObservationId, ObservationSummary, OutboxAlert, Outcome,
    Problem, ProblemKind, Review, ReviewStatus, Server, ToolEntry, ToolHistoryEntry,
};
use crate::prelude::*;
use crate::{canonicalize, digest, Digest, StoreError};

mod leases;
mod open;
mod reviews;
mod rows;
#[cfg(test)]
mod tests;
mod write;

use write::*;

/// The schema migrations, in order: entry `i` takes the schema from
/// version `i` to version `i + 1`. Append only; never edit a released one.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/0001_initial.sql"),
    include_str!("../migrations/0002_alerts.sql"),
    include_str!("../migrations/0003_reviews.sql"),
    include_str!("../migrations/0004_tool_set_changes.sql"),
    include_str!("../migrations/0005_drift_summaries.sql"),
    include_str!("../migrations/0006_alert_delivery.sql"),
    include_str!("../migrations/0007_normalized_tools.sql"),
    include_str!("../migrations/0008_inventories.sql"),
    include_str!("../migrations/0009_leases.sql"),
    include_str!("../migrations/0010_watcher_expiry.sql"),
    include_str!("../migrations/0011_authorization.sql"),
    include_str!("../migrations/0012_guard_events.sql"),
    include_str!("../migrations/0013_history_and_server_names.sql"),
];

/// How long a write waits for another process's write to finish before
/// failing with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

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

impl HistoryStore for SqliteStore {
    fn record_repeats(
        &mut self,
        repeats: &[crate::Repeat],
    ) -> Result<Vec<Option<ObservationId>>, StoreError> {
        self.repeats(repeats)
    }

    fn foreign_names(&self, server: &str) -> Result<Vec<String>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT DISTINCT n.name FROM server_names n JOIN servers s ON s.id = n.server_id
                 WHERE s.name <> ?1 ORDER BY n.name",
            )
            .and_then(|mut stmt| stmt.query_map([server], |row| row.get(0))?.collect())
            .map_err(|source| self.read_err("the other servers' tool names", source))
    }

    fn history_id(&self) -> Result<String, StoreError> {
        self.conn
            .query_row("SELECT id FROM history", [], |row| row.get(0))
            .map_err(|source| self.read_err("the history's id", source))
    }

    fn statements(&self) -> u64 {
        open::RUN.load(std::sync::atomic::Ordering::Relaxed)
    }

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

    fn put_inventory(
        &mut self,
        observation: ObservationId,
        names: &[String],
    ) -> Result<Digest, StoreError> {
        let (digest, text) = inventory_text(names);
        let write = |source| StoreError::WriteDerived {
            path: self.path.clone(),
            what: "an inventory",
            source: Box::new(source),
        };
        let tx = self.conn.unchecked_transaction().map_err(write)?;
        tx.prepare_cached(
            "INSERT INTO inventories (digest, names) VALUES (?1, ?2)
             ON CONFLICT (digest) DO NOTHING",
        )
        .and_then(|mut stmt| stmt.execute(params![&digest.as_bytes()[..], text]))
        .map_err(write)?;
        tx.prepare_cached(
            "INSERT INTO observation_inventories (observation_id, inventory_id)
             SELECT ?1, id FROM inventories WHERE digest = ?2
             ON CONFLICT (observation_id) DO UPDATE SET inventory_id = excluded.inventory_id",
        )
        .and_then(|mut stmt| stmt.execute(params![observation.0, &digest.as_bytes()[..]]))
        .map_err(write)?;
        tx.commit().map_err(write)?;
        Ok(digest)
    }

    fn inventory(&self, observation: ObservationId) -> Result<Option<Digest>, StoreError> {
        let what = format!("the inventory of observation {observation}");
        let bytes: Option<Vec<u8>> = self
            .conn
            .prepare_cached(
                "SELECT i.digest FROM observation_inventories oi
                 JOIN inventories i ON i.id = oi.inventory_id
                 WHERE oi.observation_id = ?1",
            )
            .and_then(|mut stmt| stmt.query_row([observation.0], |row| row.get(0)).optional())
            .map_err(|source| self.read_err(&what, source))?;
        bytes
            .map(|b| {
                Digest::from_slice(&b).ok_or_else(|| {
                    self.corrupt(format!("{what} has a digest of {} bytes", b.len()))
                })
            })
            .transpose()
    }

    fn inventory_names(&self, inventory: &Digest) -> Result<Option<Vec<String>>, StoreError> {
        let what = format!("inventory {inventory}");
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT names FROM inventories WHERE digest = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([&inventory.as_bytes()[..]], |row| row.get(0))
                    .optional()
            })
            .map_err(|source| self.read_err(&what, source))?;
        text.map(|t| {
            serde_json::from_str(&t)
                .map_err(|e| self.corrupt(format!("{what} is not a JSON array of names: {e}")))
        })
        .transpose()
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

    fn server(&self, name: &str) -> Result<Option<Server>, StoreError> {
        self.conn
            .prepare_cached("SELECT name, identity FROM servers WHERE name = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([name], |row| {
                    Ok(Server {
                        name: row.get(0)?,
                        identity: row.get(1)?,
                    })
                })
                .optional()
            })
            .map_err(|source| self.read_err(format!("server {name:?}"), source))
    }

    fn record_observation(
        &mut self,
        observation: &NewObservation,
    ) -> Result<ObservationId, StoreError> {
        self.record(observation, None)
    }

    fn record_observation_under(
        &mut self,
        observation: &NewObservation,
        lease: &LeaseToken,
    ) -> Result<ObservationId, StoreError> {
        self.record(observation, Some(lease))
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
        let (server_info_id, capabilities_id, instructions_id, authorization_id) = self
            .conn
            .prepare_cached(
                "SELECT server_info_id, capabilities_id, instructions_id, authorization_id
                 FROM observations WHERE id = ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_row([id.0], |row| {
                    Ok((
                        row.get::<_, Option<i64>>(0)?,
                        row.get::<_, Option<i64>>(1)?,
                        row.get::<_, Option<i64>>(2)?,
                        row.get::<_, Option<i64>>(3)?,
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
                "SELECT e.position, e.name, r.digest, COALESCE(nv.digest, v.digest),
                        nr.digest, e.normalized_by
                 FROM observations o
                 JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
                 JOIN raw_tools r ON r.id = e.raw_tool_id
                 LEFT JOIN tool_versions v ON v.id = r.tool_version_id
                 LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
                 LEFT JOIN tool_versions nv ON nv.id = nr.tool_version_id
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
                        row.get::<_, Option<Vec<u8>>>(4)?,
                        row.get::<_, Option<String>>(5)?,
                    ))
                })?
                .collect::<Result<Vec<_>, _>>()
            })
            .map_err(|source| self.read_err(format!("the tools of {what}"), source))?;
        let mut tools = Vec::with_capacity(tool_rows.len());
        for (position, name, raw, canonical, normalized, by) in tool_rows {
            let normalized = match (normalized, by) {
                (Some(n), Some(by)) => Some(Normalized {
                    raw_digest: self.digest_from(&n, &what)?,
                    by: serde_json::from_str(&by).map_err(|_| {
                        self.corrupt(format!("{what} names its normalisations unreadably"))
                    })?,
                }),
                _ => None,
            };
            tools.push(ToolEntry {
                position: u32::try_from(position)
                    .map_err(|_| self.corrupt(format!("{what} has a tool at {position}")))?,
                name,
                raw_digest: self.digest_from(&raw, &what)?,
                canonical_digest: canonical.map(|c| self.digest_from(&c, &what)).transpose()?,
                normalized,
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
            authorization: self.document(authorization_id)?,
            tools,
            problems,
        }))
    }

    fn latest_successful(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        self.latest_where(
            server,
            before,
            "o.outcome = 'ok'",
            "the latest successful observation",
        )
    }

    fn latest_authorization(
        &self,
        server: &str,
        before: Option<ObservationId>,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        self.latest_where(
            server,
            before,
            "o.authorization_id IS NOT NULL",
            "the latest authorization metadata",
        )
    }

    fn document_by_digest(&self, digest: &Digest) -> Result<Option<Vec<u8>>, StoreError> {
        self.conn
            .prepare_cached("SELECT body FROM documents WHERE digest = ?1")
            .and_then(|mut stmt| {
                stmt.query_row([&digest.as_bytes()[..]], |row| row.get(0))
                    .optional()
            })
            .map_err(|source| self.read_err(format!("document {digest}"), source))
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

        tool_history(observations, |set| self.tool_state(set, tool, &what))
    }
}

impl crate::GuardLog for SqliteStore {
    fn record_guard_event(&mut self, e: &crate::NewGuardEvent) -> Result<i64, StoreError> {
        let server_id = self.server_id(&e.server)?;
        self.conn
            .prepare_cached(
                "INSERT INTO guard_events (server_id, at_ms, kind, tool, detail)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut stmt| {
                stmt.execute(params![server_id, e.at_ms, e.kind, e.tool, e.detail])
            })
            .map_err(|source| StoreError::Write {
                path: self.path.clone(),
                server: e.server.clone(),
                what: "a guard event",
                source: Box::new(source),
            })?;
        Ok(self.conn.last_insert_rowid())
    }

    fn guard_events(&self, limit: u32) -> Result<Vec<crate::GuardEvent>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT g.id, s.name, g.at_ms, g.kind, g.tool, g.detail
                 FROM guard_events g JOIN servers s ON s.id = g.server_id
                 ORDER BY g.id DESC LIMIT ?1",
            )
            .and_then(|mut stmt| {
                stmt.query_map([i64::from(limit)], |row| {
                    Ok(crate::GuardEvent {
                        id: row.get(0)?,
                        server: row.get(1)?,
                        at_ms: row.get(2)?,
                        kind: row.get(3)?,
                        tool: row.get(4)?,
                        detail: row.get(5)?,
                    })
                })?
                .collect()
            })
            .map_err(|source| self.read_err("the guard events", source))
    }
}

impl ReviewStore for SqliteStore {
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

    fn mark_all_reviewed(&mut self, reviews: &[NewReview]) -> Result<(), StoreError> {
        let items: Vec<(NewReview, Vec<BaselineEdit>)> =
            reviews.iter().map(|r| (r.clone(), Vec::new())).collect();
        self.write_reviews(ReviewStatus::Reviewed, &items)
    }

    fn accept_changes(
        &mut self,
        accepts: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError> {
        self.write_reviews(ReviewStatus::Accepted, accepts)
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
            tools = implicit_baseline(observation);
        }
        Ok(Some(Baseline {
            server: server.to_owned(),
            explicit,
            tools,
        }))
    }
}

impl Outbox for SqliteStore {
    fn claim_due_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        self.claim_alerts(channel, now_ms, claim_ms, limit)
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

    fn alerted_since(
        &self,
        server: &str,
        key: &str,
        after: Option<ObservationId>,
    ) -> Result<Vec<String>, StoreError> {
        self.conn
            .prepare_cached(
                "SELECT DISTINCT a.channel FROM alerts a JOIN servers s ON s.id = a.server_id
                 WHERE s.name = ?1 AND a.key = ?2 AND a.observation_id > ?3
                 ORDER BY a.channel",
            )
            .and_then(|mut stmt| {
                stmt.query_map(params![server, key, after.map_or(0, |a| a.0)], |row| {
                    row.get(0)
                })?
                .collect()
            })
            .map_err(|source| self.read_err("the channels told of a failure", source))
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

    fn retry_alert(
        &mut self,
        id: AlertId,
        error: &str,
        retry_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.update_alert(
            "UPDATE alerts SET attempts = attempts + 1, last_error = ?2, next_attempt_at_ms = ?3
             WHERE id = ?1",
            params![id.0, error, retry_at_ms],
        )
    }

    fn give_up_alert(&mut self, id: AlertId, error: &str, at_ms: i64) -> Result<(), StoreError> {
        self.update_alert(
            "UPDATE alerts SET attempts = attempts + 1, last_error = ?2, failed_at_ms = ?3
             WHERE id = ?1",
            params![id.0, error, at_ms],
        )
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
}

impl Leases for SqliteStore {
    fn claim_leases(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError> {
        self.claim(claim)
    }

    fn release_leases(&mut self, holder: &str) -> Result<u64, StoreError> {
        self.release(holder)
    }

    fn leases(&self) -> Result<Vec<Lease>, StoreError> {
        self.lease_rows()
    }

    fn clock_ms(&self) -> Result<i64, StoreError> {
        // One machine: its clock.
        Ok(crate::time::now_ms())
    }
}

impl Rows for SqliteStore {
    fn read_rows(
        &self,
        table: &str,
        after: Option<&[crate::tables::Cell]>,
        limit: u32,
    ) -> Result<Vec<crate::tables::Row>, StoreError> {
        self.rows_of(table, after, limit)
    }

    fn write_rows(&mut self, table: &str, rows: &[crate::tables::Row]) -> Result<u64, StoreError> {
        self.put_rows(table, rows)
    }

    fn finish_writing_rows(&mut self) -> Result<(), StoreError> {
        // SQLite numbers a new row after the highest id there. Each
        // server's tool names are derived from the observations copied (as
        // schema version 13 builds them).
        self.conn
            .execute_batch(
                "BEGIN IMMEDIATE;
                 DELETE FROM server_names;
                 INSERT OR IGNORE INTO server_names (server_id, name)
                 SELECT o.server_id, e.name FROM observations o
                 JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
                 WHERE e.name IS NOT NULL AND o.id IN
                     (SELECT max(id) FROM observations WHERE outcome = 'ok' GROUP BY server_id);
                 COMMIT;",
            )
            .map_err(|source| StoreError::WriteDerived {
                path: self.path.clone(),
                what: "the servers' tool names",
                source: Box::new(source),
            })
    }
}

// ---------------------------------------------------------------------------
// Types the submodules share (kept here so that their fields are visible to
// every submodule).

/// One tool of a listing being written.
/// Each entry's position, name, tool version id, and raw tool id when it
/// has no version (a malformed tool).
type Versions = Vec<(i64, Option<String>, Option<i64>, Option<i64>)>;

/// The versions of a tool set: what is compared.
fn versions_of(tx: &Transaction<'_>, tool_set_id: i64) -> rusqlite::Result<Versions> {
    tx.prepare_cached(
        "SELECT e.position, e.name, COALESCE(nr.tool_version_id, r.tool_version_id),
                CASE WHEN r.tool_version_id IS NULL THEN r.id END
         FROM tool_set_entries e
         JOIN raw_tools r ON r.id = e.raw_tool_id
         LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
         WHERE e.tool_set_id = ?1
         ORDER BY e.position",
    )?
    .query_map([tool_set_id], |row| {
        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
    })?
    .collect()
}
