//! The API reference: every route of `/api/v1` with what it answers, from
//! the OpenAPI document the API serves (and a test keeps in step).

use super::*;

pub(super) async fn api_reference(State(state): State<AppState>) -> Html<String> {
    let doc: serde_json::Value = serde_json::from_str(crate::api::OPENAPI).unwrap_or_default();
    let mut rows: Vec<(String, String, String)> = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(|p| p.as_object()) {
        for (path, methods) in paths {
            let Some(methods) = methods.as_object() else {
                continue;
            };
            for (method, op) in methods {
                let Some(op) = op.as_object() else { continue };
                let summary = op
                    .get("summary")
                    .or_else(|| op.get("description"))
                    .and_then(|s| s.as_str())
                    .unwrap_or("");
                rows.push((
                    method.to_ascii_uppercase(),
                    path.clone(),
                    summary.to_owned(),
                ));
            }
        }
    }
    layout(
        Some(state.taxonomy()),
        "API",
        html! {
            h1 { "The JSON API" }
            p {
                "Everything the pages show, as JSON under " code { "/api/v1" } ". "
                "Requests carry the same token as the pages when the dashboard has one ("
                code { "Authorization: Bearer TOKEN" } "); writes need "
                code { "Content-Type: application/json" } " and a same-site origin. "
                "Errors are " code { "{\"error\": \"…\"}" } " with the HTTP status. "
                "The machine-readable description is the OpenAPI 3.1 document, "
                a href="/api/v1/openapi.json" { "openapi.json" } "."
            }
            table.api {
                thead { tr { th { "Method" } th { "Path" } th { "Answers" } } }
                tbody {
                    @for (method, path, summary) in &rows {
                        tr {
                            td { code { (method) } }
                            td { code { (path) } }
                            td { (summary) }
                        }
                    }
                }
            }
        },
    )
}
