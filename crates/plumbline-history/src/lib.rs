//! Plumbline's history: the one service layer above the store
//! (`plumbline-store`) and the drift (`plumbline-drift`).
//!
//! Every listing is **recorded once and graded once**: [`record`] stores an
//! observation with its problems, grades its drift against the server's
//! previous successful observation under the configured taxonomy, and keeps
//! each change's summary (tool, kind of change, severity, rules; keyed by
//! the two tool sets, the [`Grader`]'s taxonomy and the foreign inventory
//! it was graded with, which is kept with the observation) in the store. Every
//! reader, the `log`, the dashboard, the watcher, reads those summaries and
//! never grades again; evidence for one change is computed on demand, from
//! the stored raw bytes, by the same code ([`read::change`]).
//!
//! Only this crate calls the classifier for stored observations. It does
//! no network I/O. [`History`] is the one way into the store for the
//! watcher, the dashboard and the CLI: they open one where the history is
//! kept and pass its store to the functions here.
//!
//! - [`record`]: recording observations and grading their drift.
//! - [`read`]: timelines, changes, overviews, reviews and baselines.
//! - [`summary`]: the stored form of a drift's grades.
//! - [`alerts`]: what each recorded observation alerts, to which channel.

pub mod alerts;
mod handle;
pub mod links;
pub mod read;
pub mod record;
pub mod summary;

use std::sync::atomic::{AtomicUsize, Ordering};

use plumbline_store::Store;
use plumbline_taxonomy::{Classifier, Taxonomy};

pub use handle::History;
/// The store's model, as this history's callers build and read it.
pub use plumbline_store::{
    default_location, digest, project_location, time, AlertCounts, AlertId, Baseline, BaselineEdit,
    BaselineTool, Digest, GuardEvent, Lease, LeaseClaim, LeaseToken, Location, NewAlert,
    NewGuardEvent, NewObservation, NewReview, NormalizedTool, NormalizedValue, Observation,
    ObservationId, ObservationSummary, OutboxAlert, Outcome, Problem, ProblemKind, RawTool, Review,
    ReviewStatus, Server, StoreError, ToolHistoryEntry,
};
pub use read::{Changes, ToolChange};
pub use record::{record, record_repeats, record_with, regrade, Observed, Recorded, Repeats};

/// Why a history operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    /// What was asked for is not in the history.
    #[error("{0}")]
    NotFound(String),
    /// The request cannot be carried out as asked.
    #[error("{0}")]
    Invalid(String),
    /// A change that cannot be accepted into a baseline: its name is
    /// listed more than once, so no one version is the tool.
    #[error("{0}")]
    NotAcceptable(String),
    /// The store is not as the history left it.
    #[error("{0}")]
    Inconsistent(String),
    /// An observation was recorded (committed), but grading it failed:
    /// grade it again with [`record::regrade`], never record it twice.
    #[error("observation {observation} is recorded but not yet graded: {source}")]
    Derived {
        observation: ObservationId,
        #[source]
        source: Box<HistoryError>,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The grader of a history: the classifier of one taxonomy, the key its
/// stored summaries are filed under, a cache of summaries already read,
/// and a count of the drifts it graded (so that tests and `/metrics` can
/// tell reading from grading).
pub struct Grader {
    classifier: Classifier,
    key: String,
    cache: read::DriftCache,
    graded: AtomicUsize,
}

impl Grader {
    /// A grader for `taxonomy` with its built-in lists.
    pub fn new(taxonomy: Taxonomy) -> Grader {
        Grader::with_classifier(Classifier::for_taxonomy(taxonomy))
    }

    pub fn with_classifier(classifier: Classifier) -> Grader {
        Grader {
            key: summary_key(classifier.taxonomy()),
            classifier,
            cache: read::DriftCache::default(),
            graded: AtomicUsize::new(0),
        }
    }

    pub fn taxonomy(&self) -> Taxonomy {
        self.classifier.taxonomy()
    }

    pub fn classifier(&self) -> &Classifier {
        &self.classifier
    }

    /// The key stored summaries are filed under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// How many drifts between two listings this grader has graded.
    pub fn graded(&self) -> usize {
        self.graded.load(Ordering::Relaxed)
    }

    fn count(&self) {
        self.graded.fetch_add(1, Ordering::Relaxed);
    }
}

/// Who graded a stored drift summary, and in which encoding: a summary is
/// used only by the grader that wrote it, so stored grades are keyed by
/// taxonomy. Rule changes come with a new release (spec 7), and so with a
/// new key. Summary v2: added tools graded by the drift policy; v3:
/// unreadable tools reported, failing closed; v4: graded with the foreign
/// inventory kept with the observation ([`summary_key_with`]), where v3
/// summaries may have been graded with names nobody kept.
///
/// A taxonomy still in draft (taxonomy-v3) adds its revision, so that
/// grades stored under an earlier draft are graded again (and marked as
/// re-grades) rather than served as current.
pub fn summary_key(taxonomy: Taxonomy) -> String {
    let revision = taxonomy
        .revision()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!(
        "plumbline {}; {}{revision}, default imperatives; summary v4",
        env!("CARGO_PKG_VERSION"),
        taxonomy.id()
    )
}

/// The key a change's summary is filed under: the grader's key
/// ([`summary_key`], [`Grader::key`]), and the
/// digest of the foreign inventory it was graded with, if any
/// ([`plumbline_store::Store::inventory`]). A grade is a function of what
/// is stored: the two tool sets, this inventory and the grader.
pub fn summary_key_with(grader: &str, inventory: Option<&Digest>) -> String {
    match inventory {
        None => grader.to_owned(),
        Some(d) => format!("{grader}; inventory {d}"),
    }
}

/// The foreign inventory a change of `server` is graded with: the tool
/// names of the latest successful observation of every other server the
/// history holds, as recorded so far (in a batch, the servers recorded
/// before this one count with their new listing). Kept with the
/// observation, so that readers grade the change with the same names.
///
/// The store keeps each server's names as its observations are recorded
/// ([`Store::foreign_names`]), so this is one statement however many
/// servers the history holds.
pub fn foreign_inventory(store: &impl Store, server: &str) -> Result<Vec<String>, HistoryError> {
    Ok(store.foreign_names(server)?)
}

/// How two identities (JSON objects: how a server is reached, as the
/// configuration writes them)
/// differ, one readable line per key: `args: ["a"] → ["a","b"]`, with
/// `(none)` for a key on one side only. Empty when they are the same (or
/// either is not a JSON object, when the two texts are compared whole).
pub fn identity_changes(old: &str, new: &str) -> Vec<String> {
    use serde_json::Value;
    let shown = |v: Option<&Value>| match v {
        None | Some(Value::Null) => "(none)".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    };
    let (Ok(Value::Object(o)), Ok(Value::Object(n))) = (
        serde_json::from_str::<Value>(old),
        serde_json::from_str::<Value>(new),
    ) else {
        return if old == new {
            Vec::new()
        } else {
            vec![format!("{old} → {new}")]
        };
    };
    let keys: std::collections::BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    keys.into_iter()
        .filter(|k| o.get(*k).unwrap_or(&Value::Null) != n.get(*k).unwrap_or(&Value::Null))
        .map(|k| format!("{k}: {} → {}", shown(o.get(k)), shown(n.get(k))))
        .collect()
}

#[cfg(test)]
mod identity_tests {
    use super::identity_changes;

    #[test]
    fn identity_changes_are_named_key_by_key() {
        let old = r#"{"args":["serve"],"command":"npx","cwd":null,"transport":"stdio"}"#;
        let new =
            r#"{"args":["serve","--port","1"],"command":"npx","cwd":"/srv","transport":"stdio"}"#;
        assert_eq!(
            identity_changes(old, new),
            [
                r#"args: ["serve"] → ["serve","--port","1"]"#,
                "cwd: (none) → /srv"
            ]
        );
        assert!(identity_changes(old, old).is_empty());
        assert_eq!(identity_changes("x", "y"), ["x → y"]);
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn a_draft_taxonomys_summaries_are_filed_under_its_revision() {
        // v1 and v2 are final: their keys are what stores already hold.
        for t in [Taxonomy::V1, Taxonomy::V2] {
            assert_eq!(
                summary_key(t),
                format!(
                    "plumbline {}; {}, default imperatives; summary v4",
                    env!("CARGO_PKG_VERSION"),
                    t.id()
                )
            );
        }
        let v3 = summary_key(Taxonomy::V3);
        assert!(
            v3.contains(&format!(
                "taxonomy-v3 ({})",
                plumbline_taxonomy::taxonomy::V3_REVISION
            )),
            "{v3}"
        );
    }
}
