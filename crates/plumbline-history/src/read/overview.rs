//! Overviews: each server's state, unreviewed changes and verdicts, sorted.

use super::*;

/// A server's verdicts, by (observation, tool).
pub fn reviews(
    store: &impl Store,
    server: &str,
) -> Result<BTreeMap<(ObservationId, String), Review>, Failure> {
    Ok(store
        .reviews(server)?
        .into_iter()
        .map(|r| ((r.observation, r.tool.clone()), r))
        .collect())
}

/// Every server, by name.
pub fn overview(store: &impl Store, grader: &Grader) -> Result<Vec<ServerOverview>, Failure> {
    store
        .servers()?
        .into_iter()
        .map(|server| server_overview(store, grader, server))
        .collect()
}

/// One server's line of the overview.
pub fn server_overview(
    store: &impl Store,
    grader: &Grader,
    server: Server,
) -> Result<ServerOverview, Failure> {
    let steps = history(store, grader, &server.name)?;
    let reviewed: BTreeSet<(ObservationId, String)> =
        reviews(store, &server.name)?.into_keys().collect();
    let last = store.timeline(&server.name, 1)?.into_iter().next();
    // The latest successful observation's: the last one's, unless it failed.
    let tool_count = match &last {
        Some(l) if l.outcome.is_ok() => Some(l.tool_count),
        _ => store
            .latest_successful(&server.name, None)?
            .map(|s| s.tool_count),
    };
    let mut row = ServerOverview {
        name: server.name,
        identity: server.identity,
        last,
        tool_count,
        changes: 0,
        unreviewed: 0,
        worst_unreviewed: None,
        last_drift_at_ms: None,
    };
    for step in &steps {
        if !step.changes.is_empty() {
            row.last_drift_at_ms = Some(step.summary.finished_at_ms);
        }
        for t in &step.changes.tools {
            row.changes += 1;
            // Work for a reviewer: a change graded above NONE. A cosmetic
            // edit or a removal is shown, but is not waiting on anyone.
            let needs_review = t.severity > Severity::None && t.change != Change::Removed;
            if needs_review && !reviewed.contains(&(step.summary.id, t.name.clone())) {
                row.unreviewed += 1;
                let s = t.severity;
                row.worst_unreviewed = Some(row.worst_unreviewed.map_or(s, |w| w.max(s)));
            }
        }
    }
    Ok(row)
}

/// The server called `name` (404 when the store has none).
pub fn server(store: &impl Store, name: &str) -> Result<Server, Failure> {
    store
        .server(name)?
        .ok_or_else(|| Failure::NotFound(format!("there is no server {name:?} in the store")))
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Drift,
        Sort::Severity,
        Sort::Unreviewed,
        Sort::Observed,
        Sort::Name,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Drift => "drift",
            Sort::Severity => "severity",
            Sort::Unreviewed => "unreviewed",
            Sort::Observed => "observed",
            Sort::Name => "name",
        }
    }

    /// The order `s` names; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<Sort> {
        Sort::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Orders overview rows; ties are broken by name, so the order is total.
pub fn sort(rows: &mut [ServerOverview], by: Sort) {
    rows.sort_by(|a, b| {
        let primary = match by {
            Sort::Drift => b.last_drift_at_ms.cmp(&a.last_drift_at_ms),
            Sort::Severity => b
                .worst_unreviewed
                .cmp(&a.worst_unreviewed)
                .then(b.unreviewed.cmp(&a.unreviewed)),
            Sort::Unreviewed => b.unreviewed.cmp(&a.unreviewed),
            Sort::Observed => b
                .last
                .as_ref()
                .map(|o| o.finished_at_ms)
                .cmp(&a.last.as_ref().map(|o| o.finished_at_ms)),
            Sort::Name => std::cmp::Ordering::Equal,
        };
        primary.then_with(|| a.name.cmp(&b.name))
    });
}
