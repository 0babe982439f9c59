//! The evaluation algorithm of spec 5.

use crate::diff::diff;
use crate::evidence::{Classification, Evidence};
use crate::json::Value;
use crate::phrases::PhraseList;
use crate::rules::{self, Context};
use crate::severity::{RuleId, Severity};

/// The taxonomy-v1 classifier, holding its phrase list.
///
/// Pure and synchronous: it reads nothing but its arguments and keeps no
/// state between calls, so one classifier can be shared across threads.
#[derive(Debug, Clone)]
pub struct Classifier {
    phrases: PhraseList,
}

impl Default for Classifier {
    fn default() -> Self {
        Classifier::new(PhraseList::imperatives_v1())
    }
}

impl Classifier {
    /// A classifier with the given R02 phrase list.
    pub fn new(phrases: PhraseList) -> Self {
        Classifier { phrases }
    }

    pub fn phrases(&self) -> &PhraseList {
        &self.phrases
    }

    /// Classifies the change from `old` to `new`, two versions of one tool.
    pub fn classify(&self, old: &Value, new: &Value) -> Classification {
        let changes = diff(old, new);
        if changes.is_empty() {
            // Equal tools: nothing is newly present, no schema or
            // annotation moved, and R09 needs a non-empty diff.
            return Classification {
                severity: Severity::None,
                rules: Vec::new(),
                evidence: Vec::new(),
            };
        }
        let ctx = Context::new(old, new, &changes, &self.phrases);
        let mut evidence: Vec<Evidence> = Vec::new();
        let independent: [fn(&Context<'_>) -> Vec<Evidence>; 7] = [
            rules::r01_invisible_payload::check,
            rules::r02_imperative_instruction::check,
            rules::r03_new_endpoint::check,
            rules::r04_new_required_property::check,
            rules::r05_cross_tool_reference::check,
            rules::r06_new_optional_property::check,
            rules::r07_annotation_relaxed::check,
        ];
        for check in independent {
            evidence.extend(check(&ctx));
        }
        // R08 and R09 are gated on the absence of every higher rule.
        if evidence.is_empty() {
            evidence = rules::r08_description_rewrite::check(&ctx);
        }
        if evidence.is_empty() {
            evidence = rules::r09_cosmetic_only::check(&ctx);
        }
        let mut fired: Vec<RuleId> = evidence.iter().map(|e| e.rule).collect();
        fired.dedup(); // evidence is grouped by rule, in rule order
        let severity = fired
            .iter()
            .map(|r| r.severity())
            .max()
            .unwrap_or(Severity::None);
        Classification {
            severity,
            rules: fired,
            evidence,
        }
    }
}
