//! R18 — HIGH — Sensitive capability described (taxonomy-v3 4.18).
#![doc = include_str!("r18_sensitive_capability.md")]

use super::{newly_present, Context, Found};
use crate::constructions::Kind;
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r18_sensitive_capability.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    newly_present(
        ctx,
        Category::Sensitive,
        &[Kind::Outbound, Kind::Code],
        RuleId::R18,
    )
}
