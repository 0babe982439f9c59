//! R06 — MEDIUM — New optional inputSchema property (spec 4.6, C16).
#![doc = include_str!("r06_new_optional_property.md")]

use super::r04_new_required_property::{
    is_documented, is_required, newly_added_properties, required,
};
use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r06_new_optional_property.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let new_required = required(ctx.new);
    let mut found: Found = newly_added_properties(ctx.old, ctx.new)
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
        .collect();
    // taxonomy-v2: required inputs renamed (as many gained as disappeared)
    // change the call as much as a new optional input does.
    // A newly required input the schema describes is graded by what the
    // description says (the text rules read it), not as an unexplained
    // demand for data (R04).
    if ctx.is_v2() {
        let change = ctx.required_change();
        let rename = change.is_rename();
        for (pointer, name, _) in &change.gained {
            let detail = if rename {
                Detail::RenamedRequired {
                    name: name.clone(),
                    disappeared: change.disappeared,
                }
            } else if is_documented(ctx.new, name) {
                Detail::DocumentedRequired { name: name.clone() }
            } else if ctx.taxonomy == crate::taxonomy::Taxonomy::V3
                && super::r04_new_required_property::asks_for(ctx, name).is_none()
            {
                // taxonomy-v3 4.6: R04 fires only for names asking for
                // sensitive material; every other new input is R06's.
                Detail::PlainRequired { name: name.clone() }
            } else {
                continue;
            };
            found.push(Evidence {
                rule: RuleId::R06,
                pointer: pointer.clone(),
                detail,
            });
        }
    }
    found
}
