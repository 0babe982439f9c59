//! One observation: its tools, changes and problems.

use super::*;
use plumbline_history::ReviewStatus;

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
                @if let Some(info) = server_info(o.server_info.as_deref()) { dt { "Server" } dd { (line(&info)) } }
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
                    @if view.step.changes.regraded {
                        p.muted { "Re-graded: these grades were made after the observation was recorded (under another taxonomy or Plumbline version), not when it was recorded and alerted on." }
                    }
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
                        @if view.step.changes.tools.len() > 1 {
                            form.review-all method="post" action=(links::review_all(&name, s.id)) {
                                input type="hidden" name="csrf" value=(state.form_token());
                                "All " (view.step.changes.tools.len()) " changes at once: "
                                button type="submit" name="status" value="reviewed" { "Mark all reviewed…" } " "
                                button type="submit" name="status" value="accepted" { "Accept all into the baseline…" }
                                " (you confirm on the next page)"
                            }
                        }
                    }
                }
            }
            @if let Some(doc) = &o.authorization {
                section {
                    h2 { "Authorization" }
                    p.muted { "What the server published about its authorization (OAuth) at this observation: its protected resource metadata and its authorization server's metadata." }
                    @match &view.step.authorization {
                        Some(a) => {
                            p { "Changed since " a href=(links::observation(&name, a.previous)) { "#" (a.previous) } ":" }
                            (authorization_changes(a))
                        },
                        None => {},
                    }
                    pre.document { (text::block(&pretty_json(doc))) }
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
                                    td {
                                        @match &t.canonical_digest { Some(d) => code { (short(d)) }, None => span.error { "malformed" } }
                                        @if t.normalized.is_some() { " " span.muted title="compared after this server's normalisation rules" { "normalised" } }
                                    }
                                    td { code { (short(&t.raw_digest)) } }
                                }
                            }
                        }
                    }
                }
                @if o.tools.iter().any(|t| t.normalized.is_some()) {
                    section {
                        h2 { "Normalised before comparing" }
                        p.muted { "This server's normalisation rules (plumbline.toml) rewrote these values before they were compared; the raw bytes are kept as the server sent them." }
                        ul.normalized {
                            @for t in &o.tools {
                                @if let Some(n) = &t.normalized {
                                    @for v in &n.by {
                                        li {
                                            @match &t.name { Some(n) => (line(n)), None => "(no name)" } " "
                                            code { (pointer_markup(&v.pointer)) }
                                            " by rule " code { (line(&v.rule)) }
                                        }
                                    }
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

/// The bulk review form's fields.
#[derive(Deserialize)]
pub(super) struct ReviewAllForm {
    csrf: String,
    status: String,
    reviewer: Option<String>,
    note: Option<String>,
    /// Present once the reviewer has seen the list and confirmed.
    confirm: Option<String>,
}

/// Marks every change of an observation reviewed, or accepts them all:
/// first a page listing them to confirm (no script: a second form), then
/// each verdict recorded as the single-change form records it. A change
/// that cannot be accepted (a name listed more than once) is left, and
/// said so.
pub(super) async fn review_all(
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
    Form(form): Form<ReviewAllForm>,
) -> Result<Response, PageError> {
    crate::auth::check_form(&state, &headers, &form.csrf)?;
    let status = views::parse_status(&form.status)?;
    let server = name.clone();
    let id_text = id.clone();
    let view = state
        .with_store(move |store, inner| views::observation_view(&*store, inner, &name, &id_text))
        .await?;
    let observation = view.observation.summary.id;
    let tools: Vec<ToolChange> = view.step.changes.tools.clone();
    if tools.is_empty() {
        return Err(Failure::BadRequest(format!(
            "observation {observation} has no change to review"
        ))
        .into());
    }
    let verb = match status {
        ReviewStatus::Accepted => "Accept",
        _ => "Mark reviewed",
    };
    if form.confirm.as_deref() != Some("yes") {
        let page = layout(
            Some(state.taxonomy()),
            &format!("{verb}: {} changes of {server}", tools.len()),
            html! {
                p.crumbs {
                    a href="/" { "Servers" } " / "
                    a href=(links::server(&server)) { (line(&server)) } " / "
                    a href=(links::observation(&server, observation)) { "#" (observation) }
                }
                h1 { (verb) " all " (tools.len()) " changes of observation #" (observation) "?" }
                @if status == ReviewStatus::Accepted {
                    p.warning { "Accepting moves each tool's baseline to this version: "
                        code { "plumbline check --against-store" } " then measures from it." }
                }
                table.changes {
                    thead { tr { th { "Tool" } th { "Change" } th { "Severity" } th { "Rules" } } }
                    tbody {
                        @for t in &tools {
                            tr {
                                td { a href=(links::change(&server, observation, &t.name)) { (line(&t.name)) } }
                                td { (kind_label(&t.change)) }
                                td { (severity_badge(t.severity)) }
                                td { @for r in &t.rules { (rule_link(*r)) " " } }
                            }
                        }
                    }
                }
                form.review-form method="post" action=(links::review_all(&server, observation)) {
                    input type="hidden" name="csrf" value=(state.form_token());
                    input type="hidden" name="status" value=(status.as_str());
                    input type="hidden" name="confirm" value="yes";
                    label { "Reviewer " input type="text" name="reviewer" value=(form.reviewer.clone().unwrap_or_else(|| state.inner.reviewer.clone())) maxlength=(views::MAX_REVIEWER_CHARS) required; }
                    label { "Note " input type="text" name="note" value=(form.note.clone().unwrap_or_default()) maxlength=(views::MAX_NOTE_CHARS); }
                    button type="submit" { "Confirm: " (verb) " " (tools.len()) " changes" }
                    " " a href=(links::observation(&server, observation)) { "Cancel" }
                }
            },
        );
        return Ok(page.into_response());
    }
    let verdict = Verdict {
        status,
        reviewer: form.reviewer,
        note: form.note,
    };
    views::review_all(&state, server.clone(), observation.to_string(), verdict).await?;
    Ok(Redirect::to(&links::observation(&server, observation)).into_response())
}
