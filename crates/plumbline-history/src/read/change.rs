//! One change with its evidence, graded on demand from the stored raw bytes; what accepting it edits.

use super::*;

/// What grading the change to `tool` at observation `id` of `server`
/// needs. Only that tool is read and parsed (its old and new versions, the
/// names of the new listing as siblings, and the foreign inventory the
/// change was graded with): a page about one small
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
        Change::Removed | Change::Unreadable { .. } => None,
        _ => load_named(store, &observation, tool)?,
    };
    // An added tool is compared with its siblings' descriptions
    // (taxonomy-v3 R16), as drift did when it was recorded; a changed one
    // needs only their names.
    let siblings: Vec<(String, Option<String>)> = if matches!(change, Change::Added) {
        load_tools(store, &observation)?
            .into_iter()
            .map(|t| {
                let description = t
                    .definition
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                (t.name, description)
            })
            .collect()
    } else {
        observation
            .tools
            .iter()
            .filter_map(|t| t.name.clone())
            .map(|name| (name, None))
            .collect()
    };
    let foreign = foreign_names(store, store.inventory(id)?)?;
    Ok(ChangeInputs(Inputs::One(Box::new(One {
        observation,
        previous,
        tool: tool.to_owned(),
        change,
        old,
        new,
        siblings,
        foreign,
    }))))
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
            foreign,
        } = match self.0 {
            Inputs::One(one) => *one,
            Inputs::Graded(detail) => return *detail,
        };
        let siblings = siblings
            .iter()
            .fold(Inventory::empty(), |inventory, (name, description)| {
                inventory.with_sibling_tool(name, description.as_deref())
            })
            .with_foreign(foreign);
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
pub(super) fn change_among_copies(
    store: &impl Store,
    grader: &Grader,
    observation: Observation,
    previous: ObservationSummary,
    previous_obs: Observation,
    tool: &str,
) -> Result<ChangeDetail, Failure> {
    let id = observation.summary.id;
    let foreign = foreign_names(store, store.inventory(id)?)?;
    let drift = graded_between(store, grader, &previous, &observation.summary, &foreign)?
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
    let siblings = Inventory::empty()
        .with_sibling_definitions(after.iter().map(|t| (t.name.as_str(), &t.definition)))
        .with_foreign(foreign);
    let (old, new) = match &drift.change {
        Change::Added => (None, new_copies.get(named(&before, tool).len()).cloned()),
        Change::Removed => (old_copies.get(named(&after, tool).len()).cloned(), None),
        Change::Renamed { from } => (
            old_copies.get(named(&after, from).len()).cloned(),
            new_copies.get(named(&before, tool).len()).cloned(),
        ),
        // Not readable, so no new version; the old one, if any, is the first.
        Change::Unreadable { .. } => (old_copies.first().cloned(), None),
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
pub(super) fn load_named(
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
    let raw = super::compared_bytes(store, observation.summary.id, entry)?;
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
        return Err(Failure::NotAcceptable(format!(
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
        Change::Unreadable { reason } => {
            return Err(Failure::NotAcceptable(format!(
                "tool {name:?} could not be read ({reason}), so it has no version to accept; fix the server, or mark the change reviewed"
            )))
        }
    })
}

/// One change's tool and what accepting it edits in the baseline, or why
/// it cannot be accepted.
pub type ChangeEdits = (String, Result<Vec<BaselineEdit>, String>);

/// What accepting each change of observation `id` of `server` edits in the
/// baseline, worked out at once from the recorded grades and the two
/// listings (no change is graded again): for accepting a whole
/// observation, which must cost one pass, not one per change. Each change
/// comes with its edits, or with why it cannot be accepted (a name listed
/// more than once, a tool that could not be read); the same edits
/// [`baseline_edits`] gives for one change.
pub fn baseline_edits_all(
    store: &impl Store,
    grader: &Grader,
    server: &str,
    id: ObservationId,
) -> Result<Vec<ChangeEdits>, Failure> {
    let observation = observation_of(store, server, id)?;
    let nothing = || Failure::NotFound(format!("observation {id} of {server:?} has no change"));
    if !observation.summary.outcome.is_ok() {
        return Err(nothing());
    }
    let previous = store
        .latest_successful(server, Some(id))?
        .ok_or_else(nothing)?;
    let summary = changes_between(store, grader, &previous, &observation.summary)?;
    let previous_obs = read_observation(store, previous.id)?;
    // Name → (how many copies, the first copy's version).
    let index = |o: &Observation| {
        let mut by: BTreeMap<String, (usize, Option<Digest>)> = BTreeMap::new();
        for t in &o.tools {
            if let Some(name) = &t.name {
                let e = by.entry(name.clone()).or_insert((0, t.canonical_digest));
                e.0 += 1;
            }
        }
        by
    };
    let (now, before) = (index(&observation), index(&previous_obs));
    let copies = |name: &str| {
        now.get(name)
            .map_or(0, |e| e.0)
            .max(before.get(name).map_or(0, |e| e.0))
    };
    let set = |name: &str| -> Result<BaselineEdit, String> {
        match now.get(name) {
            Some((_, Some(digest))) => Ok(BaselineEdit::Set {
                tool: name.to_owned(),
                canonical_digest: *digest,
            }),
            _ => Err(format!("the new version of tool {name:?} is missing")),
        }
    };
    Ok(summary
        .tools
        .iter()
        .map(|t| {
            let name = t.name.as_str();
            let from = match &t.change {
                Change::Renamed { from } => Some(from.as_str()),
                _ => None,
            };
            let edits = if copies(name) > 1 || from.is_some_and(|f| copies(f) > 1) {
                Err(format!(
                    "the listing carries {name:?} more than once, so no one version can be accepted; mark the change reviewed"
                ))
            } else {
                match &t.change {
                    Change::Added | Change::Changed => set(name).map(|e| vec![e]),
                    Change::Removed => Ok(vec![BaselineEdit::Remove {
                        tool: name.to_owned(),
                    }]),
                    Change::Renamed { from } => set(name).map(|e| {
                        vec![BaselineEdit::Remove { tool: from.clone() }, e]
                    }),
                    Change::Unchanged => Ok(Vec::new()),
                    Change::Unreadable { reason } => Err(format!(
                        "tool {name:?} could not be read ({reason}), so it has no version to accept; fix the server, or mark the change reviewed"
                    )),
                }
            };
            (t.name.clone(), edits)
        })
        .collect())
}
