//! The overview: every server, what the runtime guard refused or saw,
//! and the alerts the watcher gave up on.

use super::*;

pub(super) async fn overview(
    State(state): State<AppState>,
    Query(query): Query<BTreeMap<String, String>>,
) -> Result<Html<String>, PageError> {
    let by = query
        .get("sort")
        .and_then(|s| Sort::parse(s))
        .unwrap_or(Sort::Drift);
    let (mut rows, failed_alerts, guard_events) = state
        .with_store(|store, inner| {
            let rows = changes::overview(store.store(), &inner.grader)?;
            let failed = store.failed_alerts(FAILED_ALERTS_SHOWN)?;
            let events = store.guard_events(GUARD_EVENTS_SHOWN)?;
            Ok((rows, failed, events))
        })
        .await?;
    changes::sort(&mut rows, by);
    // Filters: the least severity of the worst unreviewed change, and
    // whether anything is left to review.
    let min: Option<Severity> = query.get("min").and_then(|s| s.parse().ok());
    let state_filter = match query.get("state").map(String::as_str) {
        Some("unreviewed") => Some(true),
        Some("reviewed") => Some(false),
        _ => None,
    };
    let all = rows.len();
    rows.retain(|r| {
        min.is_none_or(|m| r.worst_unreviewed.is_some_and(|w| w >= m))
            && state_filter.is_none_or(|open| (r.unreviewed > 0) == open)
    });
    let query_with = |key: &str, value: Option<&str>| -> String {
        let mut q: BTreeMap<&str, String> = BTreeMap::new();
        q.insert("sort", by.as_str().to_owned());
        if let Some(m) = min {
            q.insert("min", m.as_str().to_ascii_lowercase());
        }
        if let Some(open) = state_filter {
            q.insert(
                "state",
                if open { "unreviewed" } else { "reviewed" }.to_owned(),
            );
        }
        match value {
            Some(v) => {
                q.insert(key, v.to_owned());
            }
            None => {
                q.remove(key);
            }
        }
        let parts: Vec<String> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("/?{}", parts.join("&"))
    };
    let sort_link = |s: Sort, label: &str| {
        html! { a class=[(s == by).then_some("active")] href=(query_with("sort", Some(s.as_str()))) { (label) } }
    };
    let min_link = |m: Option<Severity>, label: &str| {
        let value = m.map(|m| m.as_str().to_ascii_lowercase());
        html! { a class=[(m == min).then_some("active")] href=(query_with("min", value.as_deref())) { (label) } }
    };
    let state_link = |s: Option<bool>, label: &str| {
        let value = s.map(|open| if open { "unreviewed" } else { "reviewed" });
        html! { a class=[(s == state_filter).then_some("active")] href=(query_with("state", value)) { (label) } }
    };
    Ok(layout(
        Some(state.taxonomy()),
        "Servers",
        html! {
            h1 { "Servers" }
            nav.filters {
                "Worst unreviewed: "
                (min_link(None, "any")) " "
                (min_link(Some(Severity::Critical), "critical")) " "
                (min_link(Some(Severity::High), "high or worse")) " "
                (min_link(Some(Severity::Medium), "medium or worse")) " "
                (min_link(Some(Severity::Low), "low or worse"))
                " · Review: "
                (state_link(None, "all")) " "
                (state_link(Some(true), "something to review")) " "
                (state_link(Some(false), "all reviewed"))
                @if rows.len() < all { " · " (rows.len()) " of " (all) " servers shown" }
            }
            @if rows.is_empty() && all > 0 {
                p.empty { "No server matches these filters." }
            } @else if rows.is_empty() {
                p.empty { "No observations yet: run " code { "plumbline observe" } " or " code { "plumbline watch" } " to record some." }
            } @else {
                table.servers {
                    thead { tr {
                        th { (sort_link(Sort::Name, "Server")) }
                        th { (sort_link(Sort::Observed, "Last observation")) }
                        th { "Status" }
                        th.num { "Tools" }
                        th { (sort_link(Sort::Severity, "Worst unreviewed")) }
                        th.num { (sort_link(Sort::Unreviewed, "Unreviewed")) }
                        th { (sort_link(Sort::Drift, "Latest drift")) }
                    } }
                    tbody {
                        @for row in &rows {
                            tr {
                                td { a href=(links::server(&row.name)) { (line(&row.name)) } }
                                td {
                                    @if let Some(last) = &row.last {
                                        a href=(links::observation(&row.name, last.id)) { (links::when(last.finished_at_ms)) }
                                    } @else { "never" }
                                }
                                td {
                                    @if let Some(last) = &row.last {
                                        (outcome_badge(&last.outcome))
                                        // A failure says why, in a line.
                                        @if let Outcome::Failed { error } = &last.outcome {
                                            " " span.error { (line(&first_line(error, 120))) }
                                        }
                                    } @else { "—" }
                                }
                                td.num { @if let Some(n) = row.tool_count { (n) } @else { "—" } }
                                td {
                                    @if let Some(s) = row.worst_unreviewed { (severity_badge(s)) } @else { span.muted { "—" } }
                                }
                                td.num.unreviewed { (row.unreviewed) }
                                td {
                                    @if let Some(at) = row.last_drift_at_ms { (links::when(at)) } @else { span.muted { "never" } }
                                }
                            }
                        }
                    }
                }
            }
            @if !guard_events.is_empty() {
                section.guard-events {
                    h2 { "What the guard refused or saw" }
                    p { "Calls whose arguments held secret material, and tool results holding text aimed at the model, as `plumbline guard` recorded them; the kind and place of what was found, never the secret." }
                    table {
                        thead { tr { th { "When" } th { "Server" } th { "Tool" } th { "Kind" } th { "What" } } }
                        tbody {
                            @for e in &guard_events {
                                @let what = serde_json::from_str::<serde_json::Value>(&e.detail)
                                    .ok()
                                    .and_then(|d| d.get("what").and_then(|w| w.as_str()).map(str::to_owned))
                                    .unwrap_or_default();
                                tr {
                                    td { (links::when(e.at_ms)) }
                                    td { a href=(links::server(&e.server)) { (line(&e.server)) } }
                                    td { (line(&e.tool)) }
                                    td { (line(&e.kind)) }
                                    td { (line(&what)) }
                                }
                            }
                        }
                    }
                }
            }
            @if !failed_alerts.is_empty() {
                section.failed-alerts {
                    h2 { "Alerts not delivered" }
                    p { "The watcher gave up on these after their last attempt (or their channel is no longer configured); they are kept, not retried." }
                    table {
                        thead { tr { th { "Failed" } th { "Channel" } th { "Server" } th { "Alert" } th.num { "Attempts" } th { "Last error" } } }
                        tbody {
                            @for a in &failed_alerts {
                                tr {
                                    td { @if let Some(at) = a.failed_at_ms { (links::when(at)) } }
                                    td { (line(&a.channel)) }
                                    td { a href=(links::observation(&a.server, a.observation)) { (line(&a.server)) } }
                                    td { (line(&a.key)) }
                                    td.num { (a.attempts) }
                                    td { (line(a.last_error.as_deref().unwrap_or(""))) }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}

/// The most recent guard events the overview lists.
pub(super) const GUARD_EVENTS_SHOWN: u32 = 50;

/// The most recent failed alerts the overview lists.
pub(super) const FAILED_ALERTS_SHOWN: u32 = 50;

pub(super) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/css; charset=utf-8"),
            (header::CACHE_CONTROL, "max-age=3600"),
        ],
        CSS,
    )
}
