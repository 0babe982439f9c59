//! R15 — HIGH — Required call order (taxonomy-v3 4.15).
#![doc = include_str!("r15_required_call_order.md")]

use std::collections::BTreeMap;

use super::references::{by_sentence, shown_sentence, sibling_and_code_names, Reference};
use super::{Context, Found, StringChange};
use crate::evidence::{Detail, Evidence};
use crate::lexicon::{Category, Lexicon};
use crate::severity::RuleId;
use crate::text::lower;

pub const DOC: &str = include_str!("r15_required_call_order.md");

/// The first phrase of `sequencing-v3.txt`, in list order, present in
/// `lowered` (2.6).
fn sequencing_phrase<'l>(lexicon: &'l Lexicon, lowered: &str) -> Option<&'l str> {
    lexicon
        .scan(lowered)
        .into_iter()
        .find(|h| h.category == Category::Sequencing)
        .map(|h| lexicon.phrase(Category::Sequencing, h.index))
}

/// Each tool `text` names in a sentence that holds a sequencing phrase:
/// the phrase and the sentence, the first per tool.
fn orders(
    ctx: &Context<'_>,
    lexicon: &Lexicon,
    text: &str,
    refs: &[Reference],
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let own = sibling_and_code_names(ctx, text);
    let mut named: Vec<&Reference> = refs.iter().chain(&own).collect();
    named.sort_by_key(|r| r.span.start);
    for (sentence, inside) in by_sentence(text, named) {
        let Some(phrase) = sequencing_phrase(lexicon, &lower(&text[sentence.clone()])) else {
            continue;
        };
        let shown = shown_sentence(text, &sentence);
        for r in inside {
            out.entry(r.name.clone())
                .or_insert_with(|| (phrase.to_owned(), shown.clone()));
        }
    }
    out
}

fn field(ctx: &Context<'_>, lexicon: &Lexicon, f: &StringChange<'_>, found: &mut Found) {
    // Only a field that newly holds some sequencing phrase can newly
    // order a call; most fields hold none.
    let scan = f.new_scan(ctx.phrases);
    if !scan
        .lexicon
        .iter()
        .any(|h| h.category == Category::Sequencing)
    {
        return;
    }
    let new = orders(ctx, lexicon, f.new, f.new_refs(ctx));
    if new.is_empty() {
        return;
    }
    let old = orders(ctx, lexicon, f.old, f.old_refs(ctx));
    for (tool, (directive, sentence)) in new {
        if old.contains_key(&tool) {
            continue;
        }
        found.push(Evidence {
            rule: RuleId::R15,
            pointer: f.pointer(),
            detail: Detail::ToolInstruction {
                tool,
                directive,
                sentence,
            },
        });
    }
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    let Some(lexicon) = ctx.lexicon() else {
        return found;
    };
    for f in ctx.changed_fields() {
        field(ctx, lexicon, f, &mut found);
    }
    found
}
