//! Figures over corpora of tool-change pairs: how many published attacks
//! the taxonomy grades HIGH or above, and how much benign release drift it
//! grades CRITICAL. The phrase list may only grow where these figures say
//! so (spec 3.1). Pure: callers read the files.

use std::collections::BTreeMap;

use crate::json::{parse_with_depth, Value, MAX_DEPTH};
use crate::{Classification, Classifier, Severity};

/// One pair of a corpus file.
#[derive(Debug, Clone)]
pub struct Pair {
    pub id: String,
    pub old: Value,
    pub new: Value,
}

/// Parses a JSON Lines corpus of `{"id", "old", "new", ...}` records.
/// Blank lines are skipped; a malformed record is an error naming its line.
pub fn parse_pairs(text: &str) -> Result<Vec<Pair>, String> {
    let mut pairs = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record = parse_with_depth(line.as_bytes(), MAX_DEPTH + 1)
            .map_err(|e| format!("line {}: {e}", i + 1))?;
        let get = |k: &str| {
            record
                .get(k)
                .cloned()
                .ok_or(format!("line {}: no {k:?}", i + 1))
        };
        let id = match get("id")? {
            Value::String(s) => s.into_string(),
            other => other.to_json(),
        };
        pairs.push(Pair {
            id,
            old: get("old")?,
            new: get("new")?,
        });
    }
    Ok(pairs)
}

/// How a corpus was graded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grades {
    pub total: usize,
    pub by_severity: BTreeMap<Severity, usize>,
    /// Ids of the pairs at or above the severity asked about, in order.
    pub at_or_above: Vec<String>,
}

impl Grades {
    pub fn count_at_least(&self, severity: Severity) -> usize {
        self.by_severity.range(severity..).map(|(_, n)| n).sum()
    }
}

/// Classifies every pair and tallies severities; `at_or_above` lists the
/// pairs graded at least `mark`.
pub fn grade(classifier: &Classifier, pairs: &[Pair], mark: Severity) -> Grades {
    let mut grades = Grades {
        total: pairs.len(),
        ..Grades::default()
    };
    for p in pairs {
        let c: Classification = classifier.classify(&p.old, &p.new);
        *grades.by_severity.entry(c.severity).or_default() += 1;
        if c.severity >= mark {
            grades.at_or_above.push(p.id.clone());
        }
    }
    grades
}

/// What a labelled pair is known to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Attack,
    Benign,
}

/// One record of a labelled corpus, for `plumbline evaluate`:
/// `{"id", "label": "attack"|"benign", "old", "new"}`, optionally with a
/// `"group"`, a `"family"` and an `"inventory"` (`{"siblings": [...],
/// "foreign": [...]}` and, for taxonomy-v3, `"sibling_tools"` and
/// `"foreign_tools"`; or an array of sibling names). `"old": null` is a
/// tool added to its listing.
#[derive(Debug, Clone)]
pub struct LabelledPair {
    pub id: String,
    pub label: Label,
    /// The group the pair is reported in (default: the caller's, e.g. the
    /// file name).
    pub group: Option<String>,
    /// `{}` for an added tool.
    pub old: Value,
    pub new: Value,
    /// `"old": null`: the tool is new to its listing, graded as drift
    /// grades an added tool (`docs/taxonomy-v2.md` 6).
    pub added: bool,
    /// The attack family the record belongs to, if it names one.
    pub family: Option<String>,
    /// The record's inventory, read per taxonomy by [`inventory_for`].
    pub inventory_value: Option<Value>,
    pub inventory: crate::Inventory,
}

fn names(v: Option<&Value>) -> Result<Vec<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| "an inventory name is not a string".to_owned())
            })
            .collect(),
        Some(_) => Err("an inventory list is not an array".to_owned()),
    }
}

/// A record's `"inventory"`: `{"siblings": [...], "foreign": [...]}`, or
/// an array of sibling names; absent or null is empty.
pub fn inventory_of(v: Option<&Value>) -> Result<crate::Inventory, String> {
    Ok(match v {
        Some(Value::Object(o)) => crate::Inventory::empty()
            .with_siblings(names(o.get("siblings"))?)
            .with_foreign(names(o.get("foreign"))?),
        other => crate::Inventory::empty().with_siblings(names(other)?),
    })
}

/// Tool objects of an inventory list (`docs/taxonomy-v3.md` 1.1): each
/// element an object; one without a string `name` gives no tool.
fn tools(v: Option<&Value>) -> Result<Vec<(&str, Option<&str>)>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => {
            let mut out = Vec::new();
            for item in items {
                let Value::Object(o) = item else {
                    return Err("an inventory tool is not an object".to_owned());
                };
                if let Some(name) = o.get("name").and_then(Value::as_str) {
                    out.push((name, o.get("description").and_then(Value::as_str)));
                }
            }
            Ok(out)
        }
        Some(_) => Err("an inventory list is not an array".to_owned()),
    }
}

/// A record's `"inventory"` as `taxonomy` reads it. taxonomy-v3 also reads
/// `"sibling_tools"` and `"foreign_tools"`: tool objects whose names join
/// the siblings and the foreign names and whose descriptions R16 compares.
/// v1 and v2 ignore those keys (V2-C7: other keys are ignored).
pub fn inventory_for(
    v: Option<&Value>,
    taxonomy: crate::Taxonomy,
) -> Result<crate::Inventory, String> {
    let mut inventory = inventory_of(v)?;
    if taxonomy < crate::Taxonomy::V3 {
        return Ok(inventory);
    }
    if let Some(Value::Object(o)) = v {
        for (name, description) in tools(o.get("sibling_tools"))? {
            inventory = inventory.with_sibling_tool(name, description);
        }
        for (name, description) in tools(o.get("foreign_tools"))? {
            inventory = inventory.with_foreign_tool(name, description);
        }
    }
    Ok(inventory)
}

/// Parses one labelled record (a line of JSON Lines).
pub fn parse_labelled(line: &str) -> Result<LabelledPair, String> {
    let record = parse_with_depth(line.as_bytes(), MAX_DEPTH + 2).map_err(|e| e.to_string())?;
    let Value::Object(mut fields) = record else {
        return Err(format!("expected a JSON object, found {}", record.kind()));
    };
    let id = match fields.remove("id") {
        Some(Value::String(s)) => s.into_string(),
        Some(other) => other.to_json(),
        None => return Err("no \"id\"".to_owned()),
    };
    let label = match fields.get("label").and_then(Value::as_str) {
        Some("attack") => Label::Attack,
        Some("benign") => Label::Benign,
        _ => return Err(format!("{id}: \"label\" must be \"attack\" or \"benign\"")),
    };
    let group = fields
        .get("group")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let family = fields
        .get("family")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let inventory = inventory_of(fields.get("inventory")).map_err(|e| format!("{id}: {e}"))?;
    let inventory_value = fields.get("inventory").cloned();
    let added = matches!(fields.get("old"), Some(Value::Null));
    if added {
        fields.insert("old".to_owned(), Value::Object(crate::json::Object::new()));
    }
    let mut tool = |key: &str| match fields.remove(key) {
        Some(v @ Value::Object(_)) => Ok(v),
        Some(other) => Err(format!(
            "{id}: \"{key}\" is {}, not a tool object",
            other.kind()
        )),
        None => Err(format!("{id}: no \"{key}\"")),
    };
    let old = tool("old")?;
    let new = tool("new")?;
    Ok(LabelledPair {
        id,
        label,
        group,
        old,
        new,
        added,
        family,
        inventory_value,
        inventory,
    })
}

/// How one group of labelled pairs was graded.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct GroupScore {
    pub group: String,
    pub label: Option<Label>,
    pub pairs: usize,
    /// Pairs per severity, every severity present (NONE first).
    pub by_severity: BTreeMap<Severity, usize>,
    pub at_least_high: usize,
    pub critical: usize,
}

/// A rule's hits on benign pairs: how many pairs, and its most frequent
/// evidence messages.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BenignHits {
    pub rule: crate::RuleId,
    pub pairs: usize,
    /// (message, count), most frequent first, at most ten.
    pub evidence: Vec<(String, usize)>,
}

/// An attack graded below HIGH.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Miss {
    pub id: String,
    pub group: String,
    pub severity: Severity,
    pub rules: Vec<crate::RuleId>,
}

/// The figures `plumbline evaluate` prints.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Evaluation {
    pub taxonomy: crate::Taxonomy,
    pub groups: Vec<GroupScore>,
    pub attacks: GroupScore,
    pub benign: GroupScore,
    pub benign_rules: Vec<BenignHits>,
    pub missed_attacks: Vec<Miss>,
    /// Per family and label, for records that name a family.
    pub families: Vec<GroupScore>,
    /// Records whose inventory this taxonomy could not read (V2-C7); they
    /// are in no figure.
    pub unreadable: Vec<String>,
}

impl GroupScore {
    fn new(group: &str, label: Option<Label>) -> GroupScore {
        GroupScore {
            group: group.to_owned(),
            label,
            by_severity: Severity::ALL.iter().map(|s| (*s, 0)).collect(),
            ..GroupScore::default()
        }
    }

    fn add(&mut self, severity: Severity) {
        self.pairs += 1;
        *self.by_severity.entry(severity).or_default() += 1;
        self.at_least_high += usize::from(severity >= Severity::High);
        self.critical += usize::from(severity == Severity::Critical);
    }
}

/// Grades every pair (with its inventory) and tallies the figures: per
/// group and label, attacks at or above HIGH, benign pairs at or above
/// HIGH and at CRITICAL, each rule's benign hits with their most frequent
/// evidence, and every attack below HIGH. `pairs` carry their group
/// (`default_group` when they name none).
pub fn evaluate<'a>(
    classifier: &Classifier,
    pairs: impl IntoIterator<Item = (&'a LabelledPair, &'a str)>,
) -> Evaluation {
    let mut groups: Vec<GroupScore> = Vec::new();
    let mut attacks = GroupScore::new("attacks", Some(Label::Attack));
    let mut benign = GroupScore::new("benign", Some(Label::Benign));
    let mut hits: BTreeMap<crate::RuleId, (usize, BTreeMap<String, usize>)> = BTreeMap::new();
    let mut missed_attacks = Vec::new();
    let mut families: Vec<GroupScore> = Vec::new();
    let mut unreadable = Vec::new();
    for (p, default_group) in pairs {
        let read;
        let inventory = if classifier.taxonomy() >= crate::Taxonomy::V3 {
            match inventory_for(p.inventory_value.as_ref(), classifier.taxonomy()) {
                Ok(i) => {
                    read = i;
                    &read
                }
                Err(e) => {
                    unreadable.push(format!("{}: {e}", p.id));
                    continue;
                }
            }
        } else {
            &p.inventory
        };
        let c = if p.added {
            classifier.classify_added(&p.new, inventory)
        } else {
            classifier.classify_in(&p.old, &p.new, inventory)
        };
        if let Some(family) = &p.family {
            let slot = match families
                .iter()
                .position(|g| &g.group == family && g.label == Some(p.label))
            {
                Some(i) => i,
                None => {
                    families.push(GroupScore::new(family, Some(p.label)));
                    families.len() - 1
                }
            };
            families[slot].add(c.severity);
        }
        let group = p.group.as_deref().unwrap_or(default_group);
        let slot = match groups
            .iter()
            .position(|g| g.group == group && g.label == Some(p.label))
        {
            Some(i) => i,
            None => {
                groups.push(GroupScore::new(group, Some(p.label)));
                groups.len() - 1
            }
        };
        groups[slot].add(c.severity);
        match p.label {
            Label::Attack => {
                attacks.add(c.severity);
                if c.severity < Severity::High {
                    missed_attacks.push(Miss {
                        id: p.id.clone(),
                        group: group.to_owned(),
                        severity: c.severity,
                        rules: c.rules.clone(),
                    });
                }
            }
            Label::Benign => {
                benign.add(c.severity);
                for rule in &c.rules {
                    let entry = hits.entry(*rule).or_default();
                    entry.0 += 1;
                    for e in c.evidence.iter().filter(|e| e.rule == *rule) {
                        *entry.1.entry(e.message()).or_default() += 1;
                    }
                }
            }
        }
    }
    let benign_rules = hits
        .into_iter()
        .map(|(rule, (pairs, messages))| {
            let mut evidence: Vec<(String, usize)> = messages.into_iter().collect();
            evidence.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            evidence.truncate(10);
            BenignHits {
                rule,
                pairs,
                evidence,
            }
        })
        .collect();
    Evaluation {
        taxonomy: classifier.taxonomy(),
        groups,
        attacks,
        benign,
        benign_rules,
        missed_attacks,
        families,
        unreadable,
    }
}
