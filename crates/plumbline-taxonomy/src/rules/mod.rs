//! The nine rules of taxonomy-v1, one module each, with each rule's
//! documentation in a Markdown file beside its code (the text
//! `plumbline explain` prints).

use crate::diff::Change;
use crate::evidence::Evidence;
use std::cell::OnceCell;

use crate::fields::{for_each_string_at, is_human_readable, pointer_of, Seg};
use crate::json::Value;
use crate::phrases::{PhraseHits, PhraseList};
use crate::severity::RuleId;
use crate::text::lower;

pub mod r01_invisible_payload;
pub mod r02_imperative_instruction;
pub mod r03_new_endpoint;
pub mod r04_new_required_property;
pub mod r05_cross_tool_reference;
pub mod r06_new_optional_property;
pub mod r07_annotation_relaxed;
pub mod r08_description_rewrite;
pub mod r09_cosmetic_only;

/// The documentation of `rule`.
pub fn documentation(rule: RuleId) -> &'static str {
    match rule {
        RuleId::R01 => r01_invisible_payload::DOC,
        RuleId::R02 => r02_imperative_instruction::DOC,
        RuleId::R03 => r03_new_endpoint::DOC,
        RuleId::R04 => r04_new_required_property::DOC,
        RuleId::R05 => r05_cross_tool_reference::DOC,
        RuleId::R06 => r06_new_optional_property::DOC,
        RuleId::R07 => r07_annotation_relaxed::DOC,
        RuleId::R08 => r08_description_rewrite::DOC,
        RuleId::R09 => r09_cosmetic_only::DOC,
    }
}

/// A string value of the new tool whose text differs from the value at
/// the same pointer in the old tool. `old` is empty when the old value is
/// missing or not a string: then everything in `new` is newly present
/// (C12). Strings that did not change cannot make anything newly present
/// in their field, so the rules never look at them.
pub(crate) struct StringChange<'a> {
    path: Vec<Seg<'a>>,
    pub old: &'a str,
    pub new: &'a str,
    /// Whether the field is human-readable (C6).
    pub human_readable: bool,
    old_scan: OnceCell<Scan>,
    new_scan: OnceCell<Scan>,
}

/// A text lowercased per C8 and the phrases found in it, computed once per
/// side for R02 and R05 together.
pub(crate) struct Scan {
    pub lowered: String,
    pub hits: PhraseHits,
}

impl StringChange<'_> {
    /// The field's RFC 6901 pointer, built only for evidence.
    pub fn pointer(&self) -> String {
        pointer_of(&self.path)
    }

    pub fn old_scan(&self, phrases: &PhraseList) -> &Scan {
        self.old_scan.get_or_init(|| Scan::of(self.old, phrases))
    }

    pub fn new_scan(&self, phrases: &PhraseList) -> &Scan {
        self.new_scan.get_or_init(|| Scan::of(self.new, phrases))
    }
}

impl Scan {
    fn of(text: &str, phrases: &PhraseList) -> Scan {
        let lowered = lower(text);
        let hits = phrases.scan(&lowered);
        Scan { lowered, hits }
    }
}

/// Everything a rule may consult, computed once per classification.
pub(crate) struct Context<'a> {
    pub old: &'a Value,
    pub new: &'a Value,
    pub changes: &'a [Change<'a>],
    pub phrases: &'a PhraseList,
    /// Every changed string value of the new tool, in document order.
    pub changed_strings: Vec<StringChange<'a>>,
}

impl<'a> Context<'a> {
    pub fn new(
        old: &'a Value,
        new: &'a Value,
        changes: &'a [Change<'a>],
        phrases: &'a PhraseList,
    ) -> Self {
        // A string of the new tool differs from the old value at its path
        // exactly when it lies at or under an Added or Modified change: the
        // diff descends wherever both sides are objects or both arrays, so
        // every other string is equal to its old counterpart.
        let mut changed_strings = Vec::new();
        for change in changes {
            let Some(new_value) = change.new else {
                continue;
            };
            let depth = change.path.len();
            for_each_string_at(new_value, change.path.clone(), &mut |path, new_text| {
                // Only the change's own value has an old counterpart; below
                // it the old side is missing or of another type.
                let old_text = if path.len() == depth {
                    change.old.and_then(Value::as_str)
                } else {
                    None
                };
                if old_text == Some(new_text) {
                    return;
                }
                changed_strings.push(StringChange {
                    path: path.to_vec(),
                    old: old_text.unwrap_or(""),
                    new: new_text,
                    human_readable: is_human_readable(path),
                    old_scan: OnceCell::new(),
                    new_scan: OnceCell::new(),
                });
            });
        }
        Context {
            old,
            new,
            changes,
            phrases,
            changed_strings,
        }
    }

    /// The changed human-readable fields (C12's per-field comparison).
    pub fn changed_fields(&self) -> impl Iterator<Item = &StringChange<'a>> {
        self.changed_strings.iter().filter(|s| s.human_readable)
    }
}

/// Evidence collected for one rule.
pub(crate) type Found = Vec<Evidence>;
