//! What goes into the store and what comes out of it.
//!
//! These types are the store's own, independent of the MCP client: the app
//! layer maps a listing onto [`NewObservation`], and reads come back as
//! [`ObservationSummary`], [`Observation`] and [`ToolHistoryEntry`]. A
//! reviewer's verdict on a change goes in as [`NewReview`] and comes back as
//! [`Review`]; a server's [`Baseline`] is what its accepted changes add up
//! to. No SQL type appears here, so another backend returns the same values.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::Digest;

/// The store's id of an observation: increasing in the order observations
/// were recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObservationId(pub i64);

impl fmt::Display for ObservationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for ObservationId {
    type Err = std::num::ParseIntError;

    fn from_str(s: &str) -> Result<ObservationId, Self::Err> {
        s.parse().map(ObservationId)
    }
}

/// A monitored server as registered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// The unique name from the registry (`plumbline.toml`).
    pub name: String,
    /// How it is reached, as the RFC 8785 canonical form of the identity
    /// object given to [`crate::Store::put_server`]: transport and command
    /// or URL. The caller guarantees it holds no secret.
    pub identity: String,
}

/// How an observation ended: the one outcome type of an observation,
/// stored, reported and shown. In JSON it is the fields `"outcome"`
/// (`"ok"` or `"failed"`) and, for a failure, `"error"`, flattened into
/// the object that holds it.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "lowercase")]
pub enum Outcome {
    /// The tools were listed; the observation has a tool set.
    Ok,
    /// The server could not be observed. A failure has no tool set, so it
    /// can never read as "all tools removed".
    Failed {
        /// What went wrong, for people.
        error: String,
    },
}

impl Outcome {
    /// `"ok"` or `"failed"`, as stored.
    pub fn as_str(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed { .. } => "failed",
        }
    }

    pub fn is_ok(&self) -> bool {
        matches!(self, Outcome::Ok)
    }

    /// Why the observation failed; `None` for one that succeeded.
    pub fn error(&self) -> Option<&str> {
        match self {
            Outcome::Ok => None,
            Outcome::Failed { error } => Some(error),
        }
    }
}

/// One tool object of a listing, exactly as the server sent it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawTool {
    /// The tool's `name` as the caller read it; `None` when the tool has no
    /// string name (a malformed tool). The store does not re-derive it.
    pub name: Option<String>,
    /// The bytes of the tool's JSON value, byte for byte as received.
    pub raw: Vec<u8>,
    /// The tool as compared, when the server's normalisation rules changed
    /// some of its text: everything that compares versions (drift,
    /// timelines, baselines) uses it; `raw` stays what was sent.
    pub normalized: Option<NormalizedTool>,
}

/// A tool rewritten by its server's normalisation rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NormalizedTool {
    /// The rewritten tool's JSON.
    pub raw: Vec<u8>,
    /// Each string rewritten, and by which rule.
    pub by: Vec<NormalizedValue>,
}

/// One string a normalisation rule rewrote.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct NormalizedValue {
    /// The RFC 6901 pointer of the string within the tool.
    pub pointer: String,
    /// The rule's name in `plumbline.toml`.
    pub rule: String,
}

/// How a stored tool entry was normalised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Normalized {
    /// SHA-256 of the rewritten tool's bytes: [`crate::Store::raw_tool`].
    pub raw_digest: Digest,
    pub by: Vec<NormalizedValue>,
}

/// What kind of problem an observation had.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProblemKind {
    /// A tool that is not a JSON object the taxonomy reader accepts. Its raw
    /// bytes are kept; it has no canonical form.
    MalformedTool,
    /// A tool name that an earlier tool of the same listing already has.
    /// Both are kept, never merged.
    DuplicateName,
    /// Anything else the caller wants remembered with the observation.
    Other,
}

impl ProblemKind {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::MalformedTool => "malformed_tool",
            ProblemKind::DuplicateName => "duplicate_name",
            ProblemKind::Other => "other",
        }
    }

    /// The kind a stored spelling names.
    pub fn from_stored(s: &str) -> Option<ProblemKind> {
        match s {
            "malformed_tool" => Some(ProblemKind::MalformedTool),
            "duplicate_name" => Some(ProblemKind::DuplicateName),
            "other" => Some(ProblemKind::Other),
            _ => None,
        }
    }
}

/// A problem found while observing a server.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Problem {
    /// The tool's 0-based position in the listing, when one tool is at fault.
    pub position: Option<u32>,
    pub kind: ProblemKind,
    /// The tool's name, when it has one.
    pub tool_name: Option<String>,
    /// What is wrong, for people.
    pub message: String,
}

/// One observation to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewObservation {
    /// A server registered with [`crate::Store::put_server`].
    pub server: String,
    /// When the observation started, in Unix milliseconds.
    pub started_at_ms: i64,
    /// When it ended, in Unix milliseconds.
    pub finished_at_ms: i64,
    pub outcome: Outcome,
    /// The negotiated MCP protocol version, e.g. `2025-06-18`.
    pub protocol_version: Option<String>,
    /// The `serverInfo` object's bytes as received.
    pub server_info: Option<Vec<u8>>,
    /// The server's `capabilities` object's bytes as received.
    pub capabilities: Option<Vec<u8>>,
    /// The server's `instructions` text.
    pub instructions: Option<String>,
    /// What the server published about its authorization when it asks
    /// for one (OAuth): a JSON document (its protected resource metadata
    /// and its authorization server's, as `plumbline-mcp` reads them).
    /// `None` for a server without authorization, or when it could not be
    /// read this time (not a change).
    pub authorization: Option<Vec<u8>>,
    /// The listing, in the order received. Must be empty when the outcome
    /// is a failure.
    pub tools: Vec<RawTool>,
    /// Problems the caller found. The store finds malformed tools and
    /// duplicate names itself, so these are the others.
    pub problems: Vec<Problem>,
}

/// One tool of a stored listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolEntry {
    /// 0-based position in the listing.
    pub position: u32,
    pub name: Option<String>,
    /// SHA-256 of the raw bytes as received: [`crate::Store::raw_tool`].
    pub raw_digest: Digest,
    /// SHA-256 of the RFC 8785 canonical form, the tool version's identity:
    /// [`crate::Store::tool_version`]; of the normalised tool's when the
    /// entry was normalised. `None` for a malformed tool.
    pub canonical_digest: Option<Digest>,
    /// The tool as compared, when normalisation rules rewrote it.
    pub normalized: Option<Normalized>,
}

/// An observation without its tools: one line of a timeline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservationSummary {
    pub id: ObservationId,
    pub server: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub outcome: Outcome,
    pub protocol_version: Option<String>,
    /// The tool set's digest; `None` exactly when the observation failed.
    pub tool_set: Option<Digest>,
    /// How many tools were listed; 0 for a failure.
    pub tool_count: u32,
    /// How many problems were recorded.
    pub problem_count: u32,
    /// The digest of the authorization document's bytes, when one was
    /// recorded ([`NewObservation::authorization`]): equal digests, the
    /// same document.
    pub authorization: Option<Digest>,
}

/// An observation with everything recorded for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    pub summary: ObservationSummary,
    pub server_info: Option<Vec<u8>>,
    pub capabilities: Option<Vec<u8>>,
    pub instructions: Option<String>,
    /// [`NewObservation::authorization`].
    pub authorization: Option<Vec<u8>>,
    /// The listing in the order received.
    pub tools: Vec<ToolEntry>,
    /// In [`Problem`]'s order: those without a position first, then by
    /// position, kind, tool name and message.
    pub problems: Vec<Problem>,
}

/// A point in a tool's history: the observation at which the tool's
/// canonical form became `canonical_digest`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolHistoryEntry {
    pub observation: ObservationId,
    pub finished_at_ms: i64,
    /// The new version; `None` when the tool was listed but malformed.
    pub canonical_digest: Option<Digest>,
    /// `false` when the tool disappeared from the listing at this
    /// observation (a removal); `canonical_digest` is then `None`.
    pub present: bool,
}

/// The id of an alert in the outbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AlertId(pub i64);

/// Something the runtime guard refused or saw (a call with secret
/// material, a result with text aimed at the model), to keep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewGuardEvent {
    pub server: String,
    pub at_ms: i64,
    /// `secret` or `injected_result`.
    pub kind: String,
    pub tool: String,
    /// JSON plumbline writes: what, where, which rules, what was done;
    /// never a secret.
    pub detail: String,
}

/// A kept guard event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuardEvent {
    pub id: i64,
    pub server: String,
    pub at_ms: i64,
    pub kind: String,
    pub tool: String,
    pub detail: String,
}

/// An alert to enqueue: what the watcher will deliver on `channel`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewAlert {
    pub server: String,
    /// The observation that caused it.
    pub observation: ObservationId,
    /// The channel's configured name.
    pub channel: String,
    /// What the alert is about within the observation (a tool and its
    /// change, or `failure` / `recovery`): one alert per key and channel.
    pub key: String,
    /// The payload as the channel will send it.
    pub body: Vec<u8>,
    pub created_at_ms: i64,
}

/// An alert in the outbox: pending (neither delivered nor failed),
/// delivered, or failed (given up on, with `last_error` saying why).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxAlert {
    pub id: AlertId,
    pub server: String,
    pub observation: ObservationId,
    pub channel: String,
    pub key: String,
    pub body: Vec<u8>,
    pub created_at_ms: i64,
    /// Delivery attempts so far.
    pub attempts: u32,
    pub last_error: Option<String>,
    /// When a pending alert is next tried (0: at once).
    pub next_attempt_at_ms: i64,
    pub delivered_at_ms: Option<i64>,
    /// When the alert was given up on: past its attempts, or its channel
    /// was no longer configured.
    pub failed_at_ms: Option<i64>,
}

/// How many alerts of the outbox are in each state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlertCounts {
    pub pending: u64,
    pub failed: u64,
    pub delivered: u64,
}

/// What a reviewer decided about a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReviewStatus {
    /// Seen; the baseline stays as it was.
    Reviewed,
    /// Accepted: the change's new version is the server's baseline.
    Accepted,
}

impl ReviewStatus {
    /// `"reviewed"` or `"accepted"`, as stored and as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewStatus::Reviewed => "reviewed",
            ReviewStatus::Accepted => "accepted",
        }
    }

    /// The status a stored spelling names.
    pub fn from_stored(s: &str) -> Option<ReviewStatus> {
        match s {
            "reviewed" => Some(ReviewStatus::Reviewed),
            "accepted" => Some(ReviewStatus::Accepted),
            _ => None,
        }
    }
}

impl fmt::Display for ReviewStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reviewer's verdict on one change, to record. A change is named by the
/// observation it appeared in and the tool's name (for a rename, the new
/// name; for a removal, the name that went away).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReview {
    pub observation: ObservationId,
    pub tool: String,
    /// Who decided, as they gave their name.
    pub reviewer: String,
    /// When, in Unix milliseconds.
    pub at_ms: i64,
    pub note: Option<String>,
}

/// A recorded verdict on one change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Review {
    pub observation: ObservationId,
    pub tool: String,
    pub status: ReviewStatus,
    pub reviewer: String,
    pub at_ms: i64,
    pub note: Option<String>,
}

/// One edit that accepting a change makes to a server's baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaselineEdit {
    /// The tool called `tool` is now the version `canonical_digest` (an
    /// accepted addition or change, or the new name of a rename).
    Set {
        tool: String,
        canonical_digest: crate::Digest,
    },
    /// The tool called `tool` is no longer part of the baseline (an
    /// accepted removal, or the old name of a rename).
    Remove { tool: String },
}

/// One tool of a baseline and where its version came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaselineTool {
    /// The accepted version: [`crate::Store::tool_version`].
    pub canonical_digest: crate::Digest,
    /// The observation the version was accepted from (for the implicit
    /// baseline, the server's first successful observation).
    pub observation: ObservationId,
    /// Who accepted it; `None` when nobody did because it was part of the
    /// first successful observation.
    pub accepted_by: Option<String>,
    /// When it was accepted, in Unix milliseconds; `None` exactly when
    /// `accepted_by` is.
    pub accepted_at_ms: Option<i64>,
}

/// A server's baseline: the tool versions it is expected to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Baseline {
    pub server: String,
    /// `false` while no change has been accepted: the baseline is then the
    /// tools of the server's first successful observation.
    pub explicit: bool,
    /// Tool name to accepted version, sorted by name.
    pub tools: BTreeMap<String, BaselineTool>,
}
