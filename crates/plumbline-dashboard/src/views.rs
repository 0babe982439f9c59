//! What a page and its JSON twin both show, read from the history in one
//! store call: the view models behind the observation, change and tool
//! pages, and recording a reviewer's verdict.

use std::collections::BTreeMap;

use plumbline_history::{
    Baseline, History, NewReview, Observation, ObservationId, Review, ReviewStatus,
};
use plumbline_taxonomy::json::Value;

use crate::changes::{self, Step};
use crate::error::Failure;
use crate::AppState;

/// The longest reviewer name and note accepted, in characters.
pub const MAX_REVIEWER_CHARS: usize = 200;

pub const MAX_NOTE_CHARS: usize = 4000;

/// An observation id from a path; anything else names no observation.
pub(crate) fn observation_id(s: &str) -> Result<ObservationId, Failure> {
    s.parse()
        .ok()
        .filter(|id: &ObservationId| id.0 > 0)
        .ok_or_else(|| Failure::NotFound(format!("there is no observation {s:?}")))
}

/// One observation with its tools, problems and changes, shared with the
/// observation page.
pub(crate) struct ObservationView {
    pub observation: Observation,
    pub step: Step,
    pub reviews: BTreeMap<(ObservationId, String), Review>,
}

pub(crate) fn observation_view(
    store: &History,
    inner: &crate::Inner,
    server: &str,
    id: &str,
) -> Result<ObservationView, Failure> {
    changes::server(store.store(), server)?;
    let id = observation_id(id)?;
    let observation = changes::observation_of(store.store(), server, id)?;
    let step = changes::step(store.store(), &inner.grader, &observation.summary)?;
    let reviews = changes::reviews(store.store(), server)?;
    Ok(ObservationView {
        observation,
        step,
        reviews,
    })
}

/// What grading one change needs, read while holding the store (grading
/// comes after letting it go), and the change's verdict.
pub(crate) fn change_inputs_view(
    store: &History,
    inner: &crate::Inner,
    server: &str,
    id: &str,
    tool: &str,
) -> Result<(changes::ChangeInputs, Option<Review>), Failure> {
    changes::server(store.store(), server)?;
    let id = observation_id(id)?;
    let inputs = changes::change_inputs(store.store(), &inner.grader, server, id, tool)?;
    let review = changes::reviews(store.store(), server)?.remove(&(id, tool.to_owned()));
    Ok((inputs, review))
}

/// The reviewer (the given one, else the dashboard's) and note of a
/// verdict, trimmed and within their bounds.
fn checked(
    state: &AppState,
    reviewer: Option<String>,
    note: Option<String>,
) -> Result<(String, Option<String>), Failure> {
    let reviewer = reviewer
        .map(|r| r.trim().to_owned())
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| state.inner.reviewer.clone());
    if reviewer.is_empty() {
        return Err(Failure::BadRequest("a reviewer name is needed".to_owned()));
    }
    if reviewer.chars().count() > MAX_REVIEWER_CHARS {
        return Err(Failure::BadRequest(format!(
            "the reviewer name is longer than {MAX_REVIEWER_CHARS} characters"
        )));
    }
    let note = note.map(|n| n.trim().to_owned()).filter(|n| !n.is_empty());
    if note
        .as_ref()
        .is_some_and(|n| n.chars().count() > MAX_NOTE_CHARS)
    {
        return Err(Failure::BadRequest(format!(
            "the note is longer than {MAX_NOTE_CHARS} characters"
        )));
    }
    Ok((reviewer, note))
}

/// A verdict to record, from the API or a form.
pub(crate) struct Verdict {
    pub status: ReviewStatus,
    pub reviewer: Option<String>,
    pub note: Option<String>,
}

/// Records a verdict on a change; accepting also moves the baseline.
/// Returns the recorded review.
pub(crate) async fn record_verdict(
    state: &AppState,
    server: String,
    id: String,
    tool: String,
    verdict: Verdict,
) -> Result<(Review, Option<Baseline>), Failure> {
    let (reviewer, note) = checked(state, verdict.reviewer, verdict.note)?;
    let at_ms = plumbline_history::time::now_ms();
    state
        .with_store(move |store, inner| {
            changes::server(store.store(), &server)?;
            let id = observation_id(&id)?;
            // The change must exist: a verdict on nothing is refused.
            let detail = changes::change(store.store(), &inner.grader, &server, id, &tool)?;
            let review = NewReview {
                observation: id,
                tool: tool.clone(),
                reviewer,
                at_ms,
                note,
            };
            let baseline = match verdict.status {
                ReviewStatus::Reviewed => {
                    store.mark_reviewed(&review)?;
                    None
                }
                ReviewStatus::Accepted => {
                    store.accept_change(&review, &changes::baseline_edits(&detail)?)?;
                    store.baseline(&server)?
                }
            };
            Ok((
                Review {
                    observation: review.observation,
                    tool: review.tool,
                    status: verdict.status,
                    reviewer: review.reviewer,
                    at_ms: review.at_ms,
                    note: review.note,
                },
                baseline,
            ))
        })
        .await
}

pub(crate) fn parse_status(s: &str) -> Result<ReviewStatus, Failure> {
    ReviewStatus::from_stored(s).ok_or_else(|| {
        Failure::BadRequest(format!(
            "unknown review status {s:?}: expected \"reviewed\" or \"accepted\""
        ))
    })
}

/// A tool's current definition and history, shared with the tool page.
pub(crate) struct ToolView {
    pub server: String,
    pub tool: String,
    /// The latest version seen: the observation it first appeared at, its
    /// digest and definition.
    pub latest: Option<(ObservationId, plumbline_history::Digest, Value)>,
    /// Whether the latest successful observation lists the tool.
    pub listed_now: bool,
    pub baseline: Option<plumbline_history::BaselineTool>,
    pub history: Vec<plumbline_history::ToolHistoryEntry>,
    /// Observations at which the tool has a change, for links.
    pub changes_at: std::collections::BTreeSet<ObservationId>,
}

pub(crate) fn tool_view(
    store: &History,
    inner: &crate::Inner,
    server: &str,
    tool: &str,
) -> Result<ToolView, Failure> {
    changes::server(store.store(), server)?;
    let history = store.tool_history(server, tool)?;
    if history.is_empty() {
        return Err(Failure::NotFound(format!(
            "server {server:?} never listed a tool {tool:?}"
        )));
    }
    let latest = match history
        .iter()
        .rev()
        .find_map(|h| Some((h.observation, h.canonical_digest?)))
    {
        Some((at, digest)) => {
            let bytes = store.tool_version(&digest)?.ok_or_else(|| {
                Failure::Internal(format!("tool version {digest} is missing from the store"))
            })?;
            let value = plumbline_taxonomy::json::parse_tool(&bytes).map_err(|e| {
                Failure::Internal(format!("tool version {digest} does not parse: {e}"))
            })?;
            Some((at, digest, value))
        }
        None => None,
    };
    let listed_now = history.last().is_some_and(|h| h.present);
    let baseline = store
        .baseline(server)?
        .and_then(|mut b| b.tools.remove(tool));
    let changes_at = changes::history(store.store(), &inner.grader, server)?
        .into_iter()
        .filter(|s| s.changes.tools.iter().any(|t| t.name == tool))
        .map(|s| s.summary.id)
        .collect();
    Ok(ToolView {
        server: server.to_owned(),
        tool: tool.to_owned(),
        latest,
        listed_now,
        baseline,
        history,
        changes_at,
    })
}

/// What reviewing every change of an observation did.
pub(crate) struct ReviewedAll {
    pub observation: ObservationId,
    pub recorded: Vec<String>,
    /// (tool, why) for changes that could not take the verdict.
    pub skipped: Vec<(String, String)>,
}

/// Records `verdict` on every change of an observation, as the
/// single-change review records each, in one transaction: all of them or,
/// when the store refuses one, none. A change that cannot be accepted (a
/// name listed more than once, an unreadable tool) is skipped and said so.
/// The baseline edits of every change are worked out in one pass over the
/// two listings, so accepting 10,000 changes costs one pass and one
/// commit, not one grading and one commit each.
pub(crate) async fn review_all(
    state: &AppState,
    server: String,
    id: String,
    verdict: Verdict,
) -> Result<ReviewedAll, Failure> {
    let (reviewer, note) = checked(state, verdict.reviewer, verdict.note)?;
    let status = verdict.status;
    let at_ms = plumbline_history::time::now_ms();
    state
        .with_store(move |store, inner| {
            changes::server(store.store(), &server)?;
            let observation = observation_id(&id)?;
            let all =
                changes::baseline_edits_all(store.store(), &inner.grader, &server, observation)?;
            if all.is_empty() {
                return Err(Failure::BadRequest(format!(
                    "observation {observation} has no change to review"
                )));
            }
            let review = |tool: &str| NewReview {
                observation,
                tool: tool.to_owned(),
                reviewer: reviewer.clone(),
                at_ms,
                note: note.clone(),
            };
            let mut done = ReviewedAll {
                observation,
                recorded: Vec::new(),
                skipped: Vec::new(),
            };
            match status {
                ReviewStatus::Reviewed => {
                    let reviews: Vec<NewReview> =
                        all.iter().map(|(tool, _)| review(tool)).collect();
                    store.mark_all_reviewed(&reviews)?;
                    done.recorded = all.into_iter().map(|(tool, _)| tool).collect();
                }
                ReviewStatus::Accepted => {
                    let mut accepts = Vec::new();
                    for (tool, edits) in all {
                        match edits {
                            Ok(edits) => {
                                accepts.push((review(&tool), edits));
                                done.recorded.push(tool);
                            }
                            Err(why) => done.skipped.push((tool, why)),
                        }
                    }
                    store.accept_changes(&accepts)?;
                }
            }
            Ok(done)
        })
        .await
}
