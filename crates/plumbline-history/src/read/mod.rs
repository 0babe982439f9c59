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
//!
//! Here: loading an observation's tools, the changes between two
//! observations and the cache of their summaries; [`timeline`],
//! [`change`] (one change and its evidence) and [`overview`] build on them.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use plumbline_drift::{drift_among, Change, Tool, ToolDrift, Unreadable};
use plumbline_store::{
    BaselineEdit, Digest, Observation, ObservationId, ObservationSummary, Review, Server, Store,
};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::{Inventory, Severity};

pub use crate::summary::{Changes, ToolChange};
use crate::{Grader, HistoryError as Failure};

mod authorization;
mod change;
mod overview;
#[cfg(test)]
mod tests;
mod timeline;

pub use authorization::*;
pub use change::*;
pub use overview::*;
pub use timeline::*;

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

/// A change between two tool sets, named by their digests (old, new), and
/// the foreign inventory it was graded with.
type SetPair = (Digest, Digest, Option<Digest>);

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
        let raw = compared_bytes(store, id, entry)?;
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

/// The elements of `new` that cannot be read as tools (the store keeps no
/// canonical form of them, or they have no string name) and that `old` did
/// not list byte for byte: the drift reports them unreadable, failing
/// closed ([`plumbline_drift::Drift::with_unreadable`]). One the server
/// kept sending unchanged was reported when it first appeared.
pub fn unreadable_since(new: &Observation, old: &Observation) -> Vec<Unreadable> {
    let unreadable =
        |t: &&plumbline_store::ToolEntry| t.name.is_none() || t.canonical_digest.is_none();
    let before: BTreeSet<&Digest> = old
        .tools
        .iter()
        .filter(unreadable)
        .map(|t| &t.raw_digest)
        .collect();
    new.tools
        .iter()
        .filter(unreadable)
        .filter(|t| !before.contains(&t.raw_digest))
        .map(|t| Unreadable {
            name: t.name.clone(),
            position: t.position as usize,
            reason: new
                .problems
                .iter()
                .find(|p| {
                    p.kind == plumbline_store::ProblemKind::MalformedTool
                        && p.position == Some(t.position)
                })
                .map_or_else(|| "no string \"name\"".to_owned(), |p| p.message.clone()),
        })
        .collect()
}

/// The bytes of a tool as compared: rewritten by the server's normalisation
/// rules when they applied, else as sent.
pub(crate) fn compared_bytes(
    store: &impl Store,
    observation: ObservationId,
    entry: &plumbline_store::ToolEntry,
) -> Result<Vec<u8>, Failure> {
    let digest = entry
        .normalized
        .as_ref()
        .map_or(&entry.raw_digest, |n| &n.raw_digest);
    store.raw_tool(digest)?.ok_or_else(|| {
        Failure::Inconsistent(format!(
            "observation {observation}: the tool bytes {digest} are missing from the store"
        ))
    })
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
    let key = (old_set, new_set, store.inventory(new.id)?);
    if let Some(hit) = grader.cache.get(&key) {
        return Ok(hit);
    }
    let changes = match stored_summary(store, grader, &key)? {
        Some(stored) => stored,
        // Not recorded under this grader: grade it here, keep it in memory.
        None => graded_summary(store, grader, old, new, &foreign_names(store, key.2)?)?,
    };
    let changes = Arc::new(changes);
    grader.cache.put(key, Arc::clone(&changes));
    Ok(changes)
}

/// The names of the stored inventory `inventory` (none when the change
/// was graded without one).
fn foreign_names(store: &impl Store, inventory: Option<Digest>) -> Result<Vec<String>, Failure> {
    let Some(digest) = inventory else {
        return Ok(Vec::new());
    };
    store.inventory_names(&digest)?.ok_or_else(|| {
        Failure::Inconsistent(format!("inventory {digest} is missing from the store"))
    })
}

/// The key `grader` files the summary of `change` under.
fn filed_under(grader: &Grader, (_, _, inventory): &SetPair) -> String {
    crate::summary_key_with(grader.key(), inventory.as_ref())
}

/// The summary the store holds for a change under `grader`'s key and the
/// change's inventory, if it holds one it can read.
fn stored_summary(
    store: &impl Store,
    grader: &Grader,
    change: &SetPair,
) -> Result<Option<Changes>, Failure> {
    Ok(store
        .drift_summary(&change.0, &change.1, &filed_under(grader, change))?
        .and_then(|bytes| Changes::decode(&bytes)))
}

/// The summary of the change from `old` to `new`, graded now with the
/// foreign inventory kept for `new`.
fn graded_summary(
    store: &impl Store,
    grader: &Grader,
    old: &ObservationSummary,
    new: &ObservationSummary,
    foreign: &[String],
) -> Result<Changes, Failure> {
    let tools = graded_between(store, grader, old, new, foreign)?;
    Ok(Changes {
        severity: tools.iter().map(|t| t.severity).max().unwrap_or_default(),
        tools: tools.iter().map(ToolChange::of).collect(),
        // Recording grades with `Changes::of`; this is a later grade.
        regraded: true,
    })
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
            let key = (old_set, new_set, store.inventory(new.id)?);
            if stored_summary(store, grader, &key)?.is_some() {
                continue;
            }
            let foreign = foreign_names(store, key.2)?;
            let changes = graded_summary(store, grader, &old, &new, &foreign)?;
            store.put_drift_summary(
                &old_set,
                &new_set,
                &filed_under(grader, &key),
                &changes.encode(),
            )?;
            grader.cache.put(key, Arc::new(changes));
            written += 1;
        }
    }
    Ok(written)
}

/// Every tool that did not stay the same from `old` to `new`, graded with
/// its evidence and the `foreign` inventory, worst first.
fn graded_between(
    store: &impl Store,
    grader: &Grader,
    old: &ObservationSummary,
    new: &ObservationSummary,
    foreign: &[String],
) -> Result<Vec<ToolDrift>, Failure> {
    if old.tool_set == new.tool_set {
        return Ok(Vec::new());
    }
    let old_obs = read_observation(store, old.id)?;
    let new_obs = read_observation(store, new.id)?;
    let unreadable = unreadable_since(&new_obs, &old_obs);
    if versions(&old_obs) == versions(&new_obs) && unreadable.is_empty() {
        return Ok(Vec::new());
    }
    let old_tools = load_tools(store, &old_obs)?;
    let new_tools = load_tools(store, &new_obs)?;
    grader.count();
    Ok(drift_among(
        &grader.classifier,
        &view(&old_tools),
        &view(&new_tools),
        foreign,
    )
    .with_unreadable(&unreadable)
    .tools
    .into_iter()
    .filter(|t| t.change != Change::Unchanged)
    .collect())
}

/// The drift between two successful observations, with every change's
/// evidence (`plumbline diff`): graded here, since any two observations
/// can be compared, not only consecutive ones, with the foreign inventory
/// kept for `new` (the one its own change was graded with).
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
    let foreign = foreign_names(store, store.inventory(new)?)?;
    grader.count();
    Ok(drift_among(
        &grader.classifier,
        &view(&old_tools),
        &view(&new_tools),
        &foreign,
    )
    .with_unreadable(&unreadable_since(&new_obs, &old_obs)))
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

// ---------------------------------------------------------------------------
// Types the submodules share (kept here so that their fields are visible to
// every submodule).

/// One observation of a timeline with its changes.
#[derive(Debug, Clone)]
pub struct Step {
    pub summary: ObservationSummary,
    /// The previous successful observation, for a successful one that has
    /// one; `None` for a failure and for the first success (the baseline).
    pub previous: Option<ObservationId>,
    pub changes: Arc<Changes>,
    /// How what the server publishes about its authorization changed
    /// here, when it did ([`authorization_change`]).
    pub authorization: Option<AuthorizationChange>,
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
    /// The listing's tool names, with descriptions for an added tool (R16).
    siblings: Vec<(String, Option<String>)>,
    /// The foreign inventory the change was graded with.
    foreign: Vec<String>,
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
    /// Changes over the whole history, and those graded above NONE (not
    /// removals) that nobody reviewed yet.
    pub changes: usize,
    pub unreviewed: usize,
    /// The worst unreviewed change's severity.
    pub worst_unreviewed: Option<Severity>,
    /// When the latest observation with a change finished.
    pub last_drift_at_ms: Option<i64>,
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
