//! One observation: its tools, changes and problems.

use super::*;

pub(super) async fn observation(
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<Html<String>, PageError> {
    let server = name.clone();
    let view = state
        .with_store(move |store, inner| views::observation_view(&*store, inner, &name, &id))
        .await?;
    let o = &view.observation;
    let s = &o.summary;
    let name = server;
    Ok(layout(
        Some(state.taxonomy()),
        &format!("Observation {} of {name}", s.id),
        html! {
            p.crumbs {
                a href="/" { "Servers" } " / "
                a href=(links::server(&name)) { (line(&name)) } " / "
                "#" (s.id)
            }
            h1 { "Observation #" (s.id) " of " a href=(links::server(&name)) { (line(&name)) } }
            dl.facts {
                dt { "Started" } dd { (links::when(s.started_at_ms)) }
                dt { "Finished" } dd { (links::when(s.finished_at_ms)) }
                dt { "Outcome" } dd { (outcome_badge(&s.outcome)) }
                @if let Some(v) = &s.protocol_version { dt { "Protocol" } dd { (line(v)) } }
                dt { "Tools" } dd { (s.tool_count) }
                dt { "Compared with" } dd {
                    @match view.step.previous {
                        Some(p) => a href=(links::observation(&name, p)) { "#" (p) },
                        None => span.muted { "nothing (a failure, or the first successful observation)" },
                    }
                }
            }
            @if let Outcome::Failed { error } = &s.outcome {
                pre.error { (text::block(error)) }
            }
            @if view.step.previous.is_some() {
                section {
                    h2 { "Changes" }
                    @if view.step.changes.is_empty() {
                        p.muted { "No change." }
                    } @else {
                        table.changes {
                            thead { tr { th { "Tool" } th { "Change" } th { "Severity" } th { "Rules" } th { "Review" } } }
                            tbody {
                                @for t in &view.step.changes.tools {
                                    tr {
                                        td { a href=(links::change(&name, s.id, &t.name)) { (line(&t.name)) } }
                                        td { (kind_label(&t.change)) }
                                        td { (severity_badge(t.severity)) }
                                        td { @for r in &t.rules { (rule_link(*r)) " " } }
                                        td { (review_label(view.reviews.get(&(s.id, t.name.clone())))) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
            @if s.outcome.is_ok() {
                section {
                    h2 { "Tools" }
                    table.tools {
                        thead { tr { th.num { "#" } th { "Name" } th { "Version" } th { "Raw bytes" } } }
                        tbody {
                            @for t in &o.tools {
                                tr {
                                    td.num { (t.position) }
                                    td {
                                        @match &t.name {
                                            Some(n) => a href=(links::tool(&name, n)) { (line(n)) },
                                            None => span.muted { "(no name)" },
                                        }
                                    }
                                    td { @match &t.canonical_digest { Some(d) => code { (short(d)) }, None => span.error { "malformed" } } }
                                    td { code { (short(&t.raw_digest)) } }
                                }
                            }
                        }
                    }
                }
            }
            @if !o.problems.is_empty() {
                section {
                    h2 { "Problems" }
                    ul.problems {
                        @for p in &o.problems {
                            li {
                                code { (p.kind.as_str()) } " "
                                @if let Some(pos) = p.position { "at " (pos) " " }
                                @if let Some(n) = &p.tool_name { "(" (line(n)) ") " }
                                (line(&p.message))
                            }
                        }
                    }
                }
            }
        },
    ))
}
