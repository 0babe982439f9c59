//! R14 — HIGH — Wording aimed at the model (taxonomy-v3 4.14).
#![doc = include_str!("r14_wording_aimed_at_the_model.md")]

use super::{newly_present, Context, Found};
use crate::constructions::Kind;
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r14_wording_aimed_at_the_model.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    newly_present(ctx, Category::Cue, &[Kind::Ask], RuleId::R14)
}
