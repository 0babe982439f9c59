//! R10 — CRITICAL — Instruction about another tool (taxonomy-v2 4.10).
#![doc = include_str!("r10_instruction_about_another_tool.md")]

use std::collections::BTreeMap;

use super::references::{by_sentence, shown_sentence, Reference};
use super::{Context, Found};
use crate::evidence::{Detail, Evidence, ReferenceBy};
use crate::lexicon::{Category, Lexicon};
use crate::severity::RuleId;
use crate::text::lower;

pub const DOC: &str = include_str!("r10_instruction_about_another_tool.md");

/// Each tool `text` instructs the model about: a sentence names it (2.7)
/// and holds a directive (`directives-v2.txt`). The first such sentence
/// and directive per tool.
fn instructions<'r>(
    lexicon: &Lexicon,
    text: &str,
    refs: impl IntoIterator<Item = &'r Reference>,
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for (sentence, named) in by_sentence(text, refs) {
        let lowered = lower(&text[sentence.clone()]);
        let Some(hit) = lexicon.scan_directives(&lowered).into_iter().next() else {
            continue;
        };
        let directive = lexicon.phrase(Category::Directive, hit.index).to_owned();
        let shown = shown_sentence(text, &sentence);
        for r in named {
            out.entry(r.name.clone())
                .or_insert_with(|| (directive.clone(), shown.clone()));
        }
    }
    out
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    let Some(lexicon) = ctx.lexicon() else {
        return found;
    };
    // taxonomy-v3 (4.10): only a reference that certainly names another
    // tool (another server's, or an `mcp://` address); a word that only
    // looks like a tool may be a stale or misspelt sibling (R05, R15).
    let all = ctx.taxonomy < crate::taxonomy::Taxonomy::V3;
    let counted = |r: &&Reference| all || r.by != ReferenceBy::Form;
    for f in ctx.changed_fields() {
        let new = instructions(lexicon, f.new, f.new_refs(ctx).iter().filter(counted));
        if new.is_empty() {
            continue;
        }
        let old = instructions(lexicon, f.old, f.old_refs(ctx).iter().filter(counted));
        for (tool, (directive, sentence)) in new {
            if old.contains_key(&tool) {
                continue;
            }
            found.push(Evidence {
                rule: RuleId::R10,
                pointer: f.pointer(),
                detail: Detail::ToolInstruction {
                    tool,
                    directive,
                    sentence,
                },
            });
        }
    }
    found
}
