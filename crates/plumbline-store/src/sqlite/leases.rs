//! Leases and claims: several watchers sharing one SQLite file (on one
//! machine) take turns as they do on PostgreSQL; each claim is one
//! `BEGIN IMMEDIATE` transaction, so claims never interleave.

use super::*;
use crate::lease::{decide, Lease, LeaseClaim, LeaseToken, LeaseWrite};

/// Why a lease check refused a write.
pub(super) enum LeaseCheck {
    Lost,
    Sql(rusqlite::Error),
}

/// Whether `lease` is `server`'s current lease, within `tx`.
pub(super) fn check_lease(
    tx: &Transaction<'_>,
    server: &str,
    lease: &LeaseToken,
) -> Result<(), LeaseCheck> {
    let row: Option<(Option<String>, i64)> = tx
        .prepare_cached("SELECT holder, epoch FROM leases WHERE server = ?1")
        .and_then(|mut stmt| {
            stmt.query_row([server], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
        })
        .map_err(LeaseCheck::Sql)?;
    match row {
        Some((Some(holder), epoch)) if holder == lease.holder && epoch == lease.epoch => Ok(()),
        _ => Err(LeaseCheck::Lost),
    }
}

/// The error of a write to the leases of the store at `path`.
fn leases_err(path: &std::path::Path) -> impl Fn(rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    move |source| StoreError::WriteDerived {
        path: path.clone(),
        what: "the leases",
        source: Box::new(source),
    }
}

/// Each lease with its holder's expiry (a lease lasts while its holder
/// renews), over `leases l`.
const LEASES: &str = "SELECT l.server, l.holder, l.epoch, COALESCE(w.expires_at_ms, 0)
     FROM leases l LEFT JOIN watchers w ON w.holder = l.holder";

fn read_lease(row: &rusqlite::Row<'_>) -> rusqlite::Result<Lease> {
    Ok(Lease {
        server: row.get(0)?,
        holder: row.get(1)?,
        epoch: row.get(2)?,
        expires_at_ms: row.get(3)?,
    })
}

impl SqliteStore {
    /// [`Store::record_observation`], checking `lease` first when given.
    pub(super) fn record(
        &mut self,
        observation: &NewObservation,
        lease: Option<&LeaseToken>,
    ) -> Result<ObservationId, StoreError> {
        check_observation(observation)?;
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
        if let Some(lease) = lease {
            check_lease(&tx, &observation.server, lease).map_err(|e| match e {
                LeaseCheck::Lost => StoreError::LeaseLost {
                    server: observation.server.clone(),
                    epoch: lease.epoch,
                },
                LeaseCheck::Sql(source) => write_err("the server's lease")(source),
            })?;
        }

        let (entries, problems) = entries(observation, &raw_digests, |raw, raw_digest| {
            put_raw_tool(&tx, raw, raw_digest)
        })
        .map_err(|(what, source)| write_err(what)(source))?;

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
        let authorization_id = put_document(&tx, observation.authorization.as_deref())
            .map_err(write_err("the authorization metadata"))?;
        let error = match &observation.outcome {
            Outcome::Ok => None,
            Outcome::Failed { error } => Some(error.as_str()),
        };
        tx.prepare_cached(
            "INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome, error,
                 protocol_version, server_info_id, capabilities_id, instructions_id, tool_set_id,
                 authorization_id)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
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
                authorization_id,
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
                // A change of the tools as compared: a listing whose bytes
                // differ only where normalisation rules rewrote them, or in
                // key order and white space, has the same versions.
                let changed = previous_set != set
                    && versions_of(&tx, previous_set).map_err(write_err("the previous tools"))?
                        != versions_of(&tx, set).map_err(write_err("the tools"))?;
                if changed {
                    tx.prepare_cached(
                        "INSERT INTO tool_set_changes (observation_id, server_id, previous_id)
                         VALUES (?1, ?2, ?3)",
                    )
                    .and_then(|mut stmt| stmt.execute(params![id, server_id, previous_id]))
                    .map_err(write_err("the tool set change"))?;
                }
            }
            // The server's names are now this listing's: the inventory the
            // other servers' changes are graded with, kept here so that it
            // is read in one statement (`foreign_names`).
            if previous.is_none_or(|(_, previous_set)| previous_set != set) {
                tx.prepare_cached("DELETE FROM server_names WHERE server_id = ?1")
                    .and_then(|mut stmt| stmt.execute([server_id]))
                    .and_then(|_| {
                        tx.prepare_cached(
                            "INSERT OR IGNORE INTO server_names (server_id, name)
                             SELECT ?1, name FROM tool_set_entries
                             WHERE tool_set_id = ?2 AND name IS NOT NULL",
                        )?
                        .execute(params![server_id, set])
                    })
                    .map_err(write_err("the server's tool names"))?;
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

    /// [`Store::record_repeats`]: under the write lock, each row
    /// inserted as a copy of the one it repeats when that is still the
    /// server's newest, the identity and lease unchanged.
    pub(super) fn repeats(
        &mut self,
        repeats: &[crate::Repeat],
    ) -> Result<Vec<Option<ObservationId>>, StoreError> {
        let server = repeats.first().map_or("", |r| r.server.as_str());
        let path = self.path.clone();
        let err = |source| StoreError::Write {
            path: path.clone(),
            server: server.to_owned(),
            what: "repeated observations",
            source: Box::new(source),
        };
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let mut out = Vec::with_capacity(repeats.len());
        for repeat in repeats {
            let server: Option<i64> = tx
                .prepare_cached(
                    "SELECT s.id FROM servers s
                     WHERE s.name = ?1 AND s.identity = ?2
                       AND (?3 IS NULL OR EXISTS (SELECT 1 FROM leases l
                            WHERE l.server = s.name AND l.holder = ?3 AND l.epoch = ?4))",
                )
                .and_then(|mut stmt| {
                    stmt.query_row(
                        params![
                            repeat.server,
                            repeat.identity,
                            repeat.lease.as_ref().map(|l| l.holder.as_str()),
                            repeat.lease.as_ref().map(|l| l.epoch),
                        ],
                        |row| row.get(0),
                    )
                    .optional()
                })
                .map_err(err)?;
            let Some(server_id) = server else {
                out.push(None);
                continue;
            };
            let inserted = tx
                .prepare_cached(
                    "INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome,
                         error, protocol_version, server_info_id, capabilities_id, instructions_id,
                         tool_set_id, authorization_id)
                     SELECT p.server_id, ?3, ?4, p.outcome, p.error, p.protocol_version,
                         p.server_info_id, p.capabilities_id, p.instructions_id, p.tool_set_id,
                         p.authorization_id
                     FROM observations p
                     WHERE p.id = ?2 AND p.server_id = ?1 AND p.outcome = 'ok'
                       AND p.id = (SELECT max(id) FROM observations WHERE server_id = ?1)
                       AND NOT EXISTS (SELECT 1 FROM observation_problems WHERE observation_id = p.id)",
                )
                .and_then(|mut stmt| {
                    stmt.execute(params![
                        server_id,
                        repeat.previous.0,
                        repeat.started_at_ms,
                        repeat.finished_at_ms
                    ])
                })
                .map_err(err)?;
            out.push((inserted > 0).then(|| ObservationId(tx.last_insert_rowid())));
        }
        tx.commit().map_err(err)?;
        Ok(out)
    }

    pub(super) fn claim(&mut self, claim: &LeaseClaim) -> Result<Vec<Lease>, StoreError> {
        let err = leases_err(&self.path);
        let expires = claim.now_ms.saturating_add(claim.lease_ms);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        tx.prepare_cached(
            "INSERT INTO watchers (holder, last_seen_ms, expires_at_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (holder) DO UPDATE SET last_seen_ms = excluded.last_seen_ms,
                 expires_at_ms = excluded.expires_at_ms",
        )
        .and_then(|mut stmt| stmt.execute(params![claim.holder, claim.now_ms, expires]))
        .map_err(&err)?;
        // Watchers gone for ten leases are forgotten (their leases read as
        // free without them).
        tx.prepare_cached("DELETE FROM watchers WHERE expires_at_ms < ?1")
            .and_then(|mut stmt| {
                stmt.execute([claim
                    .now_ms
                    .saturating_sub(claim.lease_ms.saturating_mul(10))])
            })
            .map_err(&err)?;
        // Every server at once (a claim of a thousand servers is one
        // statement, not a thousand), as a JSON array.
        let servers = serde_json::to_string(&claim.servers).expect("strings serialise");
        tx.prepare_cached(
            "INSERT INTO leases (server) SELECT value FROM json_each(?1) WHERE true
             ON CONFLICT DO NOTHING",
        )
        .and_then(|mut stmt| stmt.execute([servers]))
        .map_err(&err)?;
        let live: i64 = tx
            .prepare_cached("SELECT count(*) FROM watchers WHERE last_seen_ms >= ?1")
            .and_then(|mut stmt| stmt.query_row([claim.live_from()], |row| row.get(0)))
            .map_err(&err)?;
        let rows: Vec<Lease> = tx
            .prepare_cached(&format!("{LEASES} ORDER BY l.server"))
            .and_then(|mut stmt| stmt.query_map([], read_lease)?.collect())
            .map_err(&err)?;
        for write in decide(claim, &rows, live.max(1) as u64) {
            match write {
                // Renewed with the watcher's row, above.
                LeaseWrite::Renew(_) => Ok(0),
                LeaseWrite::Take(server, epoch) => tx
                    .prepare_cached(
                        "UPDATE leases SET holder = ?2, epoch = ?3, expires_at_ms = ?4
                         WHERE server = ?1",
                    )
                    .and_then(|mut stmt| {
                        stmt.execute(params![server, claim.holder, epoch, expires])
                    }),
                LeaseWrite::Release(server) => tx
                    .prepare_cached(
                        "UPDATE leases SET holder = NULL, expires_at_ms = 0 WHERE server = ?1",
                    )
                    .and_then(|mut stmt| stmt.execute([server])),
            }
            .map_err(&err)?;
        }
        let held: Vec<Lease> = tx
            .prepare_cached(&format!("{LEASES} WHERE l.holder = ?1 ORDER BY l.server"))
            .and_then(|mut stmt| stmt.query_map([&claim.holder], read_lease)?.collect())
            .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(held)
    }

    pub(super) fn release(&mut self, holder: &str) -> Result<u64, StoreError> {
        let err = leases_err(&self.path);
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(&err)?;
        let released = tx
            .execute(
                "UPDATE leases SET holder = NULL, expires_at_ms = 0 WHERE holder = ?1",
                [holder],
            )
            .map_err(&err)?;
        tx.execute("DELETE FROM watchers WHERE holder = ?1", [holder])
            .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(released as u64)
    }

    pub(super) fn lease_rows(&self) -> Result<Vec<Lease>, StoreError> {
        self.conn
            .prepare_cached(&format!("{LEASES} ORDER BY l.server"))
            .and_then(|mut stmt| stmt.query_map([], read_lease)?.collect())
            .map_err(|source| self.read_err("the leases", source))
    }

    pub(super) fn claim_alerts(
        &mut self,
        channel: &str,
        now_ms: i64,
        claim_ms: i64,
        limit: u32,
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        let path = self.path.clone();
        let err = |source| StoreError::Write {
            path: path.clone(),
            server: String::new(),
            what: "the alerts being delivered",
            source: Box::new(source),
        };
        // One IMMEDIATE transaction: read what is due, then push it out.
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(err)?;
        let ids: Vec<i64> = tx
            .prepare_cached(
                "SELECT id FROM alerts
                 WHERE channel = ?1 AND delivered_at_ms IS NULL AND failed_at_ms IS NULL
                   AND next_attempt_at_ms <= ?2
                 ORDER BY next_attempt_at_ms, id LIMIT ?3",
            )
            .and_then(|mut stmt| {
                stmt.query_map(params![channel, now_ms, limit], |row| row.get(0))?
                    .collect()
            })
            .map_err(err)?;
        {
            let mut push = tx
                .prepare_cached("UPDATE alerts SET next_attempt_at_ms = ?2 WHERE id = ?1")
                .map_err(err)?;
            for id in &ids {
                push.execute(params![id, now_ms.saturating_add(claim_ms)])
                    .map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        let mut claimed = Vec::with_capacity(ids.len());
        for id in ids {
            claimed.extend(self.outbox(
                "WHERE a.id = ?1",
                [id],
                format!("alert {id} of channel {channel:?}"),
            )?);
        }
        Ok(claimed)
    }
}
