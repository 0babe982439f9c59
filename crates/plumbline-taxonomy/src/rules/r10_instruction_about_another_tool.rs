//! R10 — CRITICAL — Instruction about another tool (taxonomy-v2 4.10).
#![doc = include_str!("r10_instruction_about_another_tool.md")]

use std::collections::BTreeMap;

use super::references::{sentence_around, Reference};
use super::{Context, Found};
use crate::evidence::{Detail, Evidence, ReferenceBy};
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
    lexicon: &Lexicon,
    text: &str,
    refs: &[Reference],
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    if refs.is_empty() {
        return out;
    }
    // The sentences that name a tool, in text order, each once.
    let mut named_sentences: Vec<(std::ops::Range<usize>, Vec<&Reference>)> = Vec::new();
    for r in refs {
        let sentence = sentence_around(text, &r.span);
        match named_sentences.last_mut() {
            Some((last, named)) if *last == sentence => named.push(r),
            _ => named_sentences.push((sentence, vec![r])),
        }
    }
    for (sentence, named) in named_sentences {
        let lowered = lower(&text[sentence.clone()]);
        let Some(hit) = lexicon.scan_directives(&lowered).into_iter().next() else {
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
    // taxonomy-v3 (4.10): only a reference that certainly names another
    // tool (another server's, or an `mcp://` address); a word that only
    // looks like a tool may be a stale or misspelt sibling (R05, R15).
    let certain = |refs: &[Reference]| -> Vec<Reference> {
        refs.iter()
            .filter(|r| ctx.taxonomy < crate::taxonomy::Taxonomy::V3 || r.by != ReferenceBy::Form)
            .cloned()
            .collect()
    };
    for f in ctx.changed_fields() {
        let new = instructions(lexicon, f.new, &certain(f.new_refs(ctx)));
        if new.is_empty() {
            continue;
        }
        let old = instructions(lexicon, f.old, &certain(f.old_refs(ctx)));
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
