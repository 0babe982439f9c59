//! R15 — HIGH — Required call order (taxonomy-v3 4.15).
#![doc = include_str!("r15_required_call_order.md")]

use std::collections::BTreeMap;

use super::references::{by_sentence, shown_sentence, sibling_and_code_names, Reference};
use super::{Context, Found, StringChange};
use crate::constructions::{first_sentence, Kind};
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

/// Each tool `text` names in a sentence that holds a sequencing phrase or
/// (with `by_construction`) the order construction (2.14): the phrase, or
/// the construction's words, and the sentence, the first per tool.
fn orders(
    ctx: &Context<'_>,
    lexicon: &Lexicon,
    text: &str,
    refs: &[Reference],
    by_construction: bool,
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    let own = sibling_and_code_names(ctx, text);
    let mut named: Vec<&Reference> = refs.iter().chain(&own).collect();
    named.sort_by_key(|r| r.span.start);
    for (sentence, inside) in by_sentence(text, named) {
        let shown = shown_sentence(text, &sentence);
        if let Some(phrase) = sequencing_phrase(lexicon, &lower(&text[sentence.clone()])) {
            for r in inside {
                out.entry(r.name.clone())
                    .or_insert_with(|| (phrase.to_owned(), shown.clone()));
            }
            continue;
        }
        if !by_construction {
            continue;
        }
        // The order construction (2.14), with a call word next to the
        // tool's name.
        let lowered = lower(&text[sentence.clone()]);
        let constructions = lexicon.constructions();
        let words = constructions.sentence(&lowered);
        let Some(how) = constructions.holds(Kind::Order, &words, ctx.input_names()) else {
            continue;
        };
        let local = |r: &Reference| r.span.start - sentence.start..r.span.end - sentence.start;
        for r in inside {
            if let Some(call) = constructions.call_near(&text[sentence.clone()], local(r)) {
                out.entry(r.name.clone())
                    .or_insert_with(|| (format!("{how} + {call}"), shown.clone()));
            }
        }
    }
    out
}

fn field(ctx: &Context<'_>, lexicon: &Lexicon, f: &StringChange<'_>, found: &mut Found) {
    // Only a field that holds some sequencing phrase, or an anchor of the
    // order construction, can newly order a call; most fields hold none.
    let scan = f.new_scan(ctx.phrases);
    let phrase = scan
        .lexicon
        .iter()
        .any(|h| h.category == Category::Sequencing);
    let constructions = lexicon.constructions();
    let anchors: Vec<&str> = scan
        .lexicon
        .iter()
        .filter(|h| h.category == Category::Anchor)
        .map(|h| lexicon.lowered(h.category, h.index))
        .filter(|a| constructions.anchor_kind(a) == Some(Kind::Order))
        .collect();
    // The construction needs an anchor and an order word in one sentence:
    // looked at around the anchors before any tool name is looked for.
    let by_construction = !anchors.is_empty()
        && first_sentence(
            constructions,
            Kind::Order,
            f.new,
            &scan.lowered,
            anchors,
            ctx.input_names(),
        )
        .is_some();
    if !phrase && !by_construction {
        return;
    }
    let new = orders(ctx, lexicon, f.new, f.new_refs(ctx), by_construction);
    if new.is_empty() {
        return;
    }
    // The old value is read for both, whatever it holds: a tool it
    // already ordered by either is not newly ordered.
    let old = orders(ctx, lexicon, f.old, f.old_refs(ctx), true);
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
