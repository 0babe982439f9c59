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
            Value::String(s) => s,
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
