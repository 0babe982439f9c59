//! R20 — HIGH — Text in a field MCP does not define (taxonomy-v3 4.20).
#![doc = include_str!("r20_undefined_field_text.md")]

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::fields::Seg;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r20_undefined_field_text.md");

/// The members of a tool MCP defines (2025-11-25 schema).
pub const TOOL_MEMBERS: [&str; 9] = [
    "name",
    "title",
    "description",
    "inputSchema",
    "outputSchema",
    "annotations",
    "icons",
    "execution",
    "_meta",
];

/// The members of `annotations` MCP defines.
pub const ANNOTATION_MEMBERS: [&str; 5] = [
    "title",
    "readOnlyHint",
    "destructiveHint",
    "idempotentHint",
    "openWorldHint",
];

/// Whether a string at `path` lies outside every member MCP defines: under
/// an undefined top-level member, or an undefined member of `annotations`.
pub(crate) fn is_undefined(path: &[Seg<'_>]) -> bool {
    match path {
        [Seg::Key("annotations"), Seg::Key(k), ..] => !ANNOTATION_MEMBERS.contains(k),
        [Seg::Key(k), ..] => !TOOL_MEMBERS.contains(k),
        _ => false,
    }
}

/// The fewest words (C10) a text needs to carry a message: a one- or
/// two-word label (`"category": "navigation"`) says nothing to the model.
pub const MIN_WORDS: usize = 3;

/// The longest text kept as evidence, in characters.
const TEXT_CHARS: usize = 120;

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    ctx.changed_strings
        .iter()
        .filter(|s| is_undefined(&s.path) && crate::text::words(s.new).nth(MIN_WORDS - 1).is_some())
        .map(|s| Evidence {
            rule: RuleId::R20,
            pointer: s.pointer(),
            detail: Detail::Phrase {
                phrase: "text outside the fields MCP defines".to_owned(),
                text: s.new.chars().take(TEXT_CHARS).collect(),
            },
        })
        .collect()
}
