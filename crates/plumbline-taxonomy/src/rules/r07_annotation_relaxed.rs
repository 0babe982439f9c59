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

/// taxonomy-v2: each watched key's MCP default, what a client assumes
/// when the key is absent (MCP `ToolAnnotations`).
pub const DEFAULTS: [(&str, bool); 4] = [
    ("readOnlyHint", false),
    ("destructiveHint", true),
    ("idempotentHint", false),
    ("openWorldHint", true),
];

/// The value a client acts on: the boolean when the key holds one, else
/// the default.
fn effective<'a>(
    annotations: Option<&'a crate::json::Object>,
    key: &str,
    default: bool,
) -> (Option<&'a Value>, bool) {
    let raw = annotations.and_then(|a| a.get(key));
    let value = match raw {
        Some(Value::Bool(b)) => *b,
        _ => default,
    };
    (raw, value)
}

/// taxonomy-v2 (`docs/taxonomy-v2.md` 4.7): a watched key's *effective*
/// value moves toward capability, counting an absent key as its MCP
/// default. Adding a key with its default changes nothing; removing
/// `readOnlyHint: true` relaxes the tool. `destructiveHint` and
/// `idempotentHint` mean something only for a tool that is not read-only,
/// so they count only when the tool is not read-only before or after.
fn check_v2(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    let old = ctx.old.get("annotations").and_then(Value::as_object);
    let new = ctx.new.get("annotations").and_then(Value::as_object);
    // Equal annotations give equal effective values: nothing newly holds.
    if old == new {
        return found;
    }
    let (_, old_read_only) = effective(old, "readOnlyHint", false);
    let (_, new_read_only) = effective(new, "readOnlyHint", false);
    for ((key, capable), (_, default)) in WATCHED.iter().zip(DEFAULTS) {
        let (old_raw, old_value) = effective(old, key, default);
        let (new_raw, new_value) = effective(new, key, default);
        let write_only = matches!(*key, "destructiveHint" | "idempotentHint");
        if write_only && (old_read_only || new_read_only) {
            continue;
        }
        if old_value != *capable && new_value == *capable {
            found.push(Evidence {
                rule: RuleId::R07,
                pointer: format!("/annotations/{key}"),
                detail: Detail::EffectiveAnnotation {
                    key: (*key).to_owned(),
                    old: old_raw.cloned(),
                    new: new_raw.cloned(),
                    effective: new_value,
                },
            });
        }
    }
    found
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    if ctx.is_v2() {
        return check_v2(ctx);
    }
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
