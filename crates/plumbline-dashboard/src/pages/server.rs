//! A server: its tools, baseline and timeline.

use super::*;

pub(super) async fn server(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Html<String>, PageError> {
    let view_name = name.clone();
    let (server, steps, reviews, baseline, current) = state
        .with_store(move |store, inner| {
            let server = changes::server(store.store(), &name)?;
            let steps = changes::recent(store.store(), &inner.grader, &name, TIMELINE_ROWS)?;
            let reviews = changes::reviews(store.store(), &name)?;
            let baseline = store.baseline(&name)?;
            let (current, info) = match store.latest_successful(&name, None)? {
                Some(s) => {
                    let o = changes::observation_of(store.store(), &name, s.id)?;
                    let info = server_info(o.server_info.as_deref());
                    let mut names: Vec<String> =
                        o.tools.into_iter().filter_map(|t| t.name).collect();
                    names.sort();
                    names.dedup();
                    (names, info)
                }
                None => (Vec::new(), None),
            };
            Ok((server, steps, reviews, baseline, (current, info)))
        })
        .await?;
    let (current, info) = current;
    let name = view_name;
    Ok(layout(
        Some(state.taxonomy()),
        &name,
        html! {
            p.crumbs { a href="/" { "Servers" } " / " (line(&name)) }
            h1 { "Server " (line(&name)) }
            p.identity { "Reached by " (connection(&server.identity)) }
            @if let Some(info) = &info {
                p.identity { "Says it is " strong { (line(info)) } " (its serverInfo, at the latest observation)" }
            }
            section {
                h2 { "Tools now" }
                @if current.is_empty() {
                    p.muted { "No successful observation yet." }
                } @else {
                    ul.tools {
                        @for t in &current { li { a href=(links::tool(&name, t)) { (line(t)) } } }
                    }
                }
            }
            section {
                h2 { "Baseline" }
                @match &baseline {
                    None => p.muted { "None yet: the first successful observation will be the baseline." },
                    Some(b) if !b.explicit => p {
                        "The tools of the first successful observation ("
                        @if let Some(t) = b.tools.values().next() {
                            a href=(links::observation(&name, t.observation)) { "#" (t.observation) }
                        } @else { "no tools" }
                        "); no change accepted yet. " (b.tools.len()) " tools."
                    },
                    Some(b) => p {
                        (b.tools.len()) " tools, "
                        (b.tools.values().filter(|t| t.accepted_by.is_some()).count())
                        " of them from accepted changes."
                    },
                }
                p { a href={ "/api/v1" (links::server(&name)) "/baseline" } { "The baseline as JSON" } }
            }
            section {
                h2 { "Timeline" }
                @if steps.1 {
                    p.muted { "The latest " (TIMELINE_ROWS) " observations." }
                }
                table.timeline {
                    thead { tr { th { "Observation" } th { "Finished" } th { "Outcome" } th.num { "Tools" } th { "Changes" } } }
                    tbody {
                        @for step in steps.0.iter().rev() {
                            @let o = &step.summary;
                            tr {
                                td { a href=(links::observation(&name, o.id)) { "#" (o.id) } }
                                td { (links::when(o.finished_at_ms)) }
                                td { (outcome_badge(&o.outcome)) }
                                td.num { (o.tool_count) }
                                td {
                                    @match &o.outcome {
                                        Outcome::Failed { error } => span.error { (line(&first_line(error, 200))) },
                                        Outcome::Ok if step.previous.is_none() => span.muted { "first observation: the baseline" },
                                        Outcome::Ok if step.changes.is_empty() && step.authorization.is_none() => span.muted { "no change" },
                                        Outcome::Ok => {
                                            ul.changes {
                                                @for t in &step.changes.tools {
                                                    li { (change_summary(&name, o.id, t, reviews.get(&(o.id, t.name.clone())))) }
                                                }
                                            }
                                            @if step.changes.regraded {
                                                span.muted title="graded after this observation was recorded (another taxonomy or Plumbline version), not the grade made when it was recorded" { "re-graded" }
                                            }
                                            @if let Some(a) = &step.authorization { (authorization_changes(a)) }
                                        },
                                    }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}

/// How what a server publishes about its authorization changed: one item
/// per field.
pub(super) fn authorization_changes(a: &changes::AuthorizationChange) -> Markup {
    html! {
        ul.changes.authorization {
            @for f in &a.fields {
                li { span.sev.sev-auth title="what the server publishes about its authorization (OAuth): its protected resource metadata and its authorization server's" { "authorization" } " " (line(&f.describe())) }
            }
        }
    }
}

pub(super) fn change_summary(
    server: &str,
    id: ObservationId,
    t: &ToolChange,
    review: Option<&Review>,
) -> Markup {
    html! {
        a.change href=(links::change(server, id, &t.name)) {
            (severity_badge(t.severity)) " " (line(&t.name))
        }
        " " (kind_label(&t.change)) " " (review_label(review))
    }
}

/// How a server is reached, for people: the command line of a stdio
/// server (with its working directory and the names of the variables it
/// gets), or the URL of a remote one; the raw identity if it is neither.
fn connection(identity: &str) -> Markup {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(identity) else {
        return html! { code { (line(identity)) } };
    };
    let text = |key: &str| v.get(key).and_then(|x| x.as_str()).map(str::to_owned);
    let list = |key: &str| -> Vec<String> {
        v.get(key)
            .and_then(|x| x.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    match text("transport").as_deref() {
        Some("stdio") => {
            let mut command = vec![text("command").unwrap_or_default()];
            command.extend(list("args"));
            let env = list("env");
            html! {
                "the command " code { (line(&command.join(" "))) }
                @if let Some(cwd) = text("cwd") { " in " code { (line(&cwd)) } }
                @if !env.is_empty() { ", with " (env.len()) " variable" @if env.len() != 1 { "s" } " of its own: " code { (line(&env.join(", "))) } }
                " (stdio)"
            }
        }
        Some(t @ ("http" | "sse")) => {
            let headers = list("headers");
            html! {
                code { (line(&text("url").unwrap_or_default())) }
                @if t == "sse" { " (HTTP+SSE)" } @else { " (Streamable HTTP)" }
                @if !headers.is_empty() { ", sending " code { (line(&headers.join(", "))) } }
            }
        }
        _ => html! { code { (line(identity)) } },
    }
}
