//! R12 — HIGH — Claim to change the user's inputs (taxonomy-v2 4.12).
#![doc = include_str!("r12_input_override.md")]

use super::{newly_present_phrases, Context, Found};
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r12_input_override.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    newly_present_phrases(ctx, Category::Override, RuleId::R12)
}
