//! Writing an observation: raw tools, documents, contents and tool sets, each stored once by digest.

use super::*;

impl SqliteStore {
    /// The state of the first tool called `tool` in a tool set (a later
    /// duplicate is a recorded problem, not a second version).
    pub(super) fn tool_state(
        &self,
        tool_set_id: i64,
        tool: &str,
        what: &str,
    ) -> Result<ToolState, StoreError> {
        let row: Option<Option<Vec<u8>>> = self
            .conn
            .prepare_cached(
                "SELECT COALESCE(nv.digest, v.digest)
                 FROM tool_set_entries e
                 JOIN raw_tools r ON r.id = e.raw_tool_id
                 LEFT JOIN tool_versions v ON v.id = r.tool_version_id
                 LEFT JOIN raw_tools nr ON nr.id = e.normalized_raw_tool_id
                 LEFT JOIN tool_versions nv ON nv.id = nr.tool_version_id
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

/// Stores a tool's raw bytes unless already present; returns their row id
/// and the digest of their canonical form (`None` when malformed).
pub(super) fn put_raw_tool(
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
pub(super) fn put_document(
    tx: &Transaction<'_>,
    body: Option<&[u8]>,
) -> rusqlite::Result<Option<i64>> {
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
pub(super) fn put_content(
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
pub(super) fn put_tool_set(tx: &Transaction<'_>, entries: &[Entry<'_>]) -> rusqlite::Result<i64> {
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
        "INSERT INTO tool_set_entries
             (tool_set_id, position, name, raw_tool_id, normalized_raw_tool_id, normalized_by)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for e in entries {
        let (n_id, by) = match &e.normalized {
            Some(n) => (Some(n.raw_tool_id), Some(n.by.as_str())),
            None => (None, None),
        };
        stmt.execute(params![id, e.position, e.name, e.raw_tool_id, n_id, by])?;
    }
    Ok(id)
}
