//! R06 — MEDIUM — New optional inputSchema property (spec 4.6, C16).
#![doc = include_str!("r06_new_optional_property.md")]

use super::r04_new_required_property::{is_required, newly_added_properties, required};
use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r06_new_optional_property.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let new_required = required(ctx.new);
    newly_added_properties(ctx.old, ctx.new)
        .into_iter()
        .filter(|name| !is_required(new_required, name))
        .map(|name| {
            let mut pointer = String::from("/inputSchema/properties");
            crate::pointer::push_token(&mut pointer, name);
            Evidence {
                rule: RuleId::R06,
                pointer,
                detail: Detail::OptionalProperty {
                    name: name.to_owned(),
                },
            }
        })
        .collect()
}
