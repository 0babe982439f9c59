//! Reads: servers, observations, timelines, tool histories, the outbox,
//! reviews and baselines. Each is one statement or a few, as SQLite's.

use std::collections::{BTreeMap, HashMap};

use postgres::types::ToSql;
use postgres::Row;

use super::{opt_text, read_err, text, Session};
use crate::listing::{implicit_baseline, tool_history, SummaryRow, ToolState};
use crate::model::{
    AlertCounts, AlertId, Baseline, BaselineTool, Normalized, Observation, ObservationId,
    ObservationSummary, OutboxAlert, Problem, ProblemKind, Review, ReviewStatus, Server, ToolEntry,
    ToolHistoryEntry,
};
use crate::{Digest, StoreError};

/// An observation's summary columns, over `observations o`.
const SUMMARY: &str = "SELECT o.id, s.name, o.started_at_ms, o.finished_at_ms, o.outcome, o.error,
        o.protocol_version, ts.digest, ts.tool_count,
        (SELECT count(*) FROM observation_problems p WHERE p.observation_id = o.id),
        ad.digest
 FROM observations o
 JOIN servers s ON s.id = o.server_id
 LEFT JOIN tool_sets ts ON ts.id = o.tool_set_id
 LEFT JOIN documents ad ON ad.id = o.authorization_id";

/// An alert's columns, over `alerts a`.
const OUTBOX: &str = "SELECT a.id, s.name, a.observation_id, a.channel, a.key, a.body,
        a.created_at_ms, a.attempts, a.last_error, a.next_attempt_at_ms, a.delivered_at_ms,
        a.failed_at_ms
 FROM alerts a JOIN servers s ON s.id = a.server_id";

impl Session {
    pub(super) fn read_err(&self, what: impl Into<String>, source: postgres::Error) -> StoreError {
        read_err(&self.label, what, source)
    }

    pub(super) fn corrupt(&self, detail: impl Into<String>) -> StoreError {
        StoreError::Corrupt {
            path: self.label.clone(),
            detail: detail.into(),
        }
    }

    pub(super) fn digest_from(&self, bytes: &[u8], what: &str) -> Result<Digest, StoreError> {
        Digest::from_slice(bytes)
            .ok_or_else(|| self.corrupt(format!("{what} has a digest of {} bytes", bytes.len())))
    }

    /// Rows of `sql`, or a read error naming `what`.
    pub(super) fn rows(
        &mut self,
        what: impl Into<String>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, StoreError> {
        let found = self.db().and_then(|mut db| db.query(sql, params));
        found.map_err(|source| self.read_err(what, source))
    }

    /// The one row of `sql`, if any.
    pub(super) fn row(
        &mut self,
        what: impl Into<String>,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, StoreError> {
        let found = self.db().and_then(|mut db| db.query_opt(sql, params));
        found.map_err(|source| self.read_err(what, source))
    }

    /// Column `i` of `row`, or a read error naming `what`.
    pub(super) fn get<'r, T: postgres::types::FromSql<'r>>(
        &self,
        row: &'r Row,
        i: usize,
        what: &str,
    ) -> Result<T, StoreError> {
        row.try_get(i).map_err(|source| self.read_err(what, source))
    }

    pub(super) fn server_id(&mut self, server: &str) -> Result<i64, StoreError> {
        let what = format!("server {server:?}");
        match self.row(
            &what,
            "SELECT id FROM servers WHERE name = $1",
            &[&server.as_bytes()],
        )? {
            Some(row) => self.get(&row, 0, &what),
            None => Err(StoreError::UnknownServer {
                path: self.label.clone(),
                server: server.to_owned(),
            }),
        }
    }

    fn to_server(&self, row: &Row, what: &str) -> Result<Server, StoreError> {
        Ok(Server {
            name: text(&self.label, self.get(row, 0, what)?, what)?,
            identity: self.get(row, 1, what)?,
        })
    }

    pub(super) fn servers(&mut self) -> Result<Vec<Server>, StoreError> {
        let what = "the servers";
        let rows = self.rows(
            what,
            "SELECT name, identity FROM servers ORDER BY name",
            &[],
        )?;
        rows.iter().map(|row| self.to_server(row, what)).collect()
    }

    pub(super) fn server(&mut self, name: &str) -> Result<Option<Server>, StoreError> {
        let what = format!("server {name:?}");
        let row = self.row(
            &what,
            "SELECT name, identity FROM servers WHERE name = $1",
            &[&name.as_bytes()],
        )?;
        row.map(|row| self.to_server(&row, &what)).transpose()
    }

    /// Summaries matching `filter` (a SQL condition on `o`), in `order`.
    pub(super) fn summaries(
        &mut self,
        what: &str,
        filter: &str,
        order_and_limit: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<ObservationSummary>, StoreError> {
        let sql = format!("{SUMMARY} WHERE {filter} {order_and_limit}");
        let rows = self.rows(what, &sql, params)?;
        rows.iter()
            .map(|row| {
                let summary = SummaryRow {
                    id: self.get(row, 0, what)?,
                    server: text(&self.label, self.get(row, 1, what)?, what)?,
                    started_at_ms: self.get(row, 2, what)?,
                    finished_at_ms: self.get(row, 3, what)?,
                    outcome: self.get(row, 4, what)?,
                    error: opt_text(&self.label, self.get(row, 5, what)?, what)?,
                    protocol_version: opt_text(&self.label, self.get(row, 6, what)?, what)?,
                    tool_set: self.get(row, 7, what)?,
                    tool_count: self.get(row, 8, what)?,
                    problem_count: self.get(row, 9, what)?,
                    authorization: self.get(row, 10, what)?,
                };
                summary.into_summary(&self.label)
            })
            .collect()
    }

    pub(super) fn timeline(
        &mut self,
        server: &str,
        limit: u32,
    ) -> Result<Vec<ObservationSummary>, StoreError> {
        let server_id = self.server_id(server)?;
        self.summaries(
            &format!("the timeline of server {server:?}"),
            "o.server_id = $1",
            "ORDER BY o.id DESC LIMIT $2",
            &[&server_id, &i64::from(limit)],
        )
    }

    pub(super) fn tool_set_changes(
        &mut self,
        server: &str,
    ) -> Result<Vec<(ObservationSummary, ObservationSummary)>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the tool set changes of server {server:?}");
        let rows = self.rows(
            &what,
            "SELECT observation_id, previous_id FROM tool_set_changes
             WHERE server_id = $1 ORDER BY observation_id",
            &[&server_id],
        )?;
        let pairs = rows
            .iter()
            .map(|row| {
                Ok((
                    self.get::<i64>(row, 0, &what)?,
                    self.get::<i64>(row, 1, &what)?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        // Both sides of every change, read at once.
        let by_id: HashMap<i64, ObservationSummary> = self
            .summaries(
                &what,
                "o.id IN (SELECT observation_id FROM tool_set_changes WHERE server_id = $1
                          UNION SELECT previous_id FROM tool_set_changes WHERE server_id = $1)",
                "",
                &[&server_id],
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

    pub(super) fn observation_summary(
        &mut self,
        id: ObservationId,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        Ok(self
            .summaries(&format!("observation {id}"), "o.id = $1", "", &[&id.0])?
            .into_iter()
            .next())
    }

    pub(super) fn observation(
        &mut self,
        id: ObservationId,
    ) -> Result<Option<Observation>, StoreError> {
        let what = format!("observation {id}");
        let Some(summary) = self
            .summaries(&what, "o.id = $1", "", &[&id.0])?
            .into_iter()
            .next()
        else {
            return Ok(None);
        };
        let Some(row) = self.row(
            &what,
            "SELECT si.body, c.body, i.body, a.body FROM observations o
             LEFT JOIN documents si ON si.id = o.server_info_id
             LEFT JOIN documents c ON c.id = o.capabilities_id
             LEFT JOIN documents i ON i.id = o.instructions_id
             LEFT JOIN documents a ON a.id = o.authorization_id
             WHERE o.id = $1",
            &[&id.0],
        )?
        else {
            return Err(self.corrupt(format!("{what} vanished while it was read")));
        };
        let server_info: Option<Vec<u8>> = self.get(&row, 0, &what)?;
        let capabilities: Option<Vec<u8>> = self.get(&row, 1, &what)?;
        let authorization: Option<Vec<u8>> = self.get(&row, 3, &what)?;
        let instructions = match self.get::<Option<Vec<u8>>>(&row, 2, &what)? {
            None => None,
            Some(bytes) => Some(
                String::from_utf8(bytes)
                    .map_err(|_| self.corrupt(format!("{what} has instructions not in UTF-8")))?,
            ),
        };

        let tools_what = format!("the tools of {what}");
        let rows = self.rows(
            &tools_what,
            "SELECT e.position, e.name, r.digest, COALESCE(nv.digest, v.digest),
                    nr.digest, e.normalized_by
             FROM observations o
             JOIN tool_set_entries e ON e.tool_set_id = o.tool_set_id
             JOIN raw_tools r ON r.id = e.raw_tool_id
             LEFT JOIN tool_versions v ON v.id = r.tool_version_id
             LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
             LEFT JOIN tool_versions nv ON nv.id = nr.tool_version_id
             WHERE o.id = $1
             ORDER BY e.position",
            &[&id.0],
        )?;
        let mut tools = Vec::with_capacity(rows.len());
        for row in &rows {
            let position: i64 = self.get(row, 0, &tools_what)?;
            let name = opt_text(&self.label, self.get(row, 1, &tools_what)?, &tools_what)?;
            let raw: Vec<u8> = self.get(row, 2, &tools_what)?;
            let canonical: Option<Vec<u8>> = self.get(row, 3, &tools_what)?;
            let normalized: Option<Vec<u8>> = self.get(row, 4, &tools_what)?;
            let by: Option<String> = self.get(row, 5, &tools_what)?;
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

        let problems_what = format!("the problems of {what}");
        let rows = self.rows(
            &problems_what,
            "SELECT position, kind, tool_name, message FROM observation_problems
             WHERE observation_id = $1 ORDER BY seq",
            &[&id.0],
        )?;
        let mut problems = Vec::with_capacity(rows.len());
        for row in &rows {
            let position: Option<i64> = self.get(row, 0, &problems_what)?;
            let kind: String = self.get(row, 1, &problems_what)?;
            let kind = ProblemKind::from_stored(&kind)
                .ok_or_else(|| self.corrupt(format!("{what} has a problem of kind {kind:?}")))?;
            problems.push(Problem {
                position: position
                    .map(|p| {
                        u32::try_from(p)
                            .map_err(|_| self.corrupt(format!("{what} has a problem at {p}")))
                    })
                    .transpose()?,
                kind,
                tool_name: opt_text(&self.label, self.get(row, 2, &problems_what)?, &what)?,
                message: text(&self.label, self.get(row, 3, &problems_what)?, &what)?,
            });
        }

        Ok(Some(Observation {
            summary,
            server_info,
            capabilities,
            instructions,
            authorization,
            tools,
            problems,
        }))
    }

    pub(super) fn latest_successful(
        &mut self,
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

    pub(super) fn latest_authorization(
        &mut self,
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

    /// The server's latest observation before `before` (or overall) that
    /// meets `condition` (SQL on `o`).
    fn latest_where(
        &mut self,
        server: &str,
        before: Option<ObservationId>,
        condition: &str,
        what: &str,
    ) -> Result<Option<ObservationSummary>, StoreError> {
        let server_id = self.server_id(server)?;
        let before = before.map_or(i64::MAX, |id| id.0);
        let found = self.summaries(
            &format!("{what} of server {server:?}"),
            &format!("o.server_id = $1 AND o.id < $2 AND {condition}"),
            "ORDER BY o.id DESC LIMIT 1",
            &[&server_id, &before],
        )?;
        Ok(found.into_iter().next())
    }

    /// The bytes of the one column of the row `sql` finds by `key`.
    pub(super) fn bytes_by_digest(
        &mut self,
        what: String,
        sql: &str,
        key: &Digest,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        let row = self.row(&what, sql, &[&&key.as_bytes()[..]])?;
        row.map(|row| self.get(&row, 0, &what)).transpose()
    }

    /// The state of the first tool called `tool` in a tool set (a later
    /// duplicate is a recorded problem, not a second version).
    fn tool_state(
        &mut self,
        tool_set_id: i64,
        tool: &str,
        what: &str,
    ) -> Result<ToolState, StoreError> {
        let row = self.row(
            what,
            "SELECT COALESCE(nv.digest, v.digest)
             FROM tool_set_entries e
             JOIN raw_tools r ON r.id = e.raw_tool_id
             LEFT JOIN tool_versions v ON v.id = r.tool_version_id
             LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
             LEFT JOIN tool_versions nv ON nv.id = nr.tool_version_id
             WHERE e.tool_set_id = $1 AND e.name = $2
             ORDER BY e.position LIMIT 1",
            &[&tool_set_id, &tool.as_bytes()],
        )?;
        Ok(match row {
            None => ToolState::Absent,
            Some(row) => match self.get::<Option<Vec<u8>>>(&row, 0, what)? {
                None => ToolState::Present(None),
                Some(bytes) => ToolState::Present(Some(self.digest_from(&bytes, what)?)),
            },
        })
    }

    pub(super) fn tool_history(
        &mut self,
        server: &str,
        tool: &str,
    ) -> Result<Vec<ToolHistoryEntry>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the history of tool {tool:?} of server {server:?}");
        let rows = self.rows(
            &what,
            "SELECT id, finished_at_ms, tool_set_id FROM observations
             WHERE server_id = $1 AND outcome = 'ok' ORDER BY id",
            &[&server_id],
        )?;
        let observations = rows
            .iter()
            .map(|row| {
                Ok((
                    self.get::<i64>(row, 0, &what)?,
                    self.get::<i64>(row, 1, &what)?,
                    self.get::<i64>(row, 2, &what)?,
                ))
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        tool_history(observations, |set| self.tool_state(set, tool, &what))
    }

    /// Alerts of the outbox selected by `tail` (a `WHERE … ORDER BY …
    /// LIMIT …` over `alerts a`).
    pub(super) fn outbox(
        &mut self,
        what: impl Into<String>,
        tail: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<OutboxAlert>, StoreError> {
        let what = what.into();
        let rows = self.rows(&what, &format!("{OUTBOX} {tail}"), params)?;
        rows.iter()
            .map(|row| {
                Ok(OutboxAlert {
                    id: AlertId(self.get(row, 0, &what)?),
                    server: text(&self.label, self.get(row, 1, &what)?, &what)?,
                    observation: ObservationId(self.get(row, 2, &what)?),
                    channel: text(&self.label, self.get(row, 3, &what)?, &what)?,
                    key: text(&self.label, self.get(row, 4, &what)?, &what)?,
                    body: self.get(row, 5, &what)?,
                    created_at_ms: self.get(row, 6, &what)?,
                    attempts: {
                        let n: i64 = self.get(row, 7, &what)?;
                        u32::try_from(n).map_err(|_| {
                            self.corrupt(format!("{what}: an alert has {n} attempts"))
                        })?
                    },
                    last_error: opt_text(&self.label, self.get(row, 8, &what)?, &what)?,
                    next_attempt_at_ms: self.get(row, 9, &what)?,
                    delivered_at_ms: self.get(row, 10, &what)?,
                    failed_at_ms: self.get(row, 11, &what)?,
                })
            })
            .collect()
    }

    pub(super) fn next_alert_due(&mut self, channel: &str) -> Result<Option<i64>, StoreError> {
        let what = format!("the alerts of channel {channel:?}");
        let row = self.row(
            &what,
            "SELECT min(next_attempt_at_ms) FROM alerts
             WHERE channel = $1 AND delivered_at_ms IS NULL AND failed_at_ms IS NULL",
            &[&channel.as_bytes()],
        )?;
        match row {
            Some(row) => self.get(&row, 0, &what),
            None => Ok(None),
        }
    }

    pub(super) fn alert_counts(&mut self) -> Result<AlertCounts, StoreError> {
        let what = "the alert counts";
        let row = self.row(
            what,
            "SELECT count(*) FILTER (WHERE delivered_at_ms IS NULL AND failed_at_ms IS NULL),
                    count(*) FILTER (WHERE failed_at_ms IS NOT NULL),
                    count(*) FILTER (WHERE delivered_at_ms IS NOT NULL)
             FROM alerts",
            &[],
        )?;
        let Some(row) = row else {
            return Ok(AlertCounts::default());
        };
        let count = |i| self.get::<i64>(&row, i, what).map(|n| n.max(0) as u64);
        Ok(AlertCounts {
            pending: count(0)?,
            failed: count(1)?,
            delivered: count(2)?,
        })
    }

    pub(super) fn pending_alert_channels(&mut self) -> Result<Vec<(String, u64)>, StoreError> {
        let what = "the channels of pending alerts";
        let rows = self.rows(
            what,
            "SELECT channel, count(*) FROM alerts
             WHERE delivered_at_ms IS NULL AND failed_at_ms IS NULL
             GROUP BY channel ORDER BY channel",
            &[],
        )?;
        rows.iter()
            .map(|row| {
                Ok((
                    text(&self.label, self.get(row, 0, what)?, what)?,
                    self.get::<i64>(row, 1, what)?.max(0) as u64,
                ))
            })
            .collect()
    }

    pub(super) fn alerted_since(
        &mut self,
        server: &str,
        key: &str,
        after: Option<ObservationId>,
    ) -> Result<Vec<String>, StoreError> {
        let what = "the channels told of a failure";
        let rows = self.rows(
            what,
            "SELECT DISTINCT a.channel FROM alerts a JOIN servers s ON s.id = a.server_id
             WHERE s.name = $1 AND a.key = $2 AND a.observation_id > $3
             ORDER BY a.channel",
            &[
                &server.as_bytes(),
                &key.as_bytes(),
                &after.map_or(0, |a| a.0),
            ],
        )?;
        rows.iter()
            .map(|row| text(&self.label, self.get(row, 0, what)?, what))
            .collect()
    }

    pub(super) fn reviews(&mut self, server: &str) -> Result<Vec<Review>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the reviews of server {server:?}");
        let rows = self.rows(
            &what,
            "SELECT r.observation_id, r.tool_name, r.status, r.reviewer, r.at_ms, r.note
             FROM reviews r JOIN observations o ON o.id = r.observation_id
             WHERE o.server_id = $1
             ORDER BY r.observation_id, r.tool_name",
            &[&server_id],
        )?;
        rows.iter()
            .map(|row| {
                let status: String = self.get(row, 2, &what)?;
                let status = ReviewStatus::from_stored(&status).ok_or_else(|| {
                    self.corrupt(format!("{what}: a review has status {status:?}"))
                })?;
                Ok(Review {
                    observation: ObservationId(self.get(row, 0, &what)?),
                    tool: text(&self.label, self.get(row, 1, &what)?, &what)?,
                    status,
                    reviewer: text(&self.label, self.get(row, 3, &what)?, &what)?,
                    at_ms: self.get(row, 4, &what)?,
                    note: opt_text(&self.label, self.get(row, 5, &what)?, &what)?,
                })
            })
            .collect()
    }

    pub(super) fn baseline(&mut self, server: &str) -> Result<Option<Baseline>, StoreError> {
        let server_id = self.server_id(server)?;
        let what = format!("the baseline of server {server:?}");
        let explicit = self
            .row(
                &what,
                "SELECT EXISTS (SELECT 1 FROM baseline_servers WHERE server_id = $1)",
                &[&server_id],
            )?
            .map(|row| self.get::<bool>(&row, 0, &what))
            .transpose()?
            .unwrap_or(false);
        let mut tools = BTreeMap::new();
        if explicit {
            let rows = self.rows(
                &what,
                "SELECT b.tool_name, v.digest, b.observation_id, b.accepted_by, b.accepted_at_ms
                 FROM baselines b JOIN tool_versions v ON v.id = b.tool_version_id
                 WHERE b.server_id = $1 ORDER BY b.tool_name",
                &[&server_id],
            )?;
            for row in &rows {
                let digest: Vec<u8> = self.get(row, 1, &what)?;
                tools.insert(
                    text(&self.label, self.get(row, 0, &what)?, &what)?,
                    BaselineTool {
                        canonical_digest: self.digest_from(&digest, &what)?,
                        observation: ObservationId(self.get(row, 2, &what)?),
                        accepted_by: opt_text(&self.label, self.get(row, 3, &what)?, &what)?,
                        accepted_at_ms: self.get(row, 4, &what)?,
                    },
                );
            }
        } else {
            let Some(first) = self
                .summaries(
                    &what,
                    "o.server_id = $1 AND o.outcome = 'ok'",
                    "ORDER BY o.id LIMIT 1",
                    &[&server_id],
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
