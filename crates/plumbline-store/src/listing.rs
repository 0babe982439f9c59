//! What both backends compute the same way, outside SQL: a listing's
//! entries and the digest of its tool set, the problems of a listing, an
//! inventory's text, and the checks an observation row passes on its way
//! out. A second backend that wrote its own would let two stores of one
//! history disagree on a digest.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use crate::model::{
    BaselineTool, NewObservation, NormalizedValue, Observation, ObservationId, ObservationSummary,
    Outcome, Problem, ProblemKind, ToolHistoryEntry,
};
use crate::{canonicalize, digest, Digest, StoreError};

/// The domain-separation prefix of a tool set's digest, so a tool set can
/// never share a digest with a tool or a document.
const TOOL_SET_DIGEST_PREFIX: &[u8] = b"plumbline tool set v1\0";

/// A tool's state in one tool set: absent, or present with its canonical
/// digest (`None` when malformed).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolState {
    Absent,
    Present(Option<Digest>),
}

/// One tool of a listing being written.
pub(crate) struct Entry<'a> {
    pub position: u32,
    pub name: Option<&'a str>,
    pub raw_tool_id: i64,
    pub raw_digest: Digest,
    /// The tool version: the canonical digest of the normalised tool when
    /// there is one, else of the raw tool.
    pub canonical_digest: Option<Digest>,
    pub normalized: Option<NormalizedEntry>,
}

/// The normalised tool of an entry, as written.
pub(crate) struct NormalizedEntry {
    pub raw_tool_id: i64,
    pub raw_digest: Digest,
    /// `normalized_by`: a JSON array of `{"pointer", "rule"}`.
    pub by: String,
}

/// An inventory as stored: its names sorted, each once, as a JSON array,
/// and that text's SHA-256.
pub fn inventory_text(names: &[String]) -> (Digest, String) {
    let set: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let text = serde_json::to_string(&set).expect("strings serialise");
    (digest(text.as_bytes()), text)
}

/// Refuses what no backend records: a failure with tools, or more tools
/// than a position can number.
pub(crate) fn check_observation(observation: &NewObservation) -> Result<(), StoreError> {
    let invalid = |reason: String| StoreError::InvalidObservation {
        server: observation.server.clone(),
        reason,
    };
    if !observation.outcome.is_ok() && !observation.tools.is_empty() {
        return Err(invalid(format!(
            "a failed observation has no tool set, but {} tools were given",
            observation.tools.len()
        )));
    }
    if u32::try_from(observation.tools.len()).is_err() {
        return Err(invalid(format!(
            "{} tools is more than the store can number",
            observation.tools.len()
        )));
    }
    Ok(())
}

/// The problems of a listing as the store records them: the caller's, a
/// malformed tool (one whose canonical form is `None` in `canonical`) and
/// each repeat of a name, each once, in order.
pub(crate) struct Problems<'a> {
    set: BTreeSet<Problem>,
    first_position: HashMap<&'a str, u32>,
}

impl<'a> Problems<'a> {
    pub fn new(observation: &NewObservation) -> Problems<'a> {
        Problems {
            set: observation.problems.iter().cloned().collect(),
            first_position: HashMap::new(),
        }
    }

    /// Notes the tool at `position`: `canonical` is `None` when its raw
    /// bytes have no canonical form.
    pub fn tool(&mut self, position: u32, name: Option<&'a str>, raw: &[u8], well_formed: bool) {
        if !well_formed {
            // Parse again only to say why: the error is not stored with
            // the raw bytes, and malformed tools are rare.
            let message = match canonicalize(raw) {
                Err(e) => e.to_string(),
                Ok(_) => "the tool has no canonical form in the store".to_owned(),
            };
            self.set.insert(Problem {
                position: Some(position),
                kind: ProblemKind::MalformedTool,
                tool_name: name.map(str::to_owned),
                message,
            });
        }
        if let Some(name) = name {
            if let Some(first) = self.first_position.get(name) {
                self.set.insert(Problem {
                    position: Some(position),
                    kind: ProblemKind::DuplicateName,
                    tool_name: Some(name.to_owned()),
                    message: format!("the name is also listed at position {first}"),
                });
            } else {
                self.first_position.insert(name, position);
            }
        }
    }

    /// Each problem once, in the order they are stored.
    pub fn into_set(self) -> BTreeSet<Problem> {
        self.set
    }
}

/// The digest of an ordered listing: over each entry's position, name, raw
/// digest and canonical digest (and, for a normalised entry only, the
/// normalised digest and rules, so listings stored before normalisation
/// existed keep their digests), with lengths and presence flags written
/// out so that no two different listings encode to the same bytes.
pub(crate) fn tool_set_digest(entries: &[Entry<'_>]) -> Digest {
    let mut bytes = Vec::with_capacity(TOOL_SET_DIGEST_PREFIX.len() + entries.len() * 100);
    bytes.extend_from_slice(TOOL_SET_DIGEST_PREFIX);
    bytes.extend_from_slice(&(entries.len() as u64).to_be_bytes());
    for e in entries {
        bytes.extend_from_slice(&e.position.to_be_bytes());
        match e.name {
            Some(name) => {
                bytes.push(1);
                bytes.extend_from_slice(&(name.len() as u64).to_be_bytes());
                bytes.extend_from_slice(name.as_bytes());
            }
            None => bytes.push(0),
        }
        bytes.extend_from_slice(e.raw_digest.as_bytes());
        match &e.canonical_digest {
            Some(d) => {
                bytes.push(1);
                bytes.extend_from_slice(d.as_bytes());
            }
            None => bytes.push(0),
        }
        if let Some(n) = &e.normalized {
            bytes.push(2);
            bytes.extend_from_slice(n.raw_digest.as_bytes());
            bytes.extend_from_slice(&(n.by.len() as u64).to_be_bytes());
            bytes.extend_from_slice(n.by.as_bytes());
        }
    }
    digest(&bytes)
}

/// `normalized_by` as stored: a JSON array of `{"pointer", "rule"}`.
pub(crate) fn normalized_by_json(by: &[NormalizedValue]) -> String {
    serde_json::to_string(by).expect("strings serialise")
}

/// An observation row as read, before its values are checked.
pub(crate) struct SummaryRow {
    pub id: i64,
    pub server: String,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    pub outcome: String,
    pub error: Option<String>,
    pub protocol_version: Option<String>,
    pub tool_set: Option<Vec<u8>>,
    pub tool_count: Option<i64>,
    pub problem_count: i64,
    pub authorization: Option<Vec<u8>>,
}

impl SummaryRow {
    /// The summary, once its outcome, tool set and counts agree.
    pub fn into_summary(self, store: &Path) -> Result<ObservationSummary, StoreError> {
        let what = format!("observation {}", self.id);
        let corrupt = |detail: String| StoreError::Corrupt {
            path: store.to_path_buf(),
            detail,
        };
        let outcome = match (self.outcome.as_str(), self.error) {
            ("ok", None) => Outcome::Ok,
            ("failed", Some(error)) => Outcome::Failed { error },
            (other, _) => return Err(corrupt(format!("{what} has outcome {other:?}"))),
        };
        let tool_set = match (&outcome, self.tool_set) {
            (Outcome::Ok, Some(bytes)) => {
                Some(Digest::from_slice(&bytes).ok_or_else(|| {
                    corrupt(format!("{what} has a digest of {} bytes", bytes.len()))
                })?)
            }
            (Outcome::Failed { .. }, None) => None,
            _ => {
                return Err(corrupt(format!(
                    "{what} has a tool set that its outcome denies"
                )))
            }
        };
        let count = |n: i64, of: &str| {
            u32::try_from(n).map_err(|_| corrupt(format!("{what} has {n} {of}")))
        };
        Ok(ObservationSummary {
            id: ObservationId(self.id),
            server: self.server,
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            outcome,
            protocol_version: self.protocol_version,
            tool_set,
            tool_count: count(self.tool_count.unwrap_or(0), "tools")?,
            problem_count: count(self.problem_count, "problems")?,
            authorization: self
                .authorization
                .map(|bytes| {
                    Digest::from_slice(&bytes).ok_or_else(|| {
                        corrupt(format!(
                            "{what} has an authorization digest of {} bytes",
                            bytes.len()
                        ))
                    })
                })
                .transpose()?,
        })
    }
}

/// A server's implicit baseline: the tools of its first successful
/// observation, the first tool of each name (a later one is a recorded
/// duplicate) when it is well formed (a malformed one has no version).
pub(crate) fn implicit_baseline(
    first: Observation,
) -> std::collections::BTreeMap<String, BaselineTool> {
    let id = first.summary.id;
    let mut seen = BTreeSet::new();
    let mut tools = std::collections::BTreeMap::new();
    for entry in first.tools {
        let Some(name) = entry.name else { continue };
        if !seen.insert(name.clone()) {
            continue;
        }
        if let Some(canonical_digest) = entry.canonical_digest {
            tools.insert(
                name,
                BaselineTool {
                    canonical_digest,
                    observation: id,
                    accepted_by: None,
                    accepted_at_ms: None,
                },
            );
        }
    }
    tools
}

/// A tool's history over a server's successful observations (id, end,
/// tool set id, oldest first): where its state changes. `state` reads its
/// state in a tool set, once per distinct set.
pub(crate) fn tool_history(
    observations: Vec<(i64, i64, i64)>,
    mut state_in: impl FnMut(i64) -> Result<ToolState, StoreError>,
) -> Result<Vec<ToolHistoryEntry>, StoreError> {
    // Unchanged observations share a tool set, so look each set up once.
    let mut states: HashMap<i64, ToolState> = HashMap::new();
    let mut previous = ToolState::Absent;
    let mut history = Vec::new();
    for (id, finished_at_ms, tool_set_id) in observations {
        let state = match states.get(&tool_set_id) {
            Some(state) => *state,
            None => {
                let state = state_in(tool_set_id)?;
                states.insert(tool_set_id, state);
                state
            }
        };
        if state != previous {
            history.push(ToolHistoryEntry {
                observation: ObservationId(id),
                finished_at_ms,
                canonical_digest: match state {
                    ToolState::Present(d) => d,
                    ToolState::Absent => None,
                },
                present: state != ToolState::Absent,
            });
            previous = state;
        }
    }
    Ok(history)
}

/// A listing's entries and its problems, each once.
pub(crate) type Listing<'a> = (Vec<Entry<'a>>, BTreeSet<Problem>);

/// The entries and problems of a listing, storing each tool's raw bytes
/// (and its normalised bytes, when its rules rewrote it) with `put`, which
/// returns the stored row's id and canonical digest. An error of `put`
/// comes back with what it was storing.
pub(crate) fn entries<'a, E>(
    observation: &'a NewObservation,
    raw_digests: &[Digest],
    mut put: impl FnMut(&[u8], &Digest) -> Result<(i64, Option<Digest>), E>,
) -> Result<Listing<'a>, (&'static str, E)> {
    let mut problems = Problems::new(observation);
    let mut entries = Vec::with_capacity(observation.tools.len());
    for (index, (tool, raw_digest)) in observation.tools.iter().zip(raw_digests).enumerate() {
        // Bounded by check_observation.
        let position = index as u32;
        let (raw_tool_id, canonical_digest) =
            put(&tool.raw, raw_digest).map_err(|e| ("a tool's raw bytes", e))?;
        problems.tool(
            position,
            tool.name.as_deref(),
            &tool.raw,
            canonical_digest.is_some(),
        );
        let (canonical_digest, normalized) = match &tool.normalized {
            // A rewrite of a malformed tool cannot happen (the rules read
            // the tool first); it would only be stored as sent.
            Some(n) if canonical_digest.is_some() => {
                let n_digest = digest(&n.raw);
                let (n_id, n_canonical) =
                    put(&n.raw, &n_digest).map_err(|e| ("a tool's normalised bytes", e))?;
                (
                    n_canonical.or(canonical_digest),
                    Some(NormalizedEntry {
                        raw_tool_id: n_id,
                        raw_digest: n_digest,
                        by: normalized_by_json(&n.by),
                    }),
                )
            }
            _ => (canonical_digest, None),
        };
        entries.push(Entry {
            position,
            name: tool.name.as_deref(),
            raw_tool_id,
            raw_digest: *raw_digest,
            canonical_digest,
            normalized,
        });
    }
    Ok((entries, problems.into_set()))
}
