//! One tool: its current definition and history.

use super::*;

pub(super) async fn tool(
    State(state): State<AppState>,
    Path((name, ToolName(tool))): Path<(String, ToolName)>,
) -> Result<Html<String>, PageError> {
    let server = name.clone();
    let v = state
        .with_store(move |store, inner| views::tool_view(&*store, inner, &name, &tool))
        .await?;
    let name = server;
    let mut was_present = false;
    let events: Vec<&'static str> = v
        .history
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let event = match (h.present, h.canonical_digest.is_some(), was_present, i) {
                (false, _, _, _) => "removed",
                (true, false, _, _) => "malformed",
                (true, true, false, 0) => "appeared",
                (true, true, false, _) => "came back",
                (true, true, true, _) => "changed",
            };
            was_present = h.present;
            event
        })
        .collect();
    Ok(layout(
        Some(state.taxonomy()),
        &format!("{} of {name}", v.tool),
        html! {
            p.crumbs {
                a href="/" { "Servers" } " / "
                a href=(links::server(&name)) { (line(&name)) } " / "
                (line(&v.tool))
            }
            h1 { "Tool " (line(&v.tool)) " of " a href=(links::server(&name)) { (line(&name)) } }
            p {
                @if v.listed_now { "Listed by the latest successful observation." }
                @else { strong { "Not listed" } " by the latest successful observation." }
                " "
                @match (&v.baseline, &v.latest) {
                    (Some(b), Some((_, digest, _))) if b.canonical_digest == *digest => "This version is the baseline.",
                    (Some(_), _) => strong { "This version differs from the baseline." },
                    (None, _) => "It is not part of the baseline.",
                }
            }
            @if let Some((at, digest, definition)) = &v.latest {
                section {
                    h2 {
                        @if v.listed_now { "Current definition" } @else { "Last definition" }
                        " " code { (short(digest)) }
                        " since " a href=(links::observation(&name, *at)) { "#" (at) }
                    }
                    (bounded_block(&pretty(definition), Some(&links::raw(&name, *at, &v.tool))))
                }
            }
            section {
                h2 { "History" }
                table.history {
                    thead { tr { th { "Observation" } th { "Finished" } th { "Event" } th { "Version" } th { "Change" } } }
                    tbody {
                        @for (h, event) in v.history.iter().rev().zip(events.iter().rev()) {
                            tr {
                                td { a href=(links::observation(&name, h.observation)) { "#" (h.observation) } }
                                td { (links::when(h.finished_at_ms)) }
                                td { (event) }
                                td { @if let Some(d) = &h.canonical_digest { code { (short(d)) } } @else { span.muted { "—" } } }
                                td {
                                    @if v.changes_at.contains(&h.observation) {
                                        a href=(links::change(&name, h.observation, &v.tool)) { "review" }
                                    } @else { span.muted { "—" } }
                                }
                            }
                        }
                    }
                }
            }
        },
    ))
}
