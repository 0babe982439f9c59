//! Writes: an observation with its content (each stored once by digest),
//! servers, derived data, and the outbox.
//!
//! Content is inserted with `ON CONFLICT (digest) DO NOTHING RETURNING
//! id`, then read when another writer had it first: under READ
//! COMMITTED the insert waits for a concurrent one of the same digest and
//! the read that follows sees it committed, so two watchers storing the
//! same tool at once both succeed and it is stored once.

use std::collections::HashMap;

use postgres::types::ToSql;
use postgres::Transaction;

use super::{Db, Session};
use crate::lease::LeaseToken;
use crate::listing::{check_observation, entries, inventory_text, tool_set_digest, Entry};
use crate::model::{AlertId, NewAlert, NewObservation, ObservationId, Outcome};
use crate::{canonicalize, digest, Digest, StoreError};

type Tx<'a> = Db<'a, Transaction<'a>>;

/// The id of the content row with digest `key` in `table` (whose columns
/// after `digest` are `columns`), inserted with `values` when absent.
fn put_content(
    tx: &mut Tx<'_>,
    insert: &str,
    select: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Result<i64, postgres::Error> {
    if let Some(row) = tx.query_opt(insert, params)? {
        return row.try_get(0);
    }
    tx.query_one(select, &params[..1])?.try_get(0)
}

/// Stores a document (`body`, whose digest is `key`) unless already
/// present (`known`); returns its row id.
fn put_document(
    tx: &mut Tx<'_>,
    known: &mut HashMap<Digest, i64>,
    key: Digest,
    body: &[u8],
) -> Result<i64, postgres::Error> {
    if let Some(id) = known.get(&key) {
        return Ok(*id);
    }
    let id = put_content(
        tx,
        "INSERT INTO documents (digest, body) VALUES ($1, $2)
         ON CONFLICT (digest) DO NOTHING RETURNING id",
        "SELECT id FROM documents WHERE digest = $1",
        &[&&key.as_bytes()[..], &body],
    )?;
    known.insert(key, id);
    Ok(id)
}

/// A raw tool as stored: its row id and canonical digest.
type Stored = (i64, Option<Digest>);

/// What the store holds of a listing's content: raw tools and documents
/// by digest.
type Known = (HashMap<Digest, Stored>, HashMap<Digest, i64>);

/// What the store already holds of a listing's content: the raw tools
/// among `tools` and the documents among `documents`, read in one
/// statement. An observation of tools the store has seen before (another
/// endpoint's, or this one's before a restart) costs one round trip for
/// its content, not one or two per tool and document.
fn known_contents(
    tx: &mut Tx<'_>,
    tools: &[Digest],
    documents: &[Digest],
) -> Result<Known, postgres::Error> {
    fn keys(ds: &[Digest]) -> Vec<&[u8]> {
        ds.iter().map(|d| &d.as_bytes()[..]).collect()
    }
    let rows = tx.query(
        "SELECT false, r.digest, r.id, v.digest FROM raw_tools r
         LEFT JOIN tool_versions v ON v.id = r.tool_version_id
         WHERE r.digest = ANY($1)
         UNION ALL
         SELECT true, digest, id, NULL FROM documents WHERE digest = ANY($2)",
        &[&keys(tools), &keys(documents)],
    )?;
    let mut known = HashMap::with_capacity(rows.len());
    let mut known_documents = HashMap::new();
    for row in rows {
        let document: bool = row.try_get(0)?;
        let stored: Vec<u8> = row.try_get(1)?;
        // A stored digest of the wrong length cannot come from this code;
        // treat it as "not stored" (or "no canonical form") rather than
        // fail the observation.
        let Some(stored) = Digest::from_slice(&stored) else {
            continue;
        };
        if document {
            known_documents.insert(stored, row.try_get(2)?);
            continue;
        }
        let canonical: Option<Vec<u8>> = row.try_get(3)?;
        known.insert(
            stored,
            (
                row.try_get(2)?,
                canonical.and_then(|c| Digest::from_slice(&c)),
            ),
        );
    }
    Ok((known, known_documents))
}

/// Stores a tool's raw bytes unless already present (`known`); returns
/// their row id and the digest of their canonical form (`None` when
/// malformed).
fn put_raw_tool(
    tx: &mut Tx<'_>,
    known: &mut HashMap<Digest, Stored>,
    raw: &[u8],
    raw_digest: &Digest,
) -> Result<Stored, postgres::Error> {
    if let Some(stored) = known.get(raw_digest) {
        return Ok(*stored);
    }
    let (tool_version_id, canonical_digest) = match canonicalize(raw) {
        Ok(canonical) => {
            let canonical_digest = digest(&canonical);
            let id = put_content(
                tx,
                "INSERT INTO tool_versions (digest, canonical) VALUES ($1, $2)
                 ON CONFLICT (digest) DO NOTHING RETURNING id",
                "SELECT id FROM tool_versions WHERE digest = $1",
                &[&&canonical_digest.as_bytes()[..], &canonical],
            )?;
            (Some(id), Some(canonical_digest))
        }
        Err(_) => (None, None),
    };
    let id = put_content(
        tx,
        "INSERT INTO raw_tools (digest, raw, tool_version_id) VALUES ($1, $2, $3)
         ON CONFLICT (digest) DO NOTHING RETURNING id",
        "SELECT id FROM raw_tools WHERE digest = $1",
        &[&&raw_digest.as_bytes()[..], &raw, &tool_version_id],
    )?;
    known.insert(*raw_digest, (id, canonical_digest));
    Ok((id, canonical_digest))
}

/// Stores a tool set unless already present; returns its row id.
fn put_tool_set(tx: &mut Tx<'_>, entries: &[Entry<'_>]) -> Result<i64, postgres::Error> {
    let set_digest = tool_set_digest(entries);
    let key = &set_digest.as_bytes()[..];
    if let Some(row) = tx.query_opt("SELECT id FROM tool_sets WHERE digest = $1", &[&key])? {
        return row.try_get(0);
    }
    let inserted = tx.query_opt(
        "INSERT INTO tool_sets (digest, tool_count) VALUES ($1, $2)
         ON CONFLICT (digest) DO NOTHING RETURNING id",
        &[&key, &(entries.len() as i64)],
    )?;
    let Some(row) = inserted else {
        // Another writer stored it (with its entries) first.
        return tx
            .query_one("SELECT id FROM tool_sets WHERE digest = $1", &[&key])?
            .try_get(0);
    };
    let id: i64 = row.try_get(0)?;
    for e in entries {
        let (n_id, by) = match &e.normalized {
            Some(n) => (Some(n.raw_tool_id), Some(n.by.as_str())),
            None => (None, None),
        };
        tx.execute(
            "INSERT INTO tool_set_entries
                 (tool_set_id, position, name, raw_tool_id, normalized_raw_tool_id, normalized_by)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &id,
                &i64::from(e.position),
                &e.name.map(str::as_bytes),
                &e.raw_tool_id,
                &n_id,
                &by,
            ],
        )?;
    }
    Ok(id)
}

/// Each entry's position, name, tool version id, and raw tool id when it
/// has no version (a malformed tool): what is compared.
type Versions = Vec<(i64, Option<Vec<u8>>, Option<i64>, Option<i64>)>;

fn versions_of(tx: &mut Tx<'_>, tool_set_id: i64) -> Result<Versions, postgres::Error> {
    tx.query(
        "SELECT e.position, e.name, COALESCE(nr.tool_version_id, r.tool_version_id),
                CASE WHEN r.tool_version_id IS NULL THEN r.id END
         FROM tool_set_entries e
         JOIN raw_tools r ON r.id = e.raw_tool_id
         LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
         WHERE e.tool_set_id = $1
         ORDER BY e.position",
        &[&tool_set_id],
    )?
    .iter()
    .map(|row| {
        Ok((
            row.try_get(0)?,
            row.try_get(1)?,
            row.try_get(2)?,
            row.try_get(3)?,
        ))
    })
    .collect()
}

/// The error of a write of `what` for `server` to the store at `label`.
fn write_error(
    label: &std::path::Path,
    server: &str,
    what: &'static str,
) -> impl Fn(postgres::Error) -> StoreError {
    let path = label.to_path_buf();
    let server = server.to_owned();
    move |source| StoreError::Write {
        path: path.clone(),
        server: server.clone(),
        what,
        source: Box::new(source),
    }
}

impl Session {
    pub(super) fn write_err(
        &self,
        server: &str,
        what: &'static str,
    ) -> impl Fn(postgres::Error) -> StoreError {
        write_error(&self.label, server, what)
    }

    pub(super) fn derived_err(&self, what: &'static str) -> impl Fn(postgres::Error) -> StoreError {
        let path = self.label.clone();
        move |source| StoreError::WriteDerived {
            path: path.clone(),
            what,
            source: Box::new(source),
        }
    }

    pub(super) fn put_server(&mut self, name: &str, identity: &str) -> Result<(), StoreError> {
        let canonical =
            canonicalize(identity.as_bytes()).map_err(|source| StoreError::InvalidIdentity {
                server: name.to_owned(),
                source: Box::new(source),
            })?;
        // The canonical form of valid UTF-8 JSON is valid UTF-8.
        let identity = String::from_utf8_lossy(&canonical).into_owned();
        let err = self.write_err(name, "the server");
        self.db()
            .and_then(|mut db| {
                db.execute(
                    "INSERT INTO servers (name, identity) VALUES ($1, $2)
                     ON CONFLICT (name) DO UPDATE SET identity = excluded.identity",
                    &[&name.as_bytes(), &identity],
                )
            })
            .map_err(err)?;
        Ok(())
    }

    pub(super) fn put_drift_summary(
        &mut self,
        old: &Digest,
        new: &Digest,
        grader: &str,
        summary: &[u8],
    ) -> Result<(), StoreError> {
        let err = self.derived_err("a drift summary");
        self.db()
            .and_then(|mut db| {
                db.execute(
                    "INSERT INTO drift_summaries (old_set, new_set, grader, summary)
                     VALUES ($1, $2, $3, $4)
                     ON CONFLICT (old_set, new_set, grader) DO UPDATE SET summary = excluded.summary",
                    &[&&old.as_bytes()[..], &&new.as_bytes()[..], &grader, &summary],
                )
            })
            .map_err(err)?;
        Ok(())
    }

    pub(super) fn put_inventory(
        &mut self,
        observation: ObservationId,
        names: &[String],
    ) -> Result<Digest, StoreError> {
        let (digest, text) = inventory_text(names);
        let err = self.derived_err("an inventory");
        let key = &digest.as_bytes()[..];
        let mut db = self.db().map_err(&err)?;
        let mut tx = db.transaction().map_err(&err)?;
        tx.execute(
            "INSERT INTO inventories (digest, names) VALUES ($1, $2)
             ON CONFLICT (digest) DO NOTHING",
            &[&key, &text],
        )
        .map_err(&err)?;
        tx.execute(
            "INSERT INTO observation_inventories (observation_id, inventory_id)
             SELECT $1, id FROM inventories WHERE digest = $2
             ON CONFLICT (observation_id) DO UPDATE SET inventory_id = excluded.inventory_id",
            &[&observation.0, &key],
        )
        .map_err(&err)?;
        tx.commit().map_err(&err)?;
        Ok(digest)
    }

    /// [`crate::Store::record_observation`], checking `lease` first when
    /// given.
    pub(super) fn record_observation(
        &mut self,
        observation: &NewObservation,
        lease: Option<&LeaseToken>,
    ) -> Result<ObservationId, StoreError> {
        check_observation(observation)?;
        let raw_digests: Vec<Digest> = observation.tools.iter().map(|t| digest(&t.raw)).collect();
        let server = observation.server.as_str();
        let err = |what| self.write_err(server, what);
        let (tx_err, lock_err, tools_err) = (
            err("a transaction"),
            err("the server's lock"),
            err("a tool's raw bytes"),
        );
        let names_err = err("the server's tool names");
        let (set_err, doc_err, obs_err, prev_err, change_err, problems_err, commit_err) = (
            err("the tool set"),
            err("a document"),
            err("the observation"),
            err("the previous observation"),
            err("the tool set change"),
            err("the problems"),
            err("the commit"),
        );
        let label = self.label.clone();
        let mut db = self.db().map_err(&tx_err)?;
        let mut tx = db.transaction().map_err(&tx_err)?;
        // The server's row, locked: its observations are recorded one at a
        // time, so each is compared with the one truly before it.
        let Some(row) = tx
            .query_opt(
                "SELECT id FROM servers WHERE name = $1 FOR UPDATE",
                &[&server.as_bytes()],
            )
            .map_err(&lock_err)?
        else {
            return Err(StoreError::UnknownServer {
                path: label,
                server: server.to_owned(),
            });
        };
        let server_id: i64 = row.try_get(0).map_err(&lock_err)?;
        if let Some(lease) = lease {
            // FOR SHARE: this write waits for a claim taking the lease (it
            // holds the row FOR UPDATE), and a claim under way meanwhile
            // skips the row (SKIP LOCKED; its holder counts it as its own).
            let current = tx
                .query_opt(
                    "SELECT holder, epoch FROM leases WHERE server = $1 FOR SHARE",
                    &[&server.as_bytes()],
                )
                .and_then(|row| {
                    row.map(|r| {
                        Ok::<_, postgres::Error>((
                            r.try_get::<_, Option<Vec<u8>>>(0)?,
                            r.try_get::<_, i64>(1)?,
                        ))
                    })
                    .transpose()
                })
                .map_err(&lock_err)?;
            let held = matches!(&current, Some((Some(holder), epoch))
                if holder.as_slice() == lease.holder.as_bytes() && *epoch == lease.epoch);
            if !held {
                return Err(StoreError::LeaseLost {
                    server: server.to_owned(),
                    epoch: lease.epoch,
                });
            }
        }

        // Every content the listing holds (sent and normalised), hashed
        // once: looked up at once, and what is new inserted in digest
        // order, so that two writers storing the same new tools never wait
        // on each other in a cycle.
        let contents: Vec<(Digest, &[u8])> = observation
            .tools
            .iter()
            .zip(&raw_digests)
            .map(|(t, d)| (*d, &t.raw[..]))
            .chain(
                observation
                    .tools
                    .iter()
                    .filter_map(|t| t.normalized.as_ref().map(|n| (digest(&n.raw), &n.raw[..]))),
            )
            .collect();
        let wanted: Vec<Digest> = contents.iter().map(|(d, _)| *d).collect();
        // The documents, each hashed once; `None` where there is none.
        let documents = [
            observation.server_info.as_deref(),
            observation.capabilities.as_deref(),
            observation.instructions.as_deref().map(str::as_bytes),
            observation.authorization.as_deref(),
        ]
        .map(|body| body.map(|b| (digest(b), b)));
        let document_digests: Vec<Digest> = documents.iter().flatten().map(|(d, _)| *d).collect();
        let (mut known, mut known_documents) =
            known_contents(&mut tx, &wanted, &document_digests).map_err(&tools_err)?;
        let mut fresh: Vec<(Digest, &[u8])> = contents
            .into_iter()
            .filter(|(d, _)| !known.contains_key(d))
            .collect();
        fresh.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        fresh.dedup_by(|a, b| a.0 == b.0);
        for (d, raw) in fresh {
            put_raw_tool(&mut tx, &mut known, raw, &d).map_err(&tools_err)?;
        }
        let (entries, problems) = entries(observation, &raw_digests, |raw, raw_digest| {
            put_raw_tool(&mut tx, &mut known, raw, raw_digest)
        })
        .map_err(|(what, source)| write_error(&label, server, what)(source))?;

        let tool_set_id = match observation.outcome {
            Outcome::Ok => Some(put_tool_set(&mut tx, &entries).map_err(&set_err)?),
            Outcome::Failed { .. } => None,
        };
        let [server_info_id, capabilities_id, instructions_id, authorization_id] = {
            let mut ids = [None; 4];
            // What is new, in digest order (as tools are).
            let mut order: Vec<usize> = (0..documents.len()).collect();
            order.sort_by_key(|&i| documents[i].map(|(d, _)| d));
            for i in order {
                if let Some((key, body)) = documents[i] {
                    ids[i] = Some(
                        put_document(&mut tx, &mut known_documents, key, body).map_err(&doc_err)?,
                    );
                }
            }
            ids
        };
        let error = observation.outcome.error().map(str::as_bytes);
        let id: i64 = tx
            .query_one(
                "INSERT INTO observations (server_id, started_at_ms, finished_at_ms, outcome,
                     error, protocol_version, server_info_id, capabilities_id, instructions_id,
                     tool_set_id, authorization_id)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id",
                &[
                    &server_id,
                    &observation.started_at_ms,
                    &observation.finished_at_ms,
                    &observation.outcome.as_str(),
                    &error,
                    &observation.protocol_version.as_deref().map(str::as_bytes),
                    &server_info_id,
                    &capabilities_id,
                    &instructions_id,
                    &tool_set_id,
                    &authorization_id,
                ],
            )
            .and_then(|row| row.try_get(0))
            .map_err(&obs_err)?;

        if let Some(set) = tool_set_id {
            let previous = tx
                .query_opt(
                    "SELECT id, tool_set_id FROM observations
                     WHERE server_id = $1 AND outcome = 'ok' AND id < $2
                     ORDER BY id DESC LIMIT 1",
                    &[&server_id, &id],
                )
                .and_then(|row| {
                    row.map(|r| Ok::<(i64, i64), postgres::Error>((r.try_get(0)?, r.try_get(1)?)))
                        .transpose()
                })
                .map_err(&prev_err)?;
            if let Some((previous_id, previous_set)) = previous {
                // A change of the tools as compared (see SQLite's).
                let changed = previous_set != set
                    && versions_of(&mut tx, previous_set).map_err(&prev_err)?
                        != versions_of(&mut tx, set).map_err(&prev_err)?;
                if changed {
                    tx.execute(
                        "INSERT INTO tool_set_changes (observation_id, server_id, previous_id)
                         VALUES ($1, $2, $3)",
                        &[&id, &server_id, &previous_id],
                    )
                    .map_err(&change_err)?;
                }
            }
            // The server's names are this listing's (see SQLite's).
            // One statement: the names this listing does not hold go, the
            // ones it adds come (those it keeps are left alone, so the two
            // parts never touch the same row).
            if previous.is_none_or(|(_, previous_set)| previous_set != set) {
                tx.execute(
                    "WITH kept AS (
                         SELECT name FROM tool_set_entries
                         WHERE tool_set_id = $2 AND name IS NOT NULL
                     ), gone AS (
                         DELETE FROM server_names
                         WHERE server_id = $1 AND name NOT IN (SELECT name FROM kept)
                     )
                     INSERT INTO server_names (server_id, name)
                     SELECT $1::bigint, name FROM kept
                     ON CONFLICT DO NOTHING",
                    &[&server_id, &set],
                )
                .map_err(&names_err)?;
            }
        }

        for (seq, p) in problems.iter().enumerate() {
            tx.execute(
                "INSERT INTO observation_problems
                     (observation_id, seq, kind, position, tool_name, message)
                 VALUES ($1, $2, $3, $4, $5, $6)",
                &[
                    &id,
                    &(seq as i64),
                    &p.kind.as_str(),
                    &p.position.map(i64::from),
                    &p.tool_name.as_deref().map(str::as_bytes),
                    &p.message.as_bytes(),
                ],
            )
            .map_err(&problems_err)?;
        }
        tx.commit().map_err(&commit_err)?;
        Ok(ObservationId(id))
    }

    /// [`crate::Store::record_repeats`], in one round trip: the function
    /// schema version 7 defines locks the servers' rows (and shares their
    /// leases) in one statement each, then inserts the copies in one, with
    /// a snapshot taken after the locks.
    pub(super) fn record_repeats(
        &mut self,
        repeats: &[crate::Repeat],
    ) -> Result<Vec<Option<ObservationId>>, StoreError> {
        if repeats.is_empty() {
            return Ok(Vec::new());
        }
        let err = self.write_err(&repeats[0].server, "repeated observations");
        // In the order of the servers' names: locks always taken alike.
        let mut order: Vec<usize> = (0..repeats.len()).collect();
        order.sort_by(|a, b| repeats[*a].server.cmp(&repeats[*b].server));
        let ordered: Vec<&crate::Repeat> = order.iter().map(|&i| &repeats[i]).collect();
        let servers: Vec<&[u8]> = ordered.iter().map(|r| r.server.as_bytes()).collect();
        let identities: Vec<&str> = ordered.iter().map(|r| r.identity.as_str()).collect();
        let previous: Vec<i64> = ordered.iter().map(|r| r.previous.0).collect();
        let started: Vec<i64> = ordered.iter().map(|r| r.started_at_ms).collect();
        let finished: Vec<i64> = ordered.iter().map(|r| r.finished_at_ms).collect();
        let holders: Vec<Option<&[u8]>> = ordered
            .iter()
            .map(|r| r.lease.as_ref().map(|l| l.holder.as_bytes()))
            .collect();
        let epochs: Vec<Option<i64>> = ordered
            .iter()
            .map(|r| r.lease.as_ref().map(|l| l.epoch))
            .collect();
        let ids: Vec<Option<i64>> = self
            .db()
            .and_then(|mut db| {
                db.query_one(
                    "SELECT plumbline_record_repeats($1, $2, $3, $4, $5, $6, $7)",
                    &[
                        &servers,
                        &identities,
                        &previous,
                        &started,
                        &finished,
                        &holders,
                        &epochs,
                    ],
                )
            })
            .and_then(|row| row.try_get(0))
            .map_err(&err)?;
        let mut out = vec![None; repeats.len()];
        for (at, id) in order.into_iter().zip(ids) {
            out[at] = id.map(ObservationId);
        }
        Ok(out)
    }

    pub(super) fn foreign_names(&mut self, server: &str) -> Result<Vec<String>, StoreError> {
        let what = "the other servers' tool names";
        let rows = self.rows(
            what,
            "SELECT DISTINCT n.name FROM server_names n JOIN servers s ON s.id = n.server_id
             WHERE s.name <> $1 ORDER BY n.name",
            &[&server.as_bytes()],
        )?;
        rows.iter()
            .map(|row| super::text(&self.label, self.get(row, 0, what)?, what))
            .collect()
    }

    pub(super) fn history_id(&mut self) -> Result<String, StoreError> {
        let what = "the history's id";
        match self.row(what, "SELECT id FROM history", &[])? {
            Some(row) => self.get(&row, 0, what),
            None => Err(self.corrupt("the store has no history id")),
        }
    }

    pub(super) fn enqueue_alert(
        &mut self,
        alert: &NewAlert,
    ) -> Result<Option<AlertId>, StoreError> {
        let server_id = self.server_id(&alert.server)?;
        let err = self.write_err(&alert.server, "an alert");
        let row = self
            .db()
            .and_then(|mut db| {
                db.query_opt(
                    "INSERT INTO alerts (server_id, observation_id, channel, key, body, created_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6)
                     ON CONFLICT (observation_id, channel, key) DO NOTHING RETURNING id",
                    &[
                        &server_id,
                        &alert.observation.0,
                        &alert.channel.as_bytes(),
                        &alert.key.as_bytes(),
                        &alert.body,
                        &alert.created_at_ms,
                    ],
                )
            })
            .map_err(&err)?;
        row.map(|row| row.try_get(0).map(AlertId))
            .transpose()
            .map_err(err)
    }

    pub(super) fn record_guard_event(
        &mut self,
        e: &crate::NewGuardEvent,
    ) -> Result<i64, StoreError> {
        let server_id = self.server_id(&e.server)?;
        let err = self.write_err(&e.server, "a guard event");
        let row = self
            .db()
            .and_then(|mut db| {
                db.query_one(
                    "INSERT INTO guard_events (server_id, at_ms, kind, tool, detail)
                     VALUES ($1, $2, $3, $4, $5) RETURNING id",
                    &[&server_id, &e.at_ms, &e.kind, &e.tool.as_bytes(), &e.detail],
                )
            })
            .map_err(&err)?;
        row.try_get(0).map_err(err)
    }

    pub(super) fn guard_events(
        &mut self,
        limit: u32,
    ) -> Result<Vec<crate::GuardEvent>, StoreError> {
        let what = "the guard events";
        let rows = self.rows(
            what,
            "SELECT g.id, s.name, g.at_ms, g.kind, g.tool, g.detail
             FROM guard_events g JOIN servers s ON s.id = g.server_id
             ORDER BY g.id DESC LIMIT $1",
            &[&i64::from(limit)],
        )?;
        rows.iter()
            .map(|row| {
                Ok(crate::GuardEvent {
                    id: self.get(row, 0, what)?,
                    server: super::text(&self.label, self.get(row, 1, what)?, what)?,
                    at_ms: self.get(row, 2, what)?,
                    kind: self.get(row, 3, what)?,
                    tool: super::text(&self.label, self.get(row, 4, what)?, what)?,
                    detail: self.get(row, 5, what)?,
                })
            })
            .collect()
    }

    /// Changes one alert with `sql` (its id is `$1`).
    pub(super) fn update_alert(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<(), StoreError> {
        let err = self.write_err("", "an alert");
        let changed = self
            .db()
            .and_then(|mut db| db.execute(sql, params))
            .map_err(err)?;
        if changed == 1 {
            Ok(())
        } else {
            Err(self.corrupt("no such alert"))
        }
    }

    pub(super) fn retire_alerts(
        &mut self,
        channel: &str,
        reason: &str,
        at_ms: i64,
    ) -> Result<u64, StoreError> {
        let err = self.write_err("", "the alerts of a channel");
        self.db()
            .and_then(|mut db| {
                db.execute(
                    "UPDATE alerts SET last_error = $2, failed_at_ms = $3
                     WHERE channel = $1 AND delivered_at_ms IS NULL AND failed_at_ms IS NULL",
                    &[&channel.as_bytes(), &reason.as_bytes(), &at_ms],
                )
            })
            .map_err(err)
    }
}
