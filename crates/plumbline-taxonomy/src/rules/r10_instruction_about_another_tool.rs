//! R10 — CRITICAL — Instruction about another tool (taxonomy-v2 4.10).
#![doc = include_str!("r10_instruction_about_another_tool.md")]

use std::collections::BTreeMap;

use super::references::{references, sentences, Reference};
use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::lexicon::{Category, Lexicon};
use crate::severity::RuleId;
use crate::text::lower;

pub const DOC: &str = include_str!("r10_instruction_about_another_tool.md");

/// The longest sentence kept as evidence, in characters.
const SENTENCE_CHARS: usize = 200;

/// Each tool `text` instructs the model about: a sentence names it (2.7)
/// and holds a directive (`directives-v2.txt`). The first such sentence
/// and directive per tool.
fn instructions(
    ctx: &Context<'_>,
    lexicon: &Lexicon,
    text: &str,
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let refs: Vec<Reference> = references(ctx, text);
    if refs.is_empty() {
        return out;
    }
    for sentence in sentences(text) {
        let named: Vec<&Reference> = refs
            .iter()
            .filter(|r| sentence.start <= r.span.start && r.span.end <= sentence.end)
            .collect();
        if named.is_empty() {
            continue;
        }
        let lowered = lower(&text[sentence.clone()]);
        let Some(hit) = lexicon
            .scan(&lowered)
            .into_iter()
            .find(|h| h.category == Category::Directive)
        else {
            continue;
        };
        let directive = lexicon.phrase(Category::Directive, hit.index).to_owned();
        let shown: String = text[sentence.clone()]
            .trim()
            .chars()
            .take(SENTENCE_CHARS)
            .collect();
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
    for f in ctx.changed_fields() {
        let new = instructions(ctx, lexicon, f.new);
        if new.is_empty() {
            continue;
        }
        let old = instructions(ctx, lexicon, f.old);
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
