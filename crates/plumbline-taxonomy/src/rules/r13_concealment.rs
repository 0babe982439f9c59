//! R13 — CRITICAL — Concealment from the user (taxonomy-v2 4.13).
#![doc = include_str!("r13_concealment.md")]

use super::{newly_present, Context, Found};
use crate::constructions::Kind;
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r13_concealment.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    newly_present(ctx, Category::Concealment, &[Kind::Unaware], RuleId::R13)
}
