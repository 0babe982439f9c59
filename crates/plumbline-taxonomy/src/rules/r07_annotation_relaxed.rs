//! R07 — MEDIUM — Annotation change toward greater capability (spec 4.7, C17).
#![doc = include_str!("r07_annotation_relaxed.md")]

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::json::Value;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r07_annotation_relaxed.md");

/// The watched keys and the value that means greater capability.
pub const WATCHED: [(&str, bool); 4] = [
    ("readOnlyHint", false),
    ("destructiveHint", true),
    ("idempotentHint", false),
    ("openWorldHint", true),
];

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    let Some(new) = ctx.new.get("annotations").and_then(Value::as_object) else {
        return found;
    };
    let old = ctx.old.get("annotations").and_then(Value::as_object);
    for (key, capable) in WATCHED {
        if new.get(key) != Some(&Value::Bool(capable)) {
            continue;
        }
        let old_value = old.and_then(|o| o.get(key));
        // Fires from the opposite boolean or from absence (of the key, or
        // of an object `annotations`); a non-boolean old value does not.
        let fires = match old_value {
            None => true,
            Some(Value::Bool(b)) => *b != capable,
            Some(_) => false,
        };
        if fires {
            found.push(Evidence {
                rule: RuleId::R07,
                pointer: format!("/annotations/{key}"),
                detail: Detail::Annotation {
                    key: key.to_owned(),
                    old: old_value.cloned(),
                    new: capable,
                },
            });
        }
    }
    found
}
