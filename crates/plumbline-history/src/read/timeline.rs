//! Timelines: a server's observations with their changes.

use super::*;

/// Every change in the server's history, oldest first: each successful
/// observation whose tool set differs from the previous success's, with
/// its changes. Reads the store's record of tool set changes, so it costs
/// the number of changes, however many unchanged observations lie between.
pub fn history(store: &impl Store, grader: &Grader, server: &str) -> Result<Vec<Step>, Failure> {
    store
        .tool_set_changes(server)?
        .into_iter()
        .map(|(new, old)| {
            let changes = changes_between(store, grader, &old, &new)?;
            let authorization = authorization_change(store, &new)?;
            Ok(Step {
                summary: new,
                previous: Some(old.id),
                changes,
                authorization,
            })
        })
        .collect()
}

/// The server's latest `limit` observations, oldest first, each with its
/// changes, and whether older ones exist.
pub fn recent(
    store: &impl Store,
    grader: &Grader,
    server: &str,
    limit: usize,
) -> Result<(Vec<Step>, bool), Failure> {
    let fetch = u32::try_from(limit.saturating_add(1)).unwrap_or(u32::MAX);
    let mut summaries = store.timeline(server, fetch)?;
    let more = summaries.len() > limit;
    summaries.truncate(limit);
    summaries.reverse();
    let changed: HashMap<ObservationId, ObservationSummary> = store
        .tool_set_changes(server)?
        .into_iter()
        .map(|(new, old)| (new.id, old))
        .collect();
    let mut steps = Vec::with_capacity(summaries.len());
    let mut last_ok: Option<ObservationId> = None;
    let mut first_ok_seen = false;
    let mut last_authorization: Option<Digest> = None;
    for summary in summaries {
        if !summary.outcome.is_ok() {
            steps.push(Step {
                summary,
                previous: None,
                changes: Arc::default(),
                authorization: None,
            });
            continue;
        }
        let previous = if first_ok_seen {
            last_ok
        } else {
            // The success before the window, if any.
            first_ok_seen = true;
            store
                .latest_successful(server, Some(summary.id))?
                .map(|p| p.id)
        };
        let changes = match changed.get(&summary.id) {
            Some(old) => changes_between(store, grader, old, &summary)?,
            None => Arc::default(),
        };
        last_ok = Some(summary.id);
        // The store is asked only when the document differs from the
        // window's previous one.
        let authorization = match (summary.authorization, last_authorization) {
            (None, _) => None,
            (Some(d), Some(last)) if d == last => None,
            (Some(_), _) => authorization_change(store, &summary)?,
        };
        if summary.authorization.is_some() {
            last_authorization = summary.authorization;
        }
        steps.push(Step {
            summary,
            previous,
            changes,
            authorization,
        });
    }
    Ok((steps, more))
}

/// The observation `id` of `server` (404 when there is none, or it is
/// another server's).
pub fn observation_of(
    store: &impl Store,
    server: &str,
    id: ObservationId,
) -> Result<Observation, Failure> {
    match store.observation(id)? {
        Some(o) if o.summary.server == server => Ok(o),
        _ => Err(Failure::NotFound(format!(
            "server {server:?} has no observation {id}"
        ))),
    }
}

/// One observation with its changes.
pub fn step(
    store: &impl Store,
    grader: &Grader,
    summary: &ObservationSummary,
) -> Result<Step, Failure> {
    if !summary.outcome.is_ok() {
        return Ok(Step {
            summary: summary.clone(),
            previous: None,
            changes: Arc::default(),
            authorization: None,
        });
    }
    let previous = store.latest_successful(&summary.server, Some(summary.id))?;
    let changes = match &previous {
        Some(prev) => changes_between(store, grader, prev, summary)?,
        None => Arc::default(),
    };
    Ok(Step {
        summary: summary.clone(),
        previous: previous.map(|p| p.id),
        changes,
        authorization: authorization_change(store, summary)?,
    })
}
