//! The HTML pages: server-rendered with maud, no script, one stylesheet.
//!
//! maud escapes every value interpolated with `(…)`, and server text goes
//! through [`crate::text`] on top of that, so hidden code points show as
//! badges. This module never uses `PreEscaped`.
//!
//! This file holds the routes and the building blocks (layout, badges,
//! labels); each page lives in its own submodule: [`overview`], [`rules`],
//! [`server`], [`observation`], [`change`] (with the side-by-side field
//! rows and the review form) and [`tool`]. What a page shows comes from
//! [`crate::views`], as its JSON twin's does.

use std::collections::BTreeMap;
use std::ops::Range;

use axum::extract::{Form, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::{html, Markup, DOCTYPE};
use plumbline_drift::Change;
use plumbline_history::{ObservationId, Outcome, Review};
use plumbline_taxonomy::diff::{diff as structural_diff, ChangeKind};
use plumbline_taxonomy::json::{Object, Value};
use plumbline_taxonomy::{Detail, Evidence, RuleId, Severity, Taxonomy};
use serde::Deserialize;

use crate::changes::{self, ChangeDetail, Sort, ToolChange};
use crate::error::{ApiError, Failure, PageError};
use crate::links::{self, utc, ToolName};
use crate::text::{self, line};
use crate::views::{self, Verdict};
use crate::worddiff;
use crate::AppState;

mod change;
mod observation;
mod overview;
mod reference;
mod rules;
mod server;
#[cfg(test)]
mod tests;
mod tool;

use change::*;
use observation::*;
use overview::*;
use reference::*;
use rules::*;
use server::*;
use tool::*;

/// The stylesheet, served at [`STYLESHEET`].
pub const CSS: &str = include_str!("../../static/plumbline.css");

/// Where the stylesheet is served.
pub const STYLESHEET: &str = "/static/plumbline.css";

/// How many observations a server page lists.
const TIMELINE_ROWS: usize = 200;

/// The most evidence highlights drawn in one field.
const MAX_HIGHLIGHTS: usize = 1_000;

/// The most bytes of one text (a definition, one side of a field) a page
/// shows; past it the page shows the start and links to the raw bytes, so
/// a megabyte tool makes a page of a few hundred kilobytes, not fifty
/// megabytes.
const MAX_SHOWN: usize = 100_000;

/// The most evidence items a change page lists.
const MAX_EVIDENCE_SHOWN: usize = 200;

/// `text` cut to at most `max` bytes, at a character boundary.
fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A preformatted text, bounded by [`MAX_SHOWN`]: past it, the start and
/// a link to download the raw definition.
fn bounded_block(text: &str, raw: Option<&str>) -> Markup {
    let shown = clip(text, MAX_SHOWN);
    html! {
        pre.json { (text::block(shown)) }
        @if shown.len() < text.len() {
            p.truncated {
                "Showing the first " (shown.len()) " of " (text.len()) " bytes. "
                @if let Some(raw) = raw { a href=(raw) download { "Download the raw definition" } "." }
            }
        }
    }
}

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(overview))
        .route(STYLESHEET, get(stylesheet))
        .route("/rules", get(rules))
        .route("/api", get(api_reference))
        .route("/rules/{rule}", get(rule))
        .route("/servers/{server}", get(server))
        .route(
            "/servers/{server}/observations/{observation}",
            get(observation),
        )
        .route(
            "/servers/{server}/observations/{observation}/review",
            post(review_all),
        )
        .route(
            "/servers/{server}/observations/{observation}/tools/{tool}",
            get(change),
        )
        .route(
            "/servers/{server}/observations/{observation}/tools/{tool}/review",
            post(review),
        )
        .route(
            "/servers/{server}/observations/{observation}/tools/{tool}/raw",
            get(raw),
        )
        .route("/servers/{server}/tools/{tool}", get(tool))
}

// ---- building blocks --------------------------------------------------------

/// A page: `taxonomy` names the grader in the footer (none on error pages,
/// which may come before any state).
fn layout(taxonomy: Option<Taxonomy>, title: &str, body: Markup) -> Html<String> {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                // A title is plain text in tabs and history lists: server
                // text in it is shown with its hidden characters escaped.
                title { (plumbline_taxonomy::sanitize::for_terminal(title, false)) " · Plumbline" }
                link rel="stylesheet" href=(STYLESHEET);
            }
            body {
                header.top {
                    a.brand href="/" { "Plumbline" }
                    nav {
                        a href="/" { "Servers" }
                        a href="/rules" { "Rules" }
                        a href="/api" { "API" }
                    }
                }
                main { (body) }
                footer {
                    @if let Some(t) = taxonomy {
                        "Graded with " a href="/rules" { (t.id()) }
                        ": the same two tools always get the same grade, with the evidence that produced it."
                    } @else {
                        "Plumbline: the same two tools always get the same grade, with the evidence that produced it."
                    }
                }
            }
        }
    };
    Html(page.into_string())
}

/// The page for a failed request.
pub(crate) fn error_page(status: StatusCode, message: &str) -> Html<String> {
    let reason = status.canonical_reason().unwrap_or("Error");
    layout(
        None,
        reason,
        html! {
            h1 { (status.as_u16()) " " (reason) }
            p.error { (line(message)) }
            p { a href="/" { "Back to the servers" } }
        },
    )
}

/// Anything no route matches: JSON under `/api/`, a page elsewhere.
pub(crate) async fn not_found(uri: Uri) -> Response {
    let failure = Failure::NotFound(format!("nothing is at {}", uri.path()));
    if uri.path().starts_with("/api/") {
        ApiError(failure).into_response()
    } else {
        PageError(failure).into_response()
    }
}

fn severity_badge(s: Severity) -> Markup {
    html! { span class={ "sev sev-" (s.as_str().to_ascii_lowercase()) } { (s.as_str()) } }
}

fn outcome_badge(o: &Outcome) -> Markup {
    html! { span class={ "outcome outcome-" (o.as_str()) } { (o.as_str()) } }
}

fn rule_link(r: RuleId) -> Markup {
    html! { a.rule href=(links::rule(r)) title=(r.title()) { (r.as_str()) } }
}

/// What a server says it is, from its `serverInfo` as sent: its title or
/// name, and version (`Example Server (example-server 1.2.0)`); `None`
/// when it sent none, or nothing readable.
fn server_info(raw: Option<&[u8]>) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(raw?).ok()?;
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).filter(|x| !x.is_empty());
    let name = field("name");
    let version = field("version");
    let id = match (name, version) {
        (Some(n), Some(v)) => Some(format!("{n} {v}")),
        (Some(n), None) => Some(n.to_owned()),
        (None, Some(v)) => Some(format!("version {v}")),
        (None, None) => None,
    };
    match (field("title"), id) {
        (Some(t), Some(id)) if Some(t) != name => Some(format!("{t} ({id})")),
        (Some(t), None) => Some(t.to_owned()),
        (_, id) => id,
    }
}

/// An RFC 6901 pointer for a narrow column: a line may break after each
/// `/` (`<wbr>`), so the stylesheet never has to break inside a token
/// unless one token alone is wider than the column.
fn pointer_markup(pointer: &str) -> Markup {
    html! {
        @if pointer.is_empty() {
            "(root)"
        } @else {
            @for (i, token) in pointer.split('/').enumerate() {
                @if i > 0 { "/" wbr; }
                (line(token))
            }
        }
    }
}

fn kind_label(change: &Change) -> Markup {
    html! {
        @match change {
            Change::Renamed { from } => span.kind { "renamed from " (line(from)) },
            Change::Unreadable { reason } => span.kind { "unreadable, not graded: " (line(reason)) },
            other => span.kind { (other.kind()) },
        }
    }
}

fn review_label(review: Option<&Review>) -> Markup {
    html! {
        @match review {
            Some(r) => span class={ "review review-" (r.status.as_str()) } title=(format!("by {} at {}", r.reviewer, utc(r.at_ms))) {
                (r.status.as_str())
            },
            None => span.review.review-none { "unreviewed" },
        }
    }
}

fn short(d: &plumbline_history::Digest) -> String {
    d.to_string().chars().take(12).collect()
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_json())
}

/// A stored JSON document, indented for reading; as stored when it is not
/// JSON.
fn pretty_json(bytes: &[u8]) -> String {
    match serde_json::from_slice::<serde_json::Value>(bytes) {
        Ok(v) => serde_json::to_string_pretty(&v).unwrap_or_default(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

fn first_line(s: &str, max: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(max).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

// ---------------------------------------------------------------------------
// Types the submodules share (kept here so that their fields are visible to
// every submodule).

/// One changed field of a tool, as shown side by side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRow {
    pub pointer: String,
    /// The text before and after: a string's own text, any other value as
    /// compact JSON; `None` where the field is absent.
    pub old: Option<String>,
    pub new: Option<String>,
    /// Rules whose evidence points at the field as a whole.
    pub rules: Vec<RuleId>,
    /// Rules whose evidence is a piece of the new text, with where.
    pub highlights: Vec<(Range<usize>, RuleId)>,
}

/// The review form's fields.
#[derive(Deserialize)]
struct ReviewForm {
    csrf: String,
    status: String,
    reviewer: Option<String>,
    note: Option<String>,
}
