//! The nine rules of taxonomy-v1, one module each, with each rule's
//! documentation in a Markdown file beside its code (the text
//! `plumbline explain` prints).

use std::collections::HashMap;

use crate::diff::Change;
use crate::evidence::Evidence;
use crate::fields::human_readable_fields;
use crate::json::Value;
use crate::phrases::PhraseList;
use crate::severity::RuleId;

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

/// A human-readable field of the new tool whose text differs from the
/// value at the same pointer in the old tool. `old` is empty when the old
/// value is missing or not a string: then everything in `new` is newly
/// present (C12). Fields whose text did not change cannot make anything
/// newly present, so the per-field rules never look at them.
pub(crate) struct FieldChange<'a> {
    pub pointer: String,
    pub old: &'a str,
    pub new: &'a str,
}

/// Everything a rule may consult, computed once per classification.
pub(crate) struct Context<'a> {
    pub old: &'a Value,
    pub new: &'a Value,
    pub changes: &'a [Change<'a>],
    pub phrases: &'a PhraseList,
    pub changed_fields: Vec<FieldChange<'a>>,
}

impl<'a> Context<'a> {
    pub fn new(
        old: &'a Value,
        new: &'a Value,
        changes: &'a [Change<'a>],
        phrases: &'a PhraseList,
    ) -> Self {
        let changed_fields = if changes.is_empty() {
            Vec::new()
        } else {
            let old_fields: HashMap<String, &str> = human_readable_fields(old).into_iter().collect();
            human_readable_fields(new)
                .into_iter()
                .filter_map(|(pointer, new_text)| {
                    let old_text = old_fields.get(&pointer).copied().unwrap_or("");
                    (old_text != new_text).then_some(FieldChange {
                        pointer,
                        old: old_text,
                        new: new_text,
                    })
                })
                .collect()
        };
        Context {
            old,
            new,
            changes,
            phrases,
            changed_fields,
        }
    }
}

/// Evidence collected for one rule.
pub(crate) type Found = Vec<Evidence>;
