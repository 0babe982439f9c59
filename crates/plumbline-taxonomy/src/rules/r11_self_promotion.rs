//! R11 — HIGH — Self-promotion aimed at the model's choice (taxonomy-v2 4.11).
#![doc = include_str!("r11_self_promotion.md")]

use super::{newly_present_phrases, Context, Found};
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r11_self_promotion.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    newly_present_phrases(ctx, Category::Promotion, RuleId::R11)
}
