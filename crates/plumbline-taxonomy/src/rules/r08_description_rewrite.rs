//! R08 — LOW — Large description rewrite without higher signals (spec 4.8, C18).
#![doc = include_str!("r08_description_rewrite.md")]

use super::{Context, Found};
use crate::evidence::{Detail, Evidence, R08_MEASURED_WORDS};
use crate::json::Value;
use crate::severity::RuleId;
use crate::text::WordDistance;

pub const DOC: &str = include_str!("r08_description_rewrite.md");

/// Called only when none of R01–R07 fired (spec 5).
pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let (Some(old), Some(new)) = (
        ctx.old.get("description").and_then(Value::as_str),
        ctx.new.get("description").and_then(Value::as_str),
    ) else {
        return Vec::new();
    };
    if old == new {
        return Vec::new();
    }
    let d = ctx.description_distance(old, new);
    if !d.at_least_one_fifth() {
        return Vec::new();
    }
    vec![Evidence {
        rule: RuleId::R08,
        pointer: "/description".to_owned(),
        detail: Detail::DescriptionRewrite {
            old_words: d.old_words,
            new_words: d.new_words,
            min_edits: WordDistance::max_small_edits(d.denom) + 1,
            edits: ctx.description_edits(old, new, R08_MEASURED_WORDS),
            unmeasured: d.unmeasured,
        },
    }]
}
