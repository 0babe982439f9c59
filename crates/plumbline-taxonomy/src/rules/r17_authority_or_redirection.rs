//! R17 — HIGH — Authority claim or silent redirection (taxonomy-v3 4.17).
#![doc = include_str!("r17_authority_or_redirection.md")]

use super::{newly_present, Context, Found};
use crate::constructions::Kind;
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r17_authority_or_redirection.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    newly_present(
        ctx,
        Category::Authority,
        &[
            Kind::Ignored,
            Kind::Substitution,
            Kind::Notice,
            Kind::Replacement,
        ],
        RuleId::R17,
    )
}
