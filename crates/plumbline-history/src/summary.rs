//! The stored form of a drift's grades: for each tool that did not stay
//! the same, its name, kind of change, severity and rules, without the
//! evidence (which is computed again, for one change, when asked for). It
//! is derived data, filed in the store under the two tool sets' digests and
//! the grader's key; a summary that cannot be read is graded again.

use plumbline_drift::{Change, ToolDrift};
use plumbline_taxonomy::{RuleId, Severity};
use serde::{Deserialize, Serialize};

/// The grade of one tool's change, without its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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

    /// An added tool in which no rule fired: LOW, for review only.
    pub fn is_new_for_review(&self) -> bool {
        self.change == Change::Added && self.rules.is_empty()
    }
}

/// The changes of one observation: every tool that did not stay the same,
/// worst first (the order of `plumbline_drift::Drift::tools`).
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Changes {
    pub severity: Severity,
    pub tools: Vec<ToolChange>,
    /// Graded after its observation was recorded (under another taxonomy
    /// or Plumbline version, by a reader or a backfill), not the grade made
    /// when it was recorded and alerted on: every reader says so.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub regraded: bool,
}

impl Changes {
    /// The summary of `drift`'s changed tools.
    pub fn of(drift: &plumbline_drift::Drift) -> Changes {
        Changes {
            severity: drift.severity,
            tools: drift.changes().map(ToolChange::of).collect(),
            regraded: false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The stored form: this, as JSON.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The stored form read back; `None` for anything else, which is then
    /// graded again.
    pub fn decode(bytes: &[u8]) -> Option<Changes> {
        serde_json::from_slice(bytes).ok()
    }
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
                tool("v2", Change::Added, Severity::Critical, vec![RuleId::R13]),
            ],
            regraded: false,
        };
        assert_eq!(Changes::decode(&changes.encode()), Some(changes));
        let changes = Changes {
            regraded: true,
            ..Changes::default()
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
}
