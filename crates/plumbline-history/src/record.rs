//! Recording observations: each listing stored once, its drift graded once
//! against the server's previous successful observation, and the grades'
//! summary kept in the store for every reader.

use plumbline_drift::{drift_among, Change, Drift, Tool, ToolDrift};
use plumbline_store::{LeaseToken, NewObservation, NormalizedValue, ObservationId, Problem, Store};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::Classification;

use crate::read::load_tools;
use crate::{Changes, Grader, HistoryError};

/// One observation to record: what was observed of a server, and how the
/// server is reached (its identity, a JSON object holding no secret).
#[derive(Debug, Clone)]
pub struct Observed {
    pub identity: String,
    pub observation: NewObservation,
    /// The lease the observation was made under (a watcher sharing the
    /// history with others): recorded only while it is still the
    /// server's, else skipped.
    pub lease: Option<LeaseToken>,
}

/// What recording one observation found.
#[derive(Debug)]
pub struct Recorded {
    pub server: String,
    pub observation: ObservationId,
    /// Why the server could not be observed, for a failure.
    pub error: Option<String>,
    /// How many tools were listed.
    pub tools: usize,
    /// Problems recorded with the observation (malformed tools, duplicate
    /// names, tools without a name, …).
    pub problems: Vec<Problem>,
    /// Strings the server's normalisation rules rewrote before comparing:
    /// `(tool, what and by which rule)`.
    pub normalized: Vec<(String, NormalizedValue)>,
    /// The observation drift is measured against: the server's previous
    /// successful one (none for a first or failed observation).
    pub previous: Option<ObservationId>,
    /// The drift since `previous`, with its evidence.
    pub drift: Option<Drift>,
    /// How the way the server is reached changed since it was last
    /// recorded, one line per key ([`crate::identity_changes`]);
    /// empty when it did not. Another command or URL may be another server.
    pub reached_differently: Vec<String>,
    pub started_at_ms: i64,
    pub finished_at_ms: i64,
    /// The listing repeated the server's previous observation byte for
    /// byte (and was recorded as such, [`Repeats`]): nothing changed, so
    /// there is nothing to grade or alert.
    pub repeated: bool,
}

/// What a recorder remembers of each server's last observation: its id
/// and the fingerprint of the listing it was recorded from, so that a
/// listing repeating it exactly (the common case for a watcher) is
/// recorded as a copy ([`Store::record_repeats`])
/// rather than stored, compared and graded again.
#[derive(Debug, Default)]
pub struct Repeats {
    last: std::collections::HashMap<String, (ObservationId, plumbline_store::Digest)>,
}

/// The fingerprint of what recording `o` stores: how the server is
/// reached, what it said of itself, every tool as sent and as normalised,
/// in order. `None` for what is never recorded as a repeat: a failure, or
/// a listing with problems of its own.
fn fingerprint(o: &Observed) -> Option<plumbline_store::Digest> {
    let n = &o.observation;
    if !n.outcome.is_ok() || !n.problems.is_empty() {
        return None;
    }
    let mut b = Vec::with_capacity(256 + n.tools.iter().map(|t| t.raw.len() + 16).sum::<usize>());
    let mut put = |bytes: Option<&[u8]>| match bytes {
        None => b.push(0),
        Some(v) => {
            b.push(1);
            b.extend_from_slice(&(v.len() as u64).to_be_bytes());
            b.extend_from_slice(v);
        }
    };
    put(Some(b"plumbline repeat v1"));
    put(Some(o.identity.as_bytes()));
    put(n.protocol_version.as_deref().map(str::as_bytes));
    put(n.server_info.as_deref());
    put(n.capabilities.as_deref());
    put(n.instructions.as_deref().map(str::as_bytes));
    put(n.authorization.as_deref());
    for t in &n.tools {
        put(t.name.as_deref().map(str::as_bytes));
        put(Some(&t.raw));
        match &t.normalized {
            None => put(None),
            Some(normalized) => {
                put(Some(&normalized.raw));
                for v in &normalized.by {
                    put(Some(v.pointer.as_bytes()));
                    put(Some(v.rule.as_bytes()));
                }
            }
        }
    }
    Some(plumbline_store::digest(&b))
}

impl Recorded {
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    pub fn severity(&self) -> plumbline_taxonomy::Severity {
        self.drift
            .as_ref()
            .map_or_else(Default::default, |d| d.severity)
    }
}

/// The drift of a listing whose tool set did not change.
fn unchanged(observation: &NewObservation) -> Drift {
    let mut tools: Vec<ToolDrift> = observation
        .tools
        .iter()
        .filter_map(|t| t.name.as_deref())
        .map(|name| ToolDrift::graded(name, Change::Unchanged, Classification::none()))
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in &tools {
        *counts.entry(t.name.as_str()).or_default() += 1;
    }
    let duplicates = counts
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .map(|(name, n)| plumbline_drift::Duplicate {
            name: name.to_owned(),
            old_count: n,
            new_count: n,
        })
        .collect();
    Drift {
        severity: plumbline_taxonomy::Severity::None,
        tools,
        duplicates,
    }
}

/// The named, well-formed tools of a listing about to be recorded, parsed
/// once for the drift: as rewritten by normalisation rules, where they
/// applied.
fn parsed(observation: &NewObservation) -> Vec<(String, Value)> {
    observation
        .tools
        .iter()
        .filter_map(|t| {
            // A tool the store keeps as malformed is not compared, whatever
            // its rewrite.
            let raw = parse_tool(&t.raw).ok()?;
            let compared = match &t.normalized {
                Some(n) => parse_tool(&n.raw).ok()?,
                None => raw,
            };
            Some((t.name.clone()?, compared))
        })
        .collect()
}

/// Problems for the tools of `observation` whose normalisation rules hid a
/// change: graded old → new as the server sent them, the change is MEDIUM
/// or worse, and worse than graded as rewritten (a greedy rule swallowing
/// an injected instruction along with a per-user greeting). Only tools a rule rewrote
/// and whose bytes changed since the server's latest successful
/// observation are graded again.
fn hidden_by_rules(
    store: &impl Store,
    grader: &Grader,
    observation: &NewObservation,
) -> Result<Vec<Problem>, HistoryError> {
    if !observation.outcome.is_ok() || observation.tools.iter().all(|t| t.normalized.is_none()) {
        return Ok(Vec::new());
    }
    let Some(previous) = store.latest_successful(&observation.server, None)? else {
        return Ok(Vec::new());
    };
    let Some(previous) = store.observation(previous.id)? else {
        return Ok(Vec::new());
    };
    let mut problems = Vec::new();
    for (position, t) in observation.tools.iter().enumerate() {
        let (Some(name), Some(normalized)) = (&t.name, &t.normalized) else {
            continue;
        };
        let Some(before) = previous
            .tools
            .iter()
            .find(|e| e.name.as_deref() == Some(name.as_str()))
        else {
            continue;
        };
        let Some(old_raw) = store.raw_tool(&before.raw_digest)? else {
            continue;
        };
        if old_raw == t.raw {
            continue;
        }
        let old_compared = match &before.normalized {
            Some(n) => store
                .raw_tool(&n.raw_digest)?
                .unwrap_or_else(|| old_raw.clone()),
            None => old_raw.clone(),
        };
        let (Ok(old_raw), Ok(new_raw), Ok(old_compared), Ok(new_compared)) = (
            parse_tool(&old_raw),
            parse_tool(&t.raw),
            parse_tool(&old_compared),
            parse_tool(&normalized.raw),
        ) else {
            continue;
        };
        let as_sent = grader.classifier.classify(&old_raw, &new_raw);
        let as_compared = grader.classifier.classify(&old_compared, &new_compared);
        // A reworded greeting (R08, R09) is what rules are for; anything
        // more (an instruction, a URL, an input) is not.
        if as_sent.severity >= plumbline_taxonomy::Severity::Medium
            && as_sent.severity > as_compared.severity
        {
            let mut rules: Vec<&str> = normalized.by.iter().map(|v| v.rule.as_str()).collect();
            rules.sort_unstable();
            rules.dedup();
            let fired: Vec<&str> = as_sent.rules.iter().map(|r| r.as_str()).collect();
            problems.push(Problem {
                position: u32::try_from(position).ok(),
                kind: plumbline_store::ProblemKind::Other,
                tool_name: Some(name.clone()),
                message: format!(
                    "normalisation rule {} hid a change graded {} without it ({}), {} as rewritten: review the rule",
                    rules.join(", "),
                    as_sent.severity,
                    fired.join(", "),
                    as_compared.severity
                ),
            });
        }
    }
    Ok(problems)
}

/// Records each observation of `batch` (in order) and grades its drift
/// against the server's previous successful observation, knowing the tool
/// names of the other servers the history holds
/// ([`crate::foreign_inventory`], kept with the observation); keeps each
/// drift's summary in the store under `grader`'s key and that inventory's.
/// A failure is recorded as a failure, never as "every tool removed".
pub fn record(
    store: &mut impl Store,
    grader: &Grader,
    batch: Vec<Observed>,
) -> Result<Vec<Recorded>, HistoryError> {
    record_with(store, grader, batch, &mut Repeats::default())
}

/// [`record`], remembering in `repeats` what each server's last listing
/// was, so that a listing that repeats it exactly is recorded as a copy of
/// its observation ([`Store::record_repeats`], one statement and the
/// transaction's own) and is neither graded nor alerted: nothing changed.
pub fn record_with(
    store: &mut impl Store,
    grader: &Grader,
    batch: Vec<Observed>,
    repeats: &mut Repeats,
) -> Result<Vec<Recorded>, HistoryError> {
    let mut out = Vec::with_capacity(batch.len());
    for o in batch {
        match record_repeat(store, &o, repeats)? {
            Some(r) => out.push(r),
            None => out.extend(record_whole(store, grader, vec![o], repeats)?),
        }
    }
    Ok(out)
}

/// Records `o` as a copy of the server's last observation when it repeats
/// the listing that one was recorded from; `None` (nothing written) when
/// it does not, or the store finds that observation no longer the
/// server's newest.
fn record_repeat(
    store: &mut impl Store,
    o: &Observed,
    repeats: &mut Repeats,
) -> Result<Option<Recorded>, HistoryError> {
    Ok(record_repeats(store, std::slice::from_ref(o), repeats)?
        .pop()
        .flatten())
}

impl Repeats {
    /// The repeat `o` would be recorded as, with its fingerprint: `None`
    /// when it is not a repeat of what this recorder last recorded of its
    /// server.
    fn of(&self, o: &Observed) -> Option<(plumbline_store::Repeat, plumbline_store::Digest)> {
        let n = &o.observation;
        // The cache first: a server this recorder has not recorded costs
        // no fingerprint.
        let &(previous, last) = self.last.get(&n.server)?;
        let print = fingerprint(o)?;
        if print != last {
            return None;
        }
        let identity = plumbline_store::canonicalize(o.identity.as_bytes()).ok()?;
        Some((
            plumbline_store::Repeat {
                server: n.server.clone(),
                identity: String::from_utf8_lossy(&identity).into_owned(),
                previous,
                started_at_ms: n.started_at_ms,
                finished_at_ms: n.finished_at_ms,
                lease: o.lease.clone(),
            },
            print,
        ))
    }
}

/// Records each of `batch` that repeats what this recorder last recorded of
/// its server as a copy of that observation, all in one transaction
/// ([`Store::record_repeats`]: one round trip on PostgreSQL); the others
/// are left (`None`, nothing written), as is one the store refuses (its
/// previous observation no longer the newest, its lease lost), for the
/// caller to record the whole way. At most one listing per server.
pub fn record_repeats(
    store: &mut impl Store,
    batch: &[Observed],
    repeats: &mut Repeats,
) -> Result<Vec<Option<Recorded>>, HistoryError> {
    let mut out: Vec<Option<Recorded>> = batch.iter().map(|_| None).collect();
    let mut asked = Vec::new();
    let mut at = Vec::new();
    let mut servers = std::collections::HashSet::new();
    for (i, o) in batch.iter().enumerate() {
        if let Some((repeat, print)) = repeats.of(o) {
            if servers.insert(repeat.server.clone()) {
                asked.push(repeat);
                at.push((i, print));
            }
        }
    }
    if asked.is_empty() {
        return Ok(out);
    }
    let ids = store.record_repeats(&asked)?;
    for ((i, print), (repeat, id)) in at.into_iter().zip(asked.into_iter().zip(ids)) {
        match id {
            Some(id) => {
                repeats.last.insert(repeat.server.clone(), (id, print));
                out[i] = Some(repeated(&batch[i].observation, id, repeat.previous));
            }
            None => {
                repeats.last.remove(&repeat.server);
            }
        }
    }
    Ok(out)
}

/// What recording a repeat found: the previous observation's tools,
/// unchanged.
fn repeated(n: &NewObservation, id: ObservationId, previous: ObservationId) -> Recorded {
    Recorded {
        server: n.server.clone(),
        observation: id,
        error: None,
        tools: n.tools.len(),
        problems: Vec::new(),
        normalized: normalized_values(n),
        previous: Some(previous),
        drift: Some(unchanged(n)),
        reached_differently: Vec::new(),
        started_at_ms: n.started_at_ms,
        finished_at_ms: n.finished_at_ms,
        repeated: true,
    }
}

/// The strings of `n` that normalisation rules rewrote: `(tool, what and
/// by which rule)`.
fn normalized_values(n: &NewObservation) -> Vec<(String, NormalizedValue)> {
    n.tools
        .iter()
        .filter_map(|t| Some((t.name.as_deref()?, t.normalized.as_ref()?)))
        .flat_map(|(name, n)| n.by.iter().map(move |v| (name.to_owned(), v.clone())))
        .collect()
}

/// [`record_with`] for what is not a repeat: each listing stored,
/// compared with the server's previous successful observation and graded.
fn record_whole(
    store: &mut impl Store,
    grader: &Grader,
    batch: Vec<Observed>,
    repeats: &mut Repeats,
) -> Result<Vec<Recorded>, HistoryError> {
    // Registering a server is a write; most observations find it as it was.
    let mut identities: std::collections::HashMap<String, String> = Default::default();
    for o in &batch {
        let name = &o.observation.server;
        if !identities.contains_key(name) {
            if let Some(s) = store.server(name)? {
                identities.insert(s.name, s.identity);
            }
        }
    }
    let mut out = Vec::with_capacity(batch.len());
    for mut o in batch {
        let known = identities.get(&o.observation.server).is_some_and(|i| {
            plumbline_store::canonicalize(o.identity.as_bytes()).is_ok_and(|c| c == i.as_bytes())
        });
        let mut reached_differently = Vec::new();
        if !known {
            store.put_server(&o.observation.server, &o.identity)?;
            let canonical = plumbline_store::canonicalize(o.identity.as_bytes())
                .map(|c| String::from_utf8_lossy(&c).into_owned())
                .unwrap_or_default();
            // A server recorded before, now reached another way: said with
            // the observation (kept as its problem, so every reader shows
            // it) and with its alerts.
            if let Some(before) = identities.insert(o.observation.server.clone(), canonical.clone())
            {
                reached_differently = crate::identity_changes(&before, &canonical);
                if !reached_differently.is_empty() {
                    o.observation.problems.push(Problem {
                        position: None,
                        kind: plumbline_store::ProblemKind::Other,
                        tool_name: None,
                        message: format!(
                            "reached differently than before ({}): it may be another server",
                            reached_differently.join("; ")
                        ),
                    });
                }
            }
        }
        // A normalisation rule that swallowed what a change added is said
        // with the observation, before it is recorded.
        let hidden = hidden_by_rules(store, grader, &o.observation)?;
        o.observation.problems.extend(hidden);
        let print = fingerprint(&o);
        let n = &o.observation;
        repeats.last.remove(&n.server);
        let id = match &o.lease {
            None => store.record_observation(n)?,
            Some(lease) => match store.record_observation_under(n, lease) {
                Ok(id) => id,
                // Another watcher holds the server now: what this one saw
                // is not its to record; the rest of the batch goes on.
                Err(plumbline_store::StoreError::LeaseLost { .. }) => continue,
                Err(e) => return Err(e.into()),
            },
        };
        match derive(store, grader, id, n, reached_differently) {
            Ok(r) => {
                // The next listing of the server that repeats this one is
                // recorded as its copy: only a success without problems
                // (a copy keeps none), the newest of its server.
                if let (Some(print), None, true) = (print, &r.error, r.problems.is_empty()) {
                    repeats.last.insert(n.server.clone(), (id, print));
                }
                out.push(r)
            }
            Err(source) => {
                return Err(HistoryError::Derived {
                    observation: id,
                    source: Box::new(source),
                })
            }
        }
    }
    Ok(out)
}

/// Grades observation `id` again, as [`record`] did when it recorded it
/// from `observed`: for a caller whose [`record`] failed after the
/// observation was committed ([`HistoryError::Derived`]), so that it is
/// graded (and alerted) once, never recorded twice.
pub fn regrade(
    store: &mut impl Store,
    grader: &Grader,
    id: ObservationId,
    observed: &Observed,
) -> Result<Recorded, HistoryError> {
    derive(store, grader, id, &observed.observation, Vec::new())
}

/// What recording observation `id` (just committed from `n`) found: its
/// problems and its drift since the previous successful observation,
/// graded and kept.
fn derive(
    store: &mut impl Store,
    grader: &Grader,
    id: ObservationId,
    n: &NewObservation,
    reached_differently: Vec<String>,
) -> Result<Recorded, HistoryError> {
    let vanished =
        || HistoryError::Inconsistent(format!("observation {id} vanished after recording"));
    let summary = store.observation_summary(id)?.ok_or_else(vanished)?;
    let problems = if summary.problem_count == 0 {
        Vec::new()
    } else {
        store.observation(id)?.ok_or_else(vanished)?.problems
    };
    let mut r = Recorded {
        server: n.server.clone(),
        observation: id,
        error: match &n.outcome {
            plumbline_store::Outcome::Failed { error } => Some(error.clone()),
            plumbline_store::Outcome::Ok => None,
        },
        tools: n.tools.len(),
        problems,
        normalized: normalized_values(n),
        previous: None,
        drift: None,
        reached_differently,
        started_at_ms: n.started_at_ms,
        finished_at_ms: n.finished_at_ms,
        repeated: false,
    };
    if n.outcome.is_ok() {
        if let Some(prev) = store.latest_successful(&n.server, Some(id))? {
            if prev.tool_set == summary.tool_set {
                // The same tool set: every tool unchanged, nothing to
                // parse or grade.
                r.previous = Some(prev.id);
                r.drift = Some(unchanged(n));
                return Ok(r);
            }
            let new_tools = parsed(n);
            let old_obs = store.observation(prev.id)?.ok_or_else(|| {
                HistoryError::Inconsistent(format!("observation {} is missing", prev.id))
            })?;
            let old = load_tools(store, &old_obs)?;
            let view_old: Vec<Tool<'_>> = old
                .iter()
                .map(|t| Tool {
                    name: &t.name,
                    definition: &t.definition,
                })
                .collect();
            let view_new: Vec<Tool<'_>> = new_tools
                .iter()
                .map(|(name, definition)| Tool { name, definition })
                .collect();
            // The other servers' tool names, for the references rules:
            // gathered only for a listing that is graded, and kept with
            // it so that every reader grades it with the same names.
            let foreign = crate::foreign_inventory(store, &n.server)?;
            let inventory = if foreign.is_empty() {
                None
            } else {
                Some(store.put_inventory(id, &foreign)?)
            };
            grader.count();
            // What the new listing holds that cannot be read fails
            // closed: it is in the drift, never silently left out.
            // The store reports every malformed tool as a problem, so a
            // listing without problems whose tools all have names has
            // nothing unreadable: no need to read it back.
            let unreadable =
                if summary.problem_count == 0 && n.tools.iter().all(|t| t.name.is_some()) {
                    Vec::new()
                } else {
                    let new_obs = store.observation(id)?.ok_or_else(vanished)?;
                    crate::read::unreadable_since(&new_obs, &old_obs)
                };
            let d = drift_among(&grader.classifier, &view_old, &view_new, &foreign)
                .with_unreadable(&unreadable);
            if let (Some(old_set), Some(new_set)) = (prev.tool_set, summary.tool_set) {
                if old_set != new_set {
                    let summary = Changes::of(&d);
                    store.put_drift_summary(
                        &old_set,
                        &new_set,
                        &crate::summary_key_with(grader.key(), inventory.as_ref()),
                        &summary.encode(),
                    )?;
                    grader
                        .cache
                        .put((old_set, new_set, inventory), std::sync::Arc::new(summary));
                }
            }
            r.previous = Some(prev.id);
            r.drift = Some(d);
        }
    }
    Ok(r)
}
