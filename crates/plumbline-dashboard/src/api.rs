//! The JSON API under `/api/v1`, described by the hand-written OpenAPI 3.1
//! document served at `/api/v1/openapi.json` (`openapi.json` beside this
//! crate's `Cargo.toml`; a test keeps the two in step).
//!
//! The pages show the same values: both are built from [`crate::changes`].

use std::collections::BTreeMap;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap};
use axum::response::IntoResponse;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::{Json, Router};
use plumbline_drift::Change;
use plumbline_history::{Baseline, ObservationId, ObservationSummary, Outcome, Review};
use plumbline_taxonomy::json::Value;
use plumbline_taxonomy::{Evidence, RuleId, Severity};
use serde::{Deserialize, Serialize};

use crate::changes::{self, ChangeDetail, ServerOverview, Step, ToolChange};
use crate::error::{ApiError, Failure};
use crate::links::{utc, ToolName};
use crate::views::{
    change_inputs_view, observation_view, parse_status, record_verdict, tool_view, Verdict,
};
use crate::AppState;

/// The OpenAPI document, kept by hand.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// One route of the API: its method, path and handler. The router is
/// built from this table, and the OpenAPI test reads the same table.
struct ApiRoute {
    method: &'static str,
    path: &'static str,
    handler: MethodRouter<AppState>,
}

fn table() -> Vec<ApiRoute> {
    fn route(
        method: &'static str,
        path: &'static str,
        handler: MethodRouter<AppState>,
    ) -> ApiRoute {
        ApiRoute {
            method,
            path,
            handler,
        }
    }
    let get = MethodFilter::GET;
    let post = MethodFilter::POST;
    vec![
        route("get", "/api/v1/openapi.json", on(get, openapi)),
        route("get", "/api/v1/servers", on(get, servers)),
        route("get", "/api/v1/servers/{server}", on(get, server)),
        route(
            "get",
            "/api/v1/servers/{server}/baseline",
            on(get, baseline),
        ),
        route(
            "get",
            "/api/v1/servers/{server}/observations",
            on(get, observations),
        ),
        route(
            "get",
            "/api/v1/servers/{server}/observations/{observation}",
            on(get, observation),
        ),
        route(
            "post",
            "/api/v1/servers/{server}/observations/{observation}/review",
            on(post, review_all),
        ),
        route(
            "get",
            "/api/v1/servers/{server}/observations/{observation}/tools/{tool}",
            on(get, change),
        ),
        route(
            "post",
            "/api/v1/servers/{server}/observations/{observation}/tools/{tool}/review",
            on(post, review),
        ),
        route(
            "get",
            "/api/v1/servers/{server}/tools/{tool}",
            on(get, tool),
        ),
    ]
}

/// The API's routes as (lower-case method, path), in the router's order.
pub fn route_list() -> Vec<(&'static str, &'static str)> {
    table().into_iter().map(|r| (r.method, r.path)).collect()
}

pub(crate) fn routes() -> Router<AppState> {
    table()
        .into_iter()
        .fold(Router::new(), |router, r| router.route(r.path, r.handler))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

// ---- JSON shapes ----------------------------------------------------------

#[derive(Serialize)]
pub struct ServerJson {
    pub name: String,
    /// How the server is reached, as registered (no secrets).
    pub identity: serde_json::Value,
    /// The latest observation's outcome: `ok`, `failed`, or `unobserved`.
    pub status: &'static str,
    pub last_observation: Option<ObservationJson>,
    /// Tools in the latest successful observation.
    pub tool_count: Option<u32>,
    pub changes: usize,
    pub unreviewed: usize,
    pub worst_unreviewed: Option<Severity>,
    pub last_drift_at_ms: Option<i64>,
}

impl ServerJson {
    fn from(row: &ServerOverview) -> ServerJson {
        ServerJson {
            name: row.name.clone(),
            identity: serde_json::from_str(&row.identity).unwrap_or(serde_json::Value::Null),
            status: row
                .last
                .as_ref()
                .map_or("unobserved", |o| o.outcome.as_str()),
            last_observation: row
                .last
                .as_ref()
                .map(|o| ObservationJson::from(o, None, None)),
            tool_count: row.tool_count,
            changes: row.changes,
            unreviewed: row.unreviewed,
            worst_unreviewed: row.worst_unreviewed,
            last_drift_at_ms: row.last_drift_at_ms,
        }
    }
}

#[derive(Serialize)]
pub struct ObservationJson {
    pub id: i64,
    pub server: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub finished_at: String,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub protocol_version: Option<String>,
    pub tool_count: u32,
    pub problem_count: u32,
    pub tool_set: Option<String>,
    /// The observation the changes are measured from.
    pub previous: Option<i64>,
    /// The worst change's severity; absent when nothing changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub severity: Option<Severity>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changes: Option<Vec<ChangeJson>>,
    /// The changes were graded after the observation was recorded (another
    /// taxonomy or Plumbline version), not when it was recorded.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub regraded: bool,
    /// How what the server publishes about its authorization changed
    /// here, field by field; absent when it did not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub authorization: Option<changes::AuthorizationChange>,
}

impl ObservationJson {
    fn from(
        o: &ObservationSummary,
        step: Option<&Step>,
        reviews: Option<&BTreeMap<(ObservationId, String), Review>>,
    ) -> ObservationJson {
        let changes = step.map(|s| {
            s.changes
                .tools
                .iter()
                .map(|t| ChangeJson::from(t, reviews.and_then(|r| r.get(&(o.id, t.name.clone())))))
                .collect::<Vec<_>>()
        });
        ObservationJson {
            id: o.id.0,
            server: o.server.clone(),
            started_at_ms: o.started_at_ms,
            finished_at_ms: o.finished_at_ms,
            finished_at: utc(o.finished_at_ms),
            outcome: o.outcome.as_str(),
            error: match &o.outcome {
                Outcome::Failed { error } => Some(error.clone()),
                Outcome::Ok => None,
            },
            protocol_version: o.protocol_version.clone(),
            tool_count: o.tool_count,
            problem_count: o.problem_count,
            tool_set: o.tool_set.map(|d| d.to_string()),
            previous: step.and_then(|s| s.previous).map(|p| p.0),
            severity: step
                .filter(|s| !s.changes.is_empty())
                .map(|s| s.changes.severity),
            regraded: step.is_some_and(|s| s.changes.regraded),
            authorization: step.and_then(|s| s.authorization.clone()),
            changes,
        }
    }
}

#[derive(Serialize)]
pub struct ChangeJson {
    pub tool: String,
    /// `added`, `removed`, `renamed` or `changed`.
    pub kind: &'static str,
    /// For a rename, the old name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub severity: Severity,
    pub rules: Vec<RuleId>,
    pub review: Option<ReviewJson>,
}

impl ChangeJson {
    fn from(t: &ToolChange, review: Option<&Review>) -> ChangeJson {
        ChangeJson {
            tool: t.name.clone(),
            kind: t.change.kind(),
            from: match &t.change {
                Change::Renamed { from } => Some(from.clone()),
                _ => None,
            },
            severity: t.severity,
            rules: t.rules.clone(),
            review: review.map(ReviewJson::from),
        }
    }
}

#[derive(Serialize)]
pub struct ReviewJson {
    /// `reviewed` or `accepted`.
    pub status: &'static str,
    pub reviewer: String,
    pub at_ms: i64,
    pub at: String,
    pub note: Option<String>,
}

impl ReviewJson {
    fn from(r: &Review) -> ReviewJson {
        ReviewJson {
            status: r.status.as_str(),
            reviewer: r.reviewer.clone(),
            at_ms: r.at_ms,
            at: utc(r.at_ms),
            note: r.note.clone(),
        }
    }
}

#[derive(Serialize)]
struct EvidenceJson<'a> {
    #[serde(flatten)]
    evidence: &'a Evidence,
    message: String,
}

#[derive(Serialize)]
struct VersionJson<'a> {
    name: &'a str,
    canonical_digest: String,
    definition: &'a Value,
}

#[derive(Serialize)]
struct ChangeDetailJson<'a> {
    server: &'a str,
    /// The taxonomy that graded the change.
    taxonomy: plumbline_taxonomy::Taxonomy,
    observation: i64,
    previous: i64,
    #[serde(flatten)]
    change: ChangeJson,
    evidence: Vec<EvidenceJson<'a>>,
    old: Option<VersionJson<'a>>,
    new: Option<VersionJson<'a>>,
    /// Every copy of the name in the new listing, when it is listed more
    /// than once (either side); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    copies: Option<Vec<VersionJson<'a>>>,
}

fn change_json<'a>(
    detail: &'a ChangeDetail,
    review: Option<&Review>,
    taxonomy: plumbline_taxonomy::Taxonomy,
) -> ChangeDetailJson<'a> {
    let version = |t: &'a changes::LoadedTool| VersionJson {
        name: &t.name,
        canonical_digest: t.canonical_digest.to_string(),
        definition: &t.definition,
    };
    ChangeDetailJson {
        server: &detail.observation.summary.server,
        taxonomy,
        observation: detail.observation.summary.id.0,
        previous: detail.previous.id.0,
        change: ChangeJson::from(&ToolChange::of(&detail.drift), review),
        evidence: detail
            .drift
            .classification
            .evidence
            .iter()
            .map(|e| EvidenceJson {
                evidence: e,
                message: e.message(),
            })
            .collect(),
        old: detail.old.as_ref().map(version),
        new: detail.new.as_ref().map(version),
        copies: detail
            .copies
            .as_ref()
            .map(|copies| copies.iter().map(version).collect()),
    }
}

#[derive(Serialize)]
struct BaselineToolJson {
    canonical_digest: String,
    observation: i64,
    accepted_by: Option<String>,
    accepted_at_ms: Option<i64>,
}

#[derive(Serialize)]
pub struct BaselineJson {
    server: String,
    explicit: bool,
    tools: BTreeMap<String, BaselineToolJson>,
}

fn baseline_json(b: Baseline) -> BaselineJson {
    BaselineJson {
        server: b.server,
        explicit: b.explicit,
        tools: b
            .tools
            .into_iter()
            .map(|(name, t)| {
                (
                    name,
                    BaselineToolJson {
                        canonical_digest: t.canonical_digest.to_string(),
                        observation: t.observation.0,
                        accepted_by: t.accepted_by,
                        accepted_at_ms: t.accepted_at_ms,
                    },
                )
            })
            .collect(),
    }
}

// ---- extractors ------------------------------------------------------------

/// A JSON body; a body that is not JSON, or not of the expected shape, or
/// not sent as `application/json`, is refused with a JSON error (not
/// axum's plain text), keeping its status (400, 415, 422).
pub(crate) struct ApiJson<T>(pub T);

impl<T, S> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(r) => Err(ApiError(Failure::Rejected(r.status(), r.body_text()))),
        }
    }
}

/// A query string, refused as [`ApiJson`] is.
pub(crate) struct ApiQuery<T>(pub T);

impl<T, S> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(ApiQuery(value)),
            Err(r) => Err(ApiError(Failure::Rejected(r.status(), r.body_text()))),
        }
    }
}

// ---- handlers --------------------------------------------------------------

async fn servers(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let rows = state
        .with_store(|store, inner| Ok(changes::overview(store.store(), &inner.grader)?))
        .await?;
    let servers: Vec<ServerJson> = rows.iter().map(ServerJson::from).collect();
    Ok(Json(serde_json::json!({ "servers": servers })))
}

async fn server(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<ServerJson>, ApiError> {
    let row = state
        .with_store(move |store, inner| {
            let server = changes::server(store.store(), &name)?;
            Ok(changes::server_overview(
                store.store(),
                &inner.grader,
                server,
            )?)
        })
        .await?;
    Ok(Json(ServerJson::from(&row)))
}

async fn baseline(
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Option<BaselineJson>>, ApiError> {
    let baseline = state
        .with_store(move |store, _| {
            changes::server(store.store(), &name)?;
            Ok(store.baseline(&name)?)
        })
        .await?;
    Ok(Json(baseline.map(baseline_json)))
}

/// `?limit=N` on the observations list.
#[derive(serde::Deserialize)]
struct Limit {
    limit: Option<usize>,
}

/// Observations listed when no limit is given, and the most at once.
const DEFAULT_OBSERVATIONS: usize = 200;
const MAX_OBSERVATIONS: usize = 10_000;

async fn observations(
    State(state): State<AppState>,
    Path(name): Path<String>,
    ApiQuery(query): ApiQuery<Limit>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let limit = query
        .limit
        .unwrap_or(DEFAULT_OBSERVATIONS)
        .clamp(1, MAX_OBSERVATIONS);
    let json = state
        .with_store(move |store, inner| {
            changes::server(store.store(), &name)?;
            let (steps, more) = changes::recent(store.store(), &inner.grader, &name, limit)?;
            let reviews = changes::reviews(store.store(), &name)?;
            let list: Vec<ObservationJson> = steps
                .iter()
                .rev()
                .map(|s| ObservationJson::from(&s.summary, Some(s), Some(&reviews)))
                .collect();
            Ok(serde_json::json!({ "server": name, "observations": list, "more": more }))
        })
        .await?;
    Ok(Json(json))
}

#[derive(Serialize)]
struct ToolEntryJson {
    position: u32,
    name: Option<String>,
    raw_digest: String,
    canonical_digest: Option<String>,
}

#[derive(Serialize)]
struct ProblemJson {
    position: Option<u32>,
    kind: &'static str,
    tool_name: Option<String>,
    message: String,
}

async fn observation(
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let view = state
        .with_store(move |store, inner| observation_view(&*store, inner, &name, &id))
        .await?;
    let o = &view.observation;
    let tools: Vec<ToolEntryJson> = o
        .tools
        .iter()
        .map(|t| ToolEntryJson {
            position: t.position,
            name: t.name.clone(),
            raw_digest: t.raw_digest.to_string(),
            canonical_digest: t.canonical_digest.map(|d| d.to_string()),
        })
        .collect();
    let problems: Vec<ProblemJson> = o
        .problems
        .iter()
        .map(|p| ProblemJson {
            position: p.position,
            kind: p.kind.as_str(),
            tool_name: p.tool_name.clone(),
            message: p.message.clone(),
        })
        .collect();
    let observation = ObservationJson::from(&o.summary, Some(&view.step), Some(&view.reviews));
    // What the server published about its authorization, as recorded.
    let authorization = o
        .authorization
        .as_deref()
        .and_then(|d| serde_json::from_slice::<serde_json::Value>(d).ok());
    Ok(Json(serde_json::json!({
        "observation": observation,
        "tools": tools,
        "problems": problems,
        "authorization": authorization,
    })))
}

async fn change(
    State(state): State<AppState>,
    Path((name, id, ToolName(tool))): Path<(String, String, ToolName)>,
    headers: axum::http::HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    crate::not_cross_site(&headers)?;
    // Read under the store lock; grade the one change after releasing it.
    let (inputs, review) = state
        .with_store(move |store, inner| change_inputs_view(&*store, inner, &name, &id, &tool))
        .await?;
    let json = state
        .clone()
        .costly(move || {
            let detail = inputs.grade(&state.inner.grader);
            serde_json::to_value(change_json(
                &detail,
                review.as_ref(),
                state.inner.grader.taxonomy(),
            ))
            .map_err(|e| Failure::Internal(format!("cannot write the change as JSON: {e}")))
        })
        .await??;
    Ok(Json(json))
}

/// The body of `POST …/review`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReviewRequest {
    status: String,
    reviewer: Option<String>,
    note: Option<String>,
}

async fn review(
    State(state): State<AppState>,
    Path((name, id, ToolName(tool))): Path<(String, String, ToolName)>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ReviewRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    crate::auth::same_site(&headers)?;
    let verdict = Verdict {
        status: parse_status(&body.status)?,
        reviewer: body.reviewer,
        note: body.note,
    };
    let (review, baseline) = record_verdict(&state, name, id, tool, verdict).await?;
    Ok(Json(serde_json::json!({
        "review": ReviewJson::from(&review),
        "baseline": baseline.map(baseline_json),
    })))
}

async fn tool(
    State(state): State<AppState>,
    Path((name, ToolName(tool))): Path<(String, ToolName)>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let view = state
        .with_store(move |store, inner| tool_view(&*store, inner, &name, &tool))
        .await?;
    let history: Vec<serde_json::Value> = view
        .history
        .iter()
        .map(|h| {
            serde_json::json!({
                "observation": h.observation.0,
                "finished_at_ms": h.finished_at_ms,
                "present": h.present,
                "canonical_digest": h.canonical_digest.map(|d| d.to_string()),
                "change": view.changes_at.contains(&h.observation),
            })
        })
        .collect();
    Ok(Json(serde_json::json!({
        "server": view.server,
        "tool": view.tool,
        "listed_now": view.listed_now,
        "latest": view.latest.as_ref().map(|(at, digest, definition)| serde_json::json!({
            "observation": at.0,
            "canonical_digest": digest.to_string(),
            "definition": definition,
        })),
        "baseline": view.baseline.map(|b| BaselineToolJson {
            canonical_digest: b.canonical_digest.to_string(),
            observation: b.observation.0,
            accepted_by: b.accepted_by,
            accepted_at_ms: b.accepted_at_ms,
        }),
        "history": history,
    })))
}

/// `POST …/observations/{observation}/review`: every change at once.
async fn review_all(
    State(state): State<AppState>,
    Path((name, id)): Path<(String, String)>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<ReviewRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    crate::auth::same_site(&headers)?;
    let verdict = Verdict {
        status: parse_status(&body.status)?,
        reviewer: body.reviewer,
        note: body.note,
    };
    let status = verdict.status;
    let done = crate::views::review_all(&state, name, id, verdict).await?;
    Ok(Json(serde_json::json!({
        "observation": done.observation.0,
        "status": status.as_str(),
        "recorded": done.recorded,
        "skipped": done
            .skipped
            .iter()
            .map(|(tool, reason)| serde_json::json!({"tool": tool, "reason": reason}))
            .collect::<Vec<_>>(),
    })))
}
