//! Reading the history: timelines, changes, overviews, reviews and
//! baselines.
//!
//! A change is what an observation changed since the server's previous
//! successful observation. Its summary was graded and stored when the
//! observation was recorded ([`crate::record`]); readers take it from the
//! store. Most observations change nothing, and the store records where
//! tool sets changed, so a reader's cost follows the changes, not the
//! observations. A summary the store lacks (a history recorded under
//! another taxonomy, or by an older Plumbline) is graded in memory here and
//! never written: readers do not write. [`backfill`] writes them, once, for
//! a process that may (`plumbline serve` at start). The evidence of one
//! change is computed when asked for, for that change only ([`change`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use plumbline_drift::{drift, Change, Tool, ToolDrift};
use plumbline_store::{
    BaselineEdit, Digest, Observation, ObservationId, ObservationSummary, Review, Server, Store,
};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::{Inventory, Severity};

pub use crate::summary::{Changes, ToolChange};
use crate::{Grader, HistoryError as Failure};

/// How many tool set pairs the drift cache keeps before starting over.
const CACHE_ENTRIES: usize = 4096;

/// Summaries of drift between two tool sets, by their digests.
///
/// Two generations: when the young one fills, it becomes the old one and
/// the previous old one is dropped; a hit in the old generation moves to
/// the young one. So what is in use survives a refill, and memory stays
/// within twice [`CACHE_ENTRIES`].
#[derive(Default)]
pub(crate) struct DriftCache {
    generations: Mutex<Generations>,
}

/// A change between two tool sets, named by their digests (old, new).
type SetPair = (Digest, Digest);

type Entries = HashMap<SetPair, Arc<Changes>>;

#[derive(Default)]
struct Generations {
    young: Entries,
    old: Entries,
}

impl DriftCache {
    fn get(&self, key: &SetPair) -> Option<Arc<Changes>> {
        let mut g = self
            .generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(hit) = g.young.get(key) {
            return Some(Arc::clone(hit));
        }
        let hit = g.old.remove(key)?;
        g.insert(*key, Arc::clone(&hit));
        Some(hit)
    }

    pub(crate) fn put(&self, key: SetPair, changes: Arc<Changes>) {
        self.generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, changes);
    }
}

impl Generations {
    fn insert(&mut self, key: SetPair, changes: Arc<Changes>) {
        if self.young.len() >= CACHE_ENTRIES {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(key, changes);
    }
}

/// A tool of a stored listing, parsed.
#[derive(Debug, Clone)]
pub struct LoadedTool {
    pub name: String,
    pub canonical_digest: Digest,
    pub definition: Value,
}

/// The named, well-formed tools of an observation, in listing order,
/// parsed from the bytes the server sent (malformed ones were reported as
/// problems when observed and take no part in drift).
pub fn load_tools(
    store: &impl Store,
    observation: &Observation,
) -> Result<Vec<LoadedTool>, Failure> {
    let id = observation.summary.id;
    let mut tools = Vec::new();
    for entry in &observation.tools {
        let (Some(name), Some(canonical_digest)) = (&entry.name, entry.canonical_digest) else {
            continue;
        };
        let raw = store.raw_tool(&entry.raw_digest)?.ok_or_else(|| {
            Failure::Inconsistent(format!(
                "observation {id}: the raw bytes {} are missing from the store",
                entry.raw_digest
            ))
        })?;
        if let Ok(definition) = parse_tool(&raw) {
            tools.push(LoadedTool {
                name: name.clone(),
                canonical_digest,
                definition,
            });
        }
    }
    Ok(tools)
}

fn read_observation(store: &impl Store, id: ObservationId) -> Result<Observation, Failure> {
    store
        .observation(id)?
        .ok_or_else(|| Failure::NotFound(format!("there is no observation {id}")))
}

/// The sorted (name, version) pairs of a listing: equal pairs, equal drift
/// (none).
fn versions(o: &Observation) -> Vec<(&str, Digest)> {
    let mut v: Vec<(&str, Digest)> = o
        .tools
        .iter()
        .filter_map(|t| Some((t.name.as_deref()?, t.canonical_digest?)))
        .collect();
    v.sort_unstable();
    v
}

/// The changes from `old` to `new`, two successful observations.
pub fn changes_between(
    store: &impl Store,
    grader: &Grader,
    old: &ObservationSummary,
    new: &ObservationSummary,
) -> Result<Arc<Changes>, Failure> {
    let (Some(old_set), Some(new_set)) = (old.tool_set, new.tool_set) else {
        return Ok(Arc::default());
    };
    if old_set == new_set {
        return Ok(Arc::default());
    }
    let key = (old_set, new_set);
    if let Some(hit) = grader.cache.get(&key) {
        return Ok(hit);
    }
    if let Some(stored) = store
        .drift_summary(&old_set, &new_set, grader.key())?
        .and_then(|bytes| Changes::decode(&bytes))
    {
        let stored = Arc::new(stored);
        grader.cache.put(key, Arc::clone(&stored));
        return Ok(stored);
    }
    // Not recorded under this grader: grade it here, keep it in memory.
    let tools = graded_between(store, grader, old, new)?;
    let changes = Arc::new(Changes {
        severity: tools.iter().map(|t| t.severity).max().unwrap_or_default(),
        tools: tools.iter().map(ToolChange::of).collect(),
    });
    grader.cache.put(key, Arc::clone(&changes));
    Ok(changes)
}

/// Writes the summary of every change of every server that the store lacks
/// under `grader`'s key (a history recorded under another taxonomy, or by
/// an older Plumbline), so that readers find them all. Returns how many it
/// graded. For a process that may write (`plumbline serve` at start), not
/// for a reader answering a request.
pub fn backfill(store: &mut impl Store, grader: &Grader) -> Result<usize, Failure> {
    let mut written = 0;
    for server in store.servers()? {
        for (new, old) in store.tool_set_changes(&server.name)? {
            let (Some(old_set), Some(new_set)) = (old.tool_set, new.tool_set) else {
                continue;
            };
            let stored = store
                .drift_summary(&old_set, &new_set, grader.key())?
                .and_then(|bytes| Changes::decode(&bytes));
            if stored.is_some() {
                continue;
            }
            let tools = graded_between(store, grader, &old, &new)?;
            let changes = Changes {
                severity: tools.iter().map(|t| t.severity).max().unwrap_or_default(),
                tools: tools.iter().map(ToolChange::of).collect(),
            };
            store.put_drift_summary(&old_set, &new_set, grader.key(), &changes.encode())?;
            grader.cache.put((old_set, new_set), Arc::new(changes));
            written += 1;
        }
    }
    Ok(written)
}

/// Every tool that did not stay the same from `old` to `new`, graded with
/// its evidence, worst first.
fn graded_between(
    store: &impl Store,
    grader: &Grader,
    old: &ObservationSummary,
    new: &ObservationSummary,
) -> Result<Vec<ToolDrift>, Failure> {
    if old.tool_set == new.tool_set {
        return Ok(Vec::new());
    }
    let old_obs = read_observation(store, old.id)?;
    let new_obs = read_observation(store, new.id)?;
    if versions(&old_obs) == versions(&new_obs) {
        return Ok(Vec::new());
    }
    let old_tools = load_tools(store, &old_obs)?;
    let new_tools = load_tools(store, &new_obs)?;
    grader.count();
    Ok(
        drift(&grader.classifier, &view(&old_tools), &view(&new_tools))
            .tools
            .into_iter()
            .filter(|t| t.change != Change::Unchanged)
            .collect(),
    )
}

/// The drift between two successful observations, with every change's
/// evidence (`plumbline diff`): graded here, since any two observations
/// can be compared, not only consecutive ones.
pub fn drift_between(
    store: &impl Store,
    grader: &Grader,
    old: ObservationId,
    new: ObservationId,
) -> Result<plumbline_drift::Drift, Failure> {
    let old_obs = read_observation(store, old)?;
    let new_obs = read_observation(store, new)?;
    for o in [&old_obs, &new_obs] {
        if !o.summary.outcome.is_ok() {
            return Err(Failure::Invalid(format!(
                "observation {} of {:?} failed: it has no tools to compare",
                o.summary.id, o.summary.server
            )));
        }
    }
    let old_tools = load_tools(store, &old_obs)?;
    let new_tools = load_tools(store, &new_obs)?;
    grader.count();
    Ok(drift(
        &grader.classifier,
        &view(&old_tools),
        &view(&new_tools),
    ))
}

/// A parsed listing as the drift reads it.
fn view(tools: &[LoadedTool]) -> Vec<Tool<'_>> {
    tools
        .iter()
        .map(|t| Tool {
            name: &t.name,
            definition: &t.definition,
        })
        .collect()
}

/// A server's successful observation: `at`, or the latest one.
pub fn successful_observation(
    store: &impl Store,
    server: &str,
    at: Option<ObservationId>,
) -> Result<Observation, Failure> {
    let id = match at {
        Some(id) => id,
        None => {
            store
                .latest_successful(server, None)?
                .ok_or_else(|| {
                    Failure::NotFound(format!("no successful observation of {server:?}"))
                })?
                .id
        }
    };
    let o = observation_of(store, server, id)?;
    if !o.summary.outcome.is_ok() {
        return Err(Failure::Invalid(format!(
            "observation {id} of {server:?} failed: it has no tools"
        )));
    }
    Ok(o)
}

/// The bytes, exactly as the server sent them, of every tool called
/// `tool` in an observation (more than one when the listing repeats the
/// name), in listing order.
pub fn tool_bytes(
    store: &impl Store,
    observation: &Observation,
    tool: &str,
) -> Result<Vec<Vec<u8>>, Failure> {
    observation
        .tools
        .iter()
        .filter(|t| t.name.as_deref() == Some(tool))
        .map(|t| {
            store.raw_tool(&t.raw_digest)?.ok_or_else(|| {
                Failure::Inconsistent(format!("raw tool {} is missing", t.raw_digest))
            })
        })
        .collect()
}

/// One observation of a timeline with its changes.
#[derive(Debug, Clone)]
pub struct Step {
    pub summary: ObservationSummary,
    /// The previous successful observation, for a successful one that has
    /// one; `None` for a failure and for the first success (the baseline).
    pub previous: Option<ObservationId>,
    pub changes: Arc<Changes>,
}

/// Every change in the server's history, oldest first: each successful
/// observation whose tool set differs from the previous success's, with
/// its changes. Reads the store's record of tool set changes, so it costs
/// the number of changes, however many unchanged observations lie between.
pub fn history(store: &impl Store, grader: &Grader, server: &str) -> Result<Vec<Step>, Failure> {
    store
        .tool_set_changes(server)?
        .into_iter()
        .map(|(new, old)| {
            let changes = changes_between(store, grader, &old, &new)?;
            Ok(Step {
                summary: new,
                previous: Some(old.id),
                changes,
            })
        })
        .collect()
}

/// The server's latest `limit` observations, oldest first, each with its
/// changes, and whether older ones exist.
pub fn recent(
    store: &impl Store,
    grader: &Grader,
    server: &str,
    limit: usize,
) -> Result<(Vec<Step>, bool), Failure> {
    let fetch = u32::try_from(limit.saturating_add(1)).unwrap_or(u32::MAX);
    let mut summaries = store.timeline(server, fetch)?;
    let more = summaries.len() > limit;
    summaries.truncate(limit);
    summaries.reverse();
    let changed: HashMap<ObservationId, ObservationSummary> = store
        .tool_set_changes(server)?
        .into_iter()
        .map(|(new, old)| (new.id, old))
        .collect();
    let mut steps = Vec::with_capacity(summaries.len());
    let mut last_ok: Option<ObservationId> = None;
    let mut first_ok_seen = false;
    for summary in summaries {
        if !summary.outcome.is_ok() {
            steps.push(Step {
                summary,
                previous: None,
                changes: Arc::default(),
            });
            continue;
        }
        let previous = if first_ok_seen {
            last_ok
        } else {
            // The success before the window, if any.
            first_ok_seen = true;
            store
                .latest_successful(server, Some(summary.id))?
                .map(|p| p.id)
        };
        let changes = match changed.get(&summary.id) {
            Some(old) => changes_between(store, grader, old, &summary)?,
            None => Arc::default(),
        };
        last_ok = Some(summary.id);
        steps.push(Step {
            summary,
            previous,
            changes,
        });
    }
    Ok((steps, more))
}

/// The observation `id` of `server` (404 when there is none, or it is
/// another server's).
pub fn observation_of(
    store: &impl Store,
    server: &str,
    id: ObservationId,
) -> Result<Observation, Failure> {
    match store.observation(id)? {
        Some(o) if o.summary.server == server => Ok(o),
        _ => Err(Failure::NotFound(format!(
            "server {server:?} has no observation {id}"
        ))),
    }
}

/// One observation with its changes.
pub fn step(
    store: &impl Store,
    grader: &Grader,
    summary: &ObservationSummary,
) -> Result<Step, Failure> {
    if !summary.outcome.is_ok() {
        return Ok(Step {
            summary: summary.clone(),
            previous: None,
            changes: Arc::default(),
        });
    }
    let previous = store.latest_successful(&summary.server, Some(summary.id))?;
    let changes = match &previous {
        Some(prev) => changes_between(store, grader, prev, summary)?,
        None => Arc::default(),
    };
    Ok(Step {
        summary: summary.clone(),
        previous: previous.map(|p| p.id),
        changes,
    })
}

/// Everything about one change.
#[derive(Debug, Clone)]
pub struct ChangeDetail {
    pub observation: Observation,
    pub previous: ObservationSummary,
    pub drift: ToolDrift,
    /// The tool before (for a rename, under its old name); `None` when
    /// added.
    pub old: Option<LoadedTool>,
    /// The tool after; `None` when removed.
    pub new: Option<LoadedTool>,
    /// When either listing carries the name more than once: every copy in
    /// the new listing (clients differ on which one the model sees), and
    /// `old` and `new` are the pair the drift compared.
    pub copies: Option<Vec<LoadedTool>>,
}

/// What grading the change to `tool` at observation `id` of `server`
/// needs. Only that tool is read and parsed (its old and new versions, and
/// the names of the new listing as siblings): a page about one small
/// change of a listing that also holds a huge tool costs the small change.
/// Only when either listing carries the name more than once is the whole
/// drift graded here, to pair the copies as the drift does.
pub fn change_inputs(
    store: &impl Store,
    grader: &Grader,
    server: &str,
    id: ObservationId,
    tool: &str,
) -> Result<ChangeInputs, Failure> {
    let observation = observation_of(store, server, id)?;
    let not_found = || {
        Failure::NotFound(format!(
            "observation {id} of server {server:?} has no change to tool {tool:?}"
        ))
    };
    if !observation.summary.outcome.is_ok() {
        return Err(not_found());
    }
    let previous = store
        .latest_successful(server, Some(id))?
        .ok_or_else(not_found)?;
    let summary = changes_between(store, grader, &previous, &observation.summary)?;
    let change = summary
        .tools
        .iter()
        .find(|t| t.name == tool)
        .ok_or_else(not_found)?
        .change
        .clone();
    let old_name = match &change {
        Change::Renamed { from } => from.as_str(),
        _ => tool,
    };
    let previous_obs = read_observation(store, previous.id)?;
    let count = |o: &Observation, name: &str| {
        o.tools
            .iter()
            .filter(|t| t.name.as_deref() == Some(name))
            .count()
    };
    let duplicated = [
        count(&previous_obs, old_name),
        count(&previous_obs, tool),
        count(&observation, tool),
        count(&observation, old_name),
    ]
    .iter()
    .any(|n| *n > 1);
    if duplicated {
        let detail = change_among_copies(store, grader, observation, previous, previous_obs, tool)?;
        return Ok(ChangeInputs(Inputs::Graded(Box::new(detail))));
    }
    let old = match change {
        Change::Added => None,
        _ => load_named(store, &previous_obs, old_name)?,
    };
    let new = match change {
        Change::Removed => None,
        _ => load_named(store, &observation, tool)?,
    };
    let siblings: Vec<String> = observation
        .tools
        .iter()
        .filter_map(|t| t.name.clone())
        .collect();
    Ok(ChangeInputs(Inputs::One(Box::new(One {
        observation,
        previous,
        tool: tool.to_owned(),
        change,
        old,
        new,
        siblings,
    }))))
}

/// What grading one change needs, read from the store: grading it
/// ([`ChangeInputs::grade`]) needs no store, so a caller that shares its
/// store connection grades after letting it go.
pub struct ChangeInputs(Inputs);

enum Inputs {
    One(Box<One>),
    /// A name listed more than once: graded while reading.
    Graded(Box<ChangeDetail>),
}

/// One change of a tool listed once on each side.
struct One {
    observation: Observation,
    previous: ObservationSummary,
    tool: String,
    change: Change,
    old: Option<LoadedTool>,
    new: Option<LoadedTool>,
    siblings: Vec<String>,
}

impl ChangeInputs {
    /// The change with its evidence.
    pub fn grade(self, grader: &Grader) -> ChangeDetail {
        let One {
            observation,
            previous,
            tool,
            change,
            old,
            new,
            siblings,
        } = match self.0 {
            Inputs::One(one) => *one,
            Inputs::Graded(detail) => return *detail,
        };
        let siblings = Inventory::empty().with_siblings(siblings);
        grader.count();
        let classification = match (&old, &new) {
            (Some(o), Some(n)) => {
                grader
                    .classifier
                    .classify_in(&o.definition, &n.definition, &siblings)
            }
            (None, Some(n)) => grader.classifier.classify_added(&n.definition, &siblings),
            _ => plumbline_taxonomy::Classification::none(),
        };
        ChangeDetail {
            drift: ToolDrift::graded(&tool, change, classification),
            observation,
            previous,
            old,
            new,
            copies: None,
        }
    }
}

/// [`change_inputs`] and [`ChangeInputs::grade`] in one.
pub fn change(
    store: &impl Store,
    grader: &Grader,
    server: &str,
    id: ObservationId,
    tool: &str,
) -> Result<ChangeDetail, Failure> {
    Ok(change_inputs(store, grader, server, id, tool)?.grade(grader))
}

/// [`change`] when a name is listed more than once: the copies pair in
/// listing order, as the drift pairs them, and the rest were added or
/// removed.
fn change_among_copies(
    store: &impl Store,
    grader: &Grader,
    observation: Observation,
    previous: ObservationSummary,
    previous_obs: Observation,
    tool: &str,
) -> Result<ChangeDetail, Failure> {
    let id = observation.summary.id;
    let drift = graded_between(store, grader, &previous, &observation.summary)?
        .into_iter()
        .find(|t| t.name == tool)
        .ok_or_else(|| {
            Failure::NotFound(format!(
                "observation {id} of server {:?} has no change to tool {tool:?}",
                observation.summary.server
            ))
        })?;
    let old_name = match &drift.change {
        Change::Renamed { from } => from.as_str(),
        _ => tool,
    };
    let before = load_tools(store, &previous_obs)?;
    let after = load_tools(store, &observation)?;
    let named = |tools: &[LoadedTool], name: &str| -> Vec<LoadedTool> {
        tools.iter().filter(|t| t.name == name).cloned().collect()
    };
    let (old_copies, new_copies) = (named(&before, old_name), named(&after, tool));
    let siblings = Inventory::empty().with_siblings(after.iter().map(|t| t.name.as_str()));
    let (old, new) = match &drift.change {
        Change::Added => (None, new_copies.get(named(&before, tool).len()).cloned()),
        Change::Removed => (old_copies.get(named(&after, tool).len()).cloned(), None),
        Change::Renamed { from } => (
            old_copies.get(named(&after, from).len()).cloned(),
            new_copies.get(named(&before, tool).len()).cloned(),
        ),
        Change::Changed | Change::Unchanged => {
            let pair = old_copies
                .iter()
                .zip(&new_copies)
                .position(|(a, b)| {
                    grader
                        .classifier
                        .classify_in(&a.definition, &b.definition, &siblings)
                        == drift.classification
                })
                .unwrap_or(0);
            (old_copies.get(pair).cloned(), new_copies.get(pair).cloned())
        }
    };
    Ok(ChangeDetail {
        observation,
        previous,
        drift,
        old,
        new,
        copies: Some(new_copies),
    })
}

/// The tool called `name` in a listing, parsed; `None` when it is not
/// there or is malformed.
fn load_named(
    store: &impl Store,
    observation: &Observation,
    name: &str,
) -> Result<Option<LoadedTool>, Failure> {
    let Some(entry) = observation
        .tools
        .iter()
        .find(|t| t.name.as_deref() == Some(name))
    else {
        return Ok(None);
    };
    let Some(canonical_digest) = entry.canonical_digest else {
        return Ok(None);
    };
    let raw = store.raw_tool(&entry.raw_digest)?.ok_or_else(|| {
        Failure::Inconsistent(format!(
            "observation {}: the raw bytes {} are missing from the store",
            observation.summary.id, entry.raw_digest
        ))
    })?;
    Ok(parse_tool(&raw).ok().map(|definition| LoadedTool {
        name: name.to_owned(),
        canonical_digest,
        definition,
    }))
}

/// What accepting the change does to the baseline: the tool's new version
/// (for a rename, under its new name, the old name removed), or, for a
/// removal, no version.
pub fn baseline_edits(detail: &ChangeDetail) -> Result<Vec<BaselineEdit>, Failure> {
    let name = detail.drift.name.clone();
    if detail.copies.is_some() {
        // A baseline holds one version per name; which copy a client shows
        // the model is not ours to guess.
        return Err(Failure::Invalid(format!(
            "the listing carries {name:?} more than once, so no one version can be accepted; mark the change reviewed"
        )));
    }
    let set = || -> Result<BaselineEdit, Failure> {
        let new = detail.new.as_ref().ok_or_else(|| {
            Failure::Inconsistent(format!("the new version of tool {name:?} is missing"))
        })?;
        Ok(BaselineEdit::Set {
            tool: name.clone(),
            canonical_digest: new.canonical_digest,
        })
    };
    Ok(match &detail.drift.change {
        Change::Added | Change::Changed => vec![set()?],
        Change::Removed => vec![BaselineEdit::Remove { tool: name.clone() }],
        Change::Renamed { from } => vec![BaselineEdit::Remove { tool: from.clone() }, set()?],
        Change::Unchanged => Vec::new(),
    })
}

/// A server's verdicts, by (observation, tool).
pub fn reviews(
    store: &impl Store,
    server: &str,
) -> Result<BTreeMap<(ObservationId, String), Review>, Failure> {
    Ok(store
        .reviews(server)?
        .into_iter()
        .map(|r| ((r.observation, r.tool.clone()), r))
        .collect())
}

/// One line of the overview.
#[derive(Debug, Clone)]
pub struct ServerOverview {
    pub name: String,
    /// The identity object as registered (canonical JSON).
    pub identity: String,
    /// The latest observation, successful or not.
    pub last: Option<ObservationSummary>,
    /// How many tools the latest successful observation listed.
    pub tool_count: Option<u32>,
    /// Changes over the whole history, and those nobody reviewed yet.
    pub changes: usize,
    pub unreviewed: usize,
    /// The worst unreviewed change's severity.
    pub worst_unreviewed: Option<Severity>,
    /// When the latest observation with a change finished.
    pub last_drift_at_ms: Option<i64>,
}

/// Every server, by name.
pub fn overview(store: &impl Store, grader: &Grader) -> Result<Vec<ServerOverview>, Failure> {
    store
        .servers()?
        .into_iter()
        .map(|server| server_overview(store, grader, server))
        .collect()
}

/// One server's line of the overview.
pub fn server_overview(
    store: &impl Store,
    grader: &Grader,
    server: Server,
) -> Result<ServerOverview, Failure> {
    let steps = history(store, grader, &server.name)?;
    let reviewed: BTreeSet<(ObservationId, String)> =
        reviews(store, &server.name)?.into_keys().collect();
    let last = store.timeline(&server.name, 1)?.into_iter().next();
    let tool_count = store
        .latest_successful(&server.name, None)?
        .map(|s| s.tool_count);
    let mut row = ServerOverview {
        name: server.name,
        identity: server.identity,
        last,
        tool_count,
        changes: 0,
        unreviewed: 0,
        worst_unreviewed: None,
        last_drift_at_ms: None,
    };
    for step in &steps {
        if !step.changes.is_empty() {
            row.last_drift_at_ms = Some(step.summary.finished_at_ms);
        }
        for t in &step.changes.tools {
            row.changes += 1;
            if !reviewed.contains(&(step.summary.id, t.name.clone())) {
                row.unreviewed += 1;
                let s = t.severity;
                row.worst_unreviewed = Some(row.worst_unreviewed.map_or(s, |w| w.max(s)));
            }
        }
    }
    Ok(row)
}

/// The server called `name` (404 when the store has none).
pub fn server(store: &impl Store, name: &str) -> Result<Server, Failure> {
    store
        .servers()?
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Failure::NotFound(format!("there is no server {name:?} in the store")))
}

/// How the overview is ordered (`?sort=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sort {
    /// Newest drift first, servers that never drifted last (the default).
    Drift,
    /// Worst unreviewed change first.
    Severity,
    /// Most unreviewed changes first.
    Unreviewed,
    /// Latest observation first.
    Observed,
    /// By name.
    Name,
}

impl Sort {
    pub const ALL: [Sort; 5] = [
        Sort::Drift,
        Sort::Severity,
        Sort::Unreviewed,
        Sort::Observed,
        Sort::Name,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Sort::Drift => "drift",
            Sort::Severity => "severity",
            Sort::Unreviewed => "unreviewed",
            Sort::Observed => "observed",
            Sort::Name => "name",
        }
    }

    /// The order `s` names; `None` for an unknown one.
    pub fn parse(s: &str) -> Option<Sort> {
        Sort::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Orders overview rows; ties are broken by name, so the order is total.
pub fn sort(rows: &mut [ServerOverview], by: Sort) {
    rows.sort_by(|a, b| {
        let primary = match by {
            Sort::Drift => b.last_drift_at_ms.cmp(&a.last_drift_at_ms),
            Sort::Severity => b
                .worst_unreviewed
                .cmp(&a.worst_unreviewed)
                .then(b.unreviewed.cmp(&a.unreviewed)),
            Sort::Unreviewed => b.unreviewed.cmp(&a.unreviewed),
            Sort::Observed => b
                .last
                .as_ref()
                .map(|o| o.finished_at_ms)
                .cmp(&a.last.as_ref().map(|o| o.finished_at_ms)),
            Sort::Name => std::cmp::Ordering::Equal,
        };
        primary.then_with(|| a.name.cmp(&b.name))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        name: &str,
        drift: Option<i64>,
        worst: Option<Severity>,
        unreviewed: usize,
    ) -> ServerOverview {
        ServerOverview {
            name: name.into(),
            identity: "{}".into(),
            last: None,
            tool_count: None,
            changes: unreviewed,
            unreviewed,
            worst_unreviewed: worst,
            last_drift_at_ms: drift,
        }
    }

    #[test]
    fn the_overview_sorts_newest_drift_first_by_default_and_ties_by_name() {
        let mut rows = vec![
            row("quiet", None, None, 0),
            row("old", Some(10), Some(Severity::Critical), 1),
            row("new", Some(20), Some(Severity::Low), 3),
            row("also-quiet", None, None, 0),
        ];
        let names =
            |rows: &[ServerOverview]| rows.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
        sort(&mut rows, Sort::Drift);
        assert_eq!(names(&rows), ["new", "old", "also-quiet", "quiet"]);
        sort(&mut rows, Sort::Severity);
        assert_eq!(names(&rows), ["old", "new", "also-quiet", "quiet"]);
        sort(&mut rows, Sort::Unreviewed);
        assert_eq!(names(&rows), ["new", "old", "also-quiet", "quiet"]);
        sort(&mut rows, Sort::Name);
        assert_eq!(names(&rows), ["also-quiet", "new", "old", "quiet"]);
        for s in Sort::ALL {
            assert_eq!(Sort::parse(s.as_str()), Some(s));
        }
        assert_eq!(Sort::parse("bogus"), None);
    }
}
