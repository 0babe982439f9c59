//! R09 — NONE — Cosmetic-only change (spec 4.9, C19).
#![doc = include_str!("r09_cosmetic_only.md")]

use super::{Context, Found};
use crate::diff::Change;
use crate::evidence::{CosmeticReason, Detail, Evidence};
use crate::fields::is_human_readable;
use crate::json::Value;
use crate::severity::RuleId;
use crate::text::{alnum_fold, word_distance};

pub const DOC: &str = include_str!("r09_cosmetic_only.md");

fn text_or_empty(v: Option<&Value>) -> Option<&str> {
    match v {
        None => Some(""),
        Some(Value::String(s)) => Some(s),
        Some(_) => None,
    }
}

/// Why `change` is cosmetic, or `None` when it is not (C19).
fn cosmetic(ctx: &Context<'_>, change: &Change<'_>) -> Option<Detail> {
    if !is_human_readable(&change.path) {
        return None;
    }
    // A string on every side where the path exists; a missing side is "".
    let old = text_or_empty(change.old)?;
    let new = text_or_empty(change.new)?;
    // `/description` on both sides: the distance R08 already measured.
    let description = matches!(
        change.path.as_slice(),
        [crate::fields::Seg::Key("description")]
    ) && change.old.is_some()
        && change.new.is_some();
    let d = if description {
        ctx.description_distance(old, new)
    } else {
        word_distance(old, new)
    };
    if d.below_one_fifth() {
        return Some(Detail::Cosmetic {
            reason: CosmeticReason::SmallWordDistance,
            edits: d.edits,
            denom: d.denom,
        });
    }
    (alnum_fold(old) == alnum_fold(new)).then_some(Detail::Cosmetic {
        reason: CosmeticReason::AlnumFoldEqual,
        edits: None,
        denom: d.denom,
    })
}

/// Called only when none of R01–R08 fired (spec 5).
pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::with_capacity(ctx.changes.len());
    for change in ctx.changes {
        let Some(detail) = cosmetic(ctx, change) else {
            return Vec::new();
        };
        found.push(Evidence {
            rule: RuleId::R09,
            pointer: change.pointer(),
            detail,
        });
    }
    found
}
