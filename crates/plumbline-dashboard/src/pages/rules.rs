//! The rules of the taxonomy that grades.

use super::*;

pub(super) async fn rules(State(state): State<AppState>) -> Html<String> {
    let taxonomy = state.taxonomy();
    layout(
        Some(taxonomy),
        "Rules",
        html! {
            h1 { "Rules of " (taxonomy.id()) }
            table.rules {
                thead { tr { th { "Rule" } th { "Severity" } th { "Fires when a change…" } } }
                tbody {
                    @for &r in taxonomy.rules() {
                        tr {
                            td { (rule_link(r)) }
                            td { (severity_badge(r.severity())) }
                            td { a href=(links::rule(r)) { (r.title()) } }
                        }
                    }
                }
            }
        },
    )
}

pub(super) async fn rule(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Html<String>, PageError> {
    let rule: RuleId = id
        .parse()
        .ok()
        .filter(|r: &RuleId| r.as_str() == id)
        .ok_or_else(|| Failure::NotFound(format!("there is no rule {id:?}")))?;
    Ok(layout(
        Some(state.taxonomy()),
        rule.as_str(),
        html! {
            p.crumbs { a href="/rules" { "Rules" } " / " (rule.as_str()) }
            article.rule-doc { (crate::markdown::render(rule.documentation())) }
        },
    ))
}
