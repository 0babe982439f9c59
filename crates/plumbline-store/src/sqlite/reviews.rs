//! Reviews and baselines: verdicts, and accepting a change into the baseline, in one transaction.

use super::*;

impl SqliteStore {
    /// Records a verdict and, for an acceptance, applies `edits` to the
    /// server's baseline, in one transaction.
    pub(super) fn write_review(
        &mut self,
        review: &NewReview,
        status: ReviewStatus,
        edits: &[BaselineEdit],
    ) -> Result<(), StoreError> {
        self.write_reviews(status, &[(review.clone(), edits.to_vec())])
    }

    /// Records each verdict (with its baseline edits, for acceptances) in
    /// one transaction: all of them, or none when any is refused. Bulk
    /// review costs one commit, not one per change.
    pub(super) fn write_reviews(
        &mut self,
        status: ReviewStatus,
        items: &[(NewReview, Vec<BaselineEdit>)],
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|source| StoreError::Write {
                path: path.clone(),
                server: String::new(),
                what: "a transaction",
                source: Box::new(source),
            })?;
        for (review, edits) in items {
            apply_review(&tx, &path, review, status, edits)?;
        }
        tx.commit().map_err(|source| StoreError::Write {
            path,
            server: String::new(),
            what: "the commit",
            source: Box::new(source),
        })?;
        Ok(())
    }
}

/// One verdict within `tx`: checks the observation, applies the edits (for
/// an acceptance) and records the review.
fn apply_review(
    tx: &Transaction<'_>,
    path: &std::path::Path,
    review: &NewReview,
    status: ReviewStatus,
    edits: &[BaselineEdit],
) -> Result<(), StoreError> {
    let path = path.to_path_buf();
    let invalid = |reason: &str| StoreError::InvalidReview {
        observation: review.observation,
        tool: review.tool.clone(),
        reason: reason.to_owned(),
    };
    let what = format!("observation {}", review.observation);
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
        materialise_baseline(tx, server_id, review.at_ms)
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
    Ok(())
}

/// Turns a server's implicit baseline (the tools of its first successful
/// observation: the first tool of each name, when it is well formed) into
/// rows, unless that was done before.
pub(super) fn materialise_baseline(
    tx: &Transaction<'_>,
    server_id: i64,
    at_ms: i64,
) -> rusqlite::Result<()> {
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
             SELECT ?1, e.name, COALESCE(nr.tool_version_id, r.tool_version_id), ?2, NULL, NULL
             FROM tool_set_entries e JOIN raw_tools r ON r.id = e.raw_tool_id
             LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
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
