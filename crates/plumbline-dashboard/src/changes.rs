//! Changes: what each observation changed since the server's previous
//! successful observation, and what reviewers made of them.
//!
//! Drift is computed as `plumbline observe` computes it: the named,
//! well-formed tools of each listing, parsed from the bytes the server
//! sent, compared with `plumbline_drift::drift`. Most observations change
//! nothing, so two cheap checks come first: the same tool set digest, or
//! the same (name, canonical digest) pairs, is no change without parsing
//! anything. A computed drift depends only on the two tool sets, which are
//! content-addressed, so it is cached by their digests; everything stays
//! deterministic. Its summary (each tool's change, severity and rules) is
//! also kept in the store under [`grader`], so a long history is graded
//! once, not once per request or per process. The change page grades its
//! one change again, for the evidence.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use plumbline_drift::{drift, Change, Tool, ToolDrift};
use plumbline_store::{
    BaselineEdit, Digest, Observation, ObservationId, ObservationSummary, Review, Server, Store,
};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::{Classifier, RuleId, Severity, Taxonomy};
use serde::Serialize;

use crate::error::Failure;

/// How many tool set pairs the drift cache keeps before starting over.
const CACHE_ENTRIES: usize = 4096;

/// Who graded a stored drift summary, and in which encoding: a summary
/// is used only by the grader that wrote it, so stored grades are keyed by
/// taxonomy. Rule changes come with a new release (spec 7), and so with a
/// new key. Summary v2: added tools graded by the drift policy.
pub fn grader(taxonomy: Taxonomy) -> String {
    format!(
        "plumbline {}; {}, default imperatives; summary v2",
        env!("CARGO_PKG_VERSION"),
        taxonomy.id()
    )
}

/// The grade of one tool's change, without its evidence.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolChange {
    /// The tool's name (for a rename, the new name).
    pub name: String,
    #[serde(flatten)]
    pub change: Change,
    pub severity: Severity,
    pub rules: Vec<RuleId>,
}

impl ToolChange {
    pub fn of(t: &ToolDrift) -> ToolChange {
        ToolChange {
            name: t.name.clone(),
            change: t.change.clone(),
            severity: t.severity,
            rules: t.classification.rules.clone(),
        }
    }
}

/// The changes of one observation: every tool that did not stay the same,
/// worst first (the order of `plumbline_drift::Drift::tools`).
#[derive(Debug, Default, PartialEq, Serialize)]
pub struct Changes {
    pub severity: Severity,
    pub tools: Vec<ToolChange>,
}

impl Changes {
    /// The stored form: this, as JSON.
    fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The stored form read back; `None` for anything else, which is then
    /// graded again.
    fn decode(bytes: &[u8]) -> Option<Changes> {
        let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
        let severity = v.get("severity")?.as_str()?.parse().ok()?;
        let tools = v
            .get("tools")?
            .as_array()?
            .iter()
            .map(|t| {
                let change = match t.get("kind")?.as_str()? {
                    "added" => Change::Added,
                    "removed" => Change::Removed,
                    "changed" => Change::Changed,
                    "unchanged" => Change::Unchanged,
                    "renamed" => Change::Renamed {
                        from: t.get("from")?.as_str()?.to_owned(),
                    },
                    _ => return None,
                };
                Some(ToolChange {
                    name: t.get("name")?.as_str()?.to_owned(),
                    change,
                    severity: t.get("severity")?.as_str()?.parse().ok()?,
                    rules: t
                        .get("rules")?
                        .as_array()?
                        .iter()
                        .map(|r| r.as_str()?.parse().ok())
                        .collect::<Option<_>>()?,
                })
            })
            .collect::<Option<_>>()?;
        Some(Changes { severity, tools })
    }
}

impl Changes {
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Drift between two tool sets, by their digests.
///
/// Two generations: when the young one fills, it becomes the old one and
/// the previous old one is dropped; a hit in the old generation moves to
/// the young one. So what is in use survives a refill, and memory stays
/// within twice [`CACHE_ENTRIES`].
pub struct DriftCache {
    /// [`grader`] of the taxonomy this cache's changes were graded with.
    grader: String,
    generations: Mutex<Generations>,
    /// Graded here and not yet in the store (see [`DriftCache::save`]).
    unsaved: Mutex<Vec<(SetPair, Arc<Changes>)>>,
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
    /// An empty cache for changes graded with `taxonomy`.
    pub fn new(taxonomy: Taxonomy) -> DriftCache {
        DriftCache {
            grader: grader(taxonomy),
            generations: Mutex::default(),
            unsaved: Mutex::default(),
        }
    }

    fn get(&self, key: &(Digest, Digest)) -> Option<Arc<Changes>> {
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

    fn put(&self, key: (Digest, Digest), changes: Arc<Changes>) {
        self.generations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, changes);
    }

    /// Writes what was graded since the last call to the store. Reads take
    /// the store shared, so the caller that holds it for writing saves.
    /// A summary that cannot be written (a read-only file) is graded again
    /// by a later process; nothing else depends on it.
    pub fn save(&self, store: &mut impl Store) {
        let unsaved =
            std::mem::take(&mut *self.unsaved.lock().unwrap_or_else(PoisonError::into_inner));
        for ((old, new), changes) in unsaved {
            if store
                .put_drift_summary(&old, &new, &self.grader, &changes.encode())
                .is_err()
            {
                return;
            }
        }
    }
}

impl Generations {
    fn insert(&mut self, key: (Digest, Digest), changes: Arc<Changes>) {
        if self.young.len() >= CACHE_ENTRIES {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(key, changes);
    }
}

/// What the change computations need besides the store.
pub struct Context<'a> {
    pub classifier: &'a Classifier,
    pub cache: &'a DriftCache,
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
            Failure::Internal(format!(
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
    ctx: &Context<'_>,
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
    if let Some(hit) = ctx.cache.get(&key) {
        return Ok(hit);
    }
    if let Some(stored) = store
        .drift_summary(&old_set, &new_set, &ctx.cache.grader)?
        .and_then(|bytes| Changes::decode(&bytes))
    {
        let stored = Arc::new(stored);
        ctx.cache.put(key, Arc::clone(&stored));
        return Ok(stored);
    }
    let tools = graded_between(store, ctx, old, new)?;
    let changes = Arc::new(Changes {
        severity: tools.iter().map(|t| t.severity).max().unwrap_or_default(),
        tools: tools.iter().map(ToolChange::of).collect(),
    });
    ctx.cache.put(key, Arc::clone(&changes));
    ctx.cache
        .unsaved
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((key, Arc::clone(&changes)));
    Ok(changes)
}

/// Every tool that did not stay the same from `old` to `new`, graded with
/// its evidence, worst first.
fn graded_between(
    store: &impl Store,
    ctx: &Context<'_>,
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
    fn view(tools: &[LoadedTool]) -> Vec<Tool<'_>> {
        tools
            .iter()
            .map(|t| Tool {
                name: &t.name,
                definition: &t.definition,
            })
            .collect()
    }
    Ok(drift(ctx.classifier, &view(&old_tools), &view(&new_tools))
        .tools
        .into_iter()
        .filter(|t| t.change != Change::Unchanged)
        .collect())
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
pub fn history(store: &impl Store, ctx: &Context<'_>, server: &str) -> Result<Vec<Step>, Failure> {
    store
        .tool_set_changes(server)?
        .into_iter()
        .map(|(new, old)| {
            let changes = changes_between(store, ctx, &old, &new)?;
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
    ctx: &Context<'_>,
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
            Some(old) => changes_between(store, ctx, old, &summary)?,
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
    ctx: &Context<'_>,
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
        Some(prev) => changes_between(store, ctx, prev, summary)?,
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

/// The change to `tool` at observation `id` of `server`.
pub fn change(
    store: &impl Store,
    ctx: &Context<'_>,
    server: &str,
    id: ObservationId,
    tool: &str,
) -> Result<ChangeDetail, Failure> {
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
    let drift = graded_between(store, ctx, &previous, &observation.summary)?
        .into_iter()
        .find(|t| t.name == tool)
        .ok_or_else(not_found)?;
    let old_name = match &drift.change {
        Change::Renamed { from } => from.as_str(),
        _ => tool,
    };
    let before = load_tools(store, &read_observation(store, previous.id)?)?;
    let after = load_tools(store, &observation)?;
    let named = |tools: &[LoadedTool], name: &str| -> Vec<LoadedTool> {
        tools.iter().filter(|t| t.name == name).cloned().collect()
    };
    // Pick the copies the drift paired: with a name listed more than once,
    // copies pair in listing order and the rest were added or removed.
    let (old_copies, new_copies) = (named(&before, old_name), named(&after, tool));
    let siblings =
        plumbline_taxonomy::Inventory::empty().with_siblings(after.iter().map(|t| t.name.as_str()));
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
                    ctx.classifier
                        .classify_in(&a.definition, &b.definition, &siblings)
                        == drift.classification
                })
                .unwrap_or(0);
            (old_copies.get(pair).cloned(), new_copies.get(pair).cloned())
        }
    };
    let duplicated = named(&before, tool).len() > 1 || new_copies.len() > 1 || old_copies.len() > 1;
    let copies = duplicated.then_some(new_copies);
    Ok(ChangeDetail {
        observation,
        previous,
        drift,
        old,
        new,
        copies,
    })
}

/// What accepting the change does to the baseline: the tool's new version
/// (for a rename, under its new name, the old name removed), or, for a
/// removal, no version.
pub fn baseline_edits(detail: &ChangeDetail) -> Result<Vec<BaselineEdit>, Failure> {
    let name = detail.drift.name.clone();
    if detail.copies.is_some() {
        // A baseline holds one version per name; which copy a client shows
        // the model is not ours to guess.
        return Err(Failure::BadRequest(format!(
            "the listing carries {name:?} more than once, so no one version can be accepted; mark the change reviewed"
        )));
    }
    let set = || -> Result<BaselineEdit, Failure> {
        let new = detail.new.as_ref().ok_or_else(|| {
            Failure::Internal(format!("the new version of tool {name:?} is missing"))
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
pub fn overview(store: &impl Store, ctx: &Context<'_>) -> Result<Vec<ServerOverview>, Failure> {
    store
        .servers()?
        .into_iter()
        .map(|server| server_overview(store, ctx, server))
        .collect()
}

/// One server's line of the overview.
pub fn server_overview(
    store: &impl Store,
    ctx: &Context<'_>,
    server: Server,
) -> Result<ServerOverview, Failure> {
    let steps = history(store, ctx, &server.name)?;
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

    #[test]
    fn a_stored_summary_reads_back_as_written() {
        let tool =
            |name: &str, change: Change, severity: Severity, rules: Vec<RuleId>| ToolChange {
                name: name.into(),
                change,
                severity,
                rules,
            };
        let changes = Changes {
            severity: Severity::Critical,
            tools: vec![
                tool(
                    "add\u{202e}\"",
                    Change::Changed,
                    Severity::Critical,
                    vec![RuleId::R01, RuleId::R07],
                ),
                tool("new", Change::Added, Severity::High, vec![RuleId::R05]),
                tool(
                    "lookup_order",
                    Change::Renamed {
                        from: "lookup".into(),
                    },
                    Severity::Medium,
                    vec![RuleId::R06],
                ),
                tool("gone", Change::Removed, Severity::None, Vec::new()),
            ],
        };
        assert_eq!(Changes::decode(&changes.encode()), Some(changes));
        assert_eq!(
            Changes::decode(&Changes::default().encode()),
            Some(Changes::default())
        );
        for broken in [
            &b""[..],
            b"[]",
            br#"{"severity":"NONE"}"#,
            br#"{"severity":"NONE","tools":[{"name":"x","kind":"moved","severity":"LOW","rules":[]}]}"#,
            br#"{"severity":"NONE","tools":[{"name":"x","kind":"renamed","severity":"LOW","rules":[]}]}"#,
            br#"{"severity":"NONE","tools":[{"name":"x","kind":"added","severity":"LOW","rules":["R99"]}]}"#,
        ] {
            assert_eq!(Changes::decode(broken), None, "{}", String::from_utf8_lossy(broken));
        }
    }

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
