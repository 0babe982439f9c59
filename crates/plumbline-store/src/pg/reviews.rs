//! Reviews and baselines, as SQLite's: every verdict of one call (and, for
//! acceptances, its baseline edits) in one transaction. Each verdict locks
//! its server's row first, so two dashboards accepting changes of one
//! server at once take turns instead of both materialising its baseline.

use postgres::Transaction;

use super::{Db, Session};
use crate::model::{BaselineEdit, NewReview, ReviewStatus};
use crate::StoreError;

type Tx<'a> = Db<'a, Transaction<'a>>;

impl Session {
    /// Records each verdict (with its baseline edits, for acceptances) in
    /// one transaction: all of them, or none when any is refused.
    pub(super) fn write_reviews(
        &mut self,
        status: ReviewStatus,
        items: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError> {
        let label = self.label.clone();
        let err = self.write_err("", "a transaction");
        let commit_err = self.write_err("", "the commit");
        let mut db = self.db().map_err(&err)?;
        let mut tx = db.transaction().map_err(&err)?;
        for (review, edits) in items {
            apply_review(&mut tx, &label, review, status, edits)?;
        }
        tx.commit().map_err(commit_err)
    }
}

/// One verdict within `tx`: checks the observation, applies the edits (for
/// an acceptance) and records the review.
fn apply_review(
    tx: &mut Tx<'_>,
    label: &std::path::Path,
    review: &NewReview,
    status: ReviewStatus,
    edits: &[BaselineEdit],
) -> Result<(), StoreError> {
    let invalid = |reason: &str| StoreError::InvalidReview {
        observation: review.observation,
        tool: review.tool.clone(),
        reason: reason.to_owned(),
    };
    let target = tx
        .query_opt(
            "SELECT o.server_id, s.name, o.outcome
             FROM observations o JOIN servers s ON s.id = o.server_id
             WHERE o.id = $1
             FOR UPDATE OF s",
            &[&review.observation.0],
        )
        .and_then(|row| {
            row.map(|r| {
                Ok::<_, postgres::Error>((
                    r.try_get::<_, i64>(0)?,
                    r.try_get::<_, Vec<u8>>(1)?,
                    r.try_get::<_, String>(2)?,
                ))
            })
            .transpose()
        })
        .map_err(|source| StoreError::Read {
            path: label.to_path_buf(),
            what: format!("observation {}", review.observation),
            source: Box::new(source),
        })?;
    let Some((server_id, server, outcome)) = target else {
        return Err(invalid("there is no such observation"));
    };
    let server = String::from_utf8_lossy(&server).into_owned();
    let write_err = |what: &'static str| {
        let path = label.to_path_buf();
        let server = server.clone();
        move |source: postgres::Error| StoreError::Write {
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
        materialise_baseline(tx, server_id, review.at_ms)
            .map_err(write_err("the implicit baseline"))?;
        // Accepting an older change after a newer one must not roll
        // the baseline back behind the reviewer's back.
        for edit in edits {
            let (BaselineEdit::Set { tool, .. } | BaselineEdit::Remove { tool }) = edit;
            let held: Option<i64> = tx
                .query_opt(
                    "SELECT observation_id FROM baselines
                     WHERE server_id = $1 AND tool_name = $2",
                    &[&server_id, &tool.as_bytes()],
                )
                .and_then(|row| row.map(|r| r.try_get(0)).transpose())
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
                        .query_opt(
                            "SELECT id FROM tool_versions WHERE digest = $1",
                            &[&&canonical_digest.as_bytes()[..]],
                        )
                        .and_then(|row| row.map(|r| r.try_get(0)).transpose())
                        .map_err(write_err("the baseline"))?;
                    let Some(version) = version else {
                        return Err(invalid(&format!(
                            "tool version {canonical_digest} is not in the store"
                        )));
                    };
                    tx.execute(
                        "INSERT INTO baselines (server_id, tool_name, tool_version_id,
                             observation_id, accepted_by, accepted_at_ms)
                         VALUES ($1, $2, $3, $4, $5, $6)
                         ON CONFLICT (server_id, tool_name) DO UPDATE SET
                             tool_version_id = excluded.tool_version_id,
                             observation_id = excluded.observation_id,
                             accepted_by = excluded.accepted_by,
                             accepted_at_ms = excluded.accepted_at_ms",
                        &[
                            &server_id,
                            &tool.as_bytes(),
                            &version,
                            &review.observation.0,
                            &review.reviewer.as_bytes(),
                            &review.at_ms,
                        ],
                    )
                    .map_err(write_err("the baseline"))?;
                }
                BaselineEdit::Remove { tool } => {
                    tx.execute(
                        "DELETE FROM baselines WHERE server_id = $1 AND tool_name = $2",
                        &[&server_id, &tool.as_bytes()],
                    )
                    .map_err(write_err("the baseline"))?;
                }
            }
        }
    }
    tx.execute(
        "INSERT INTO reviews (observation_id, tool_name, status, reviewer, at_ms, note)
         VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (observation_id, tool_name) DO UPDATE SET
             status = excluded.status,
             reviewer = excluded.reviewer,
             at_ms = excluded.at_ms,
             note = excluded.note",
        &[
            &review.observation.0,
            &review.tool.as_bytes(),
            &status.as_str(),
            &review.reviewer.as_bytes(),
            &review.at_ms,
            &review.note.as_deref().map(str::as_bytes),
        ],
    )
    .map_err(write_err("the review"))?;
    Ok(())
}

/// Turns a server's implicit baseline (the tools of its first successful
/// observation: the first tool of each name, when it is well formed) into
/// rows, unless that was done before.
fn materialise_baseline(
    tx: &mut Tx<'_>,
    server_id: i64,
    at_ms: i64,
) -> Result<(), postgres::Error> {
    let done: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM baseline_servers WHERE server_id = $1)",
            &[&server_id],
        )?
        .try_get(0)?;
    if done {
        return Ok(());
    }
    let first = tx.query_opt(
        "SELECT id, tool_set_id FROM observations
         WHERE server_id = $1 AND outcome = 'ok' ORDER BY id LIMIT 1",
        &[&server_id],
    )?;
    if let Some(row) = first {
        let observation_id: i64 = row.try_get(0)?;
        let tool_set_id: i64 = row.try_get(1)?;
        tx.execute(
            "INSERT INTO baselines (server_id, tool_name, tool_version_id, observation_id,
                 accepted_by, accepted_at_ms)
             SELECT $1, e.name, COALESCE(nr.tool_version_id, r.tool_version_id), $2, NULL, NULL
             FROM tool_set_entries e JOIN raw_tools r ON r.id = e.raw_tool_id
             LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
             WHERE e.tool_set_id = $3 AND e.name IS NOT NULL
               AND r.tool_version_id IS NOT NULL
               AND e.position = (SELECT min(f.position) FROM tool_set_entries f
                                 WHERE f.tool_set_id = e.tool_set_id AND f.name = e.name)",
            &[&server_id, &observation_id, &tool_set_id],
        )?;
    }
    tx.execute(
        "INSERT INTO baseline_servers (server_id, materialised_at_ms) VALUES ($1, $2)",
        &[&server_id, &at_ms],
    )?;
    Ok(())
}
