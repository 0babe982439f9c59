//! R15 — HIGH — Required call order (taxonomy-v3 4.15).
#![doc = include_str!("r15_required_call_order.md")]

use std::collections::BTreeMap;

use super::references::{
    by_sentence, shown_sentence, sibling_and_code_names, sibling_and_code_names_in, Reference,
};
use super::{Context, Found, StringChange};
use std::ops::Range;

use crate::constructions::{holding, sentences_around, Kind};
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
        sentence_orders(
            ctx,
            lexicon,
            text,
            &sentence,
            &inside,
            by_construction,
            &mut out,
        );
    }
    out
}

/// What one sentence orders of the tools it names (`inside`, in text
/// order): all of them with its first sequencing phrase, else (with
/// `by_construction`) those the order construction (2.14) calls by a
/// word next to their name. A tool already in `out` keeps its entry.
fn sentence_orders(
    ctx: &Context<'_>,
    lexicon: &Lexicon,
    text: &str,
    sentence: &Range<usize>,
    inside: &[&Reference],
    by_construction: bool,
    out: &mut BTreeMap<String, (String, String)>,
) {
    let shown = shown_sentence(text, sentence);
    let lowered = lower(&text[sentence.clone()]);
    if let Some(phrase) = sequencing_phrase(lexicon, &lowered) {
        for r in inside {
            out.entry(r.name.clone())
                .or_insert_with(|| (phrase.to_owned(), shown.clone()));
        }
        return;
    }
    if !by_construction {
        return;
    }
    let constructions = lexicon.constructions();
    let words = constructions.sentence(&lowered);
    if let Some(how) = constructions.holds(Kind::Order, &words, ctx.input_names()) {
        called_tools(lexicon, text, sentence, inside, &how, &shown, out);
    }
}

/// The tools of `inside` (named in `sentence`, which holds the order
/// construction as `how` says) with a call word next to their name.
fn called_tools(
    lexicon: &Lexicon,
    text: &str,
    sentence: &Range<usize>,
    inside: &[&Reference],
    how: &str,
    shown: &str,
    out: &mut BTreeMap<String, (String, String)>,
) {
    let local = |r: &Reference| r.span.start - sentence.start..r.span.end - sentence.start;
    for r in inside {
        let near = lexicon
            .constructions()
            .call_near(&text[sentence.clone()], local(r));
        if let Some(call) = near {
            out.entry(r.name.clone())
                .or_insert_with(|| (format!("{how} + {call}"), shown.to_owned()));
        }
    }
}

/// [`orders`] of a field that holds no sequencing phrase: only the order
/// construction can order a call, so only the sentences holding it
/// (`holding`) are searched for tool names.
fn orders_in(
    ctx: &Context<'_>,
    lexicon: &Lexicon,
    text: &str,
    refs: &[Reference],
    candidates: &[Range<usize>],
    by_construction: bool,
) -> BTreeMap<String, (String, String)> {
    let mut out = BTreeMap::new();
    for sentence in candidates {
        let own = sibling_and_code_names_in(ctx, text, sentence.clone());
        let mut inside: Vec<&Reference> = refs
            .iter()
            .filter(|r| sentence.contains(&r.span.start))
            .chain(&own)
            .collect();
        if inside.is_empty() {
            continue;
        }
        inside.sort_by_key(|r| r.span.start);
        sentence_orders(
            ctx,
            lexicon,
            text,
            sentence,
            &inside,
            by_construction,
            &mut out,
        );
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
        .filter(|a| constructions.anchors(a, Kind::Order))
        .collect();
    // Only a sentence that holds a sequencing phrase or the order
    // construction can order a call: tool names are looked for in those
    // sentences only, in text order (the first per tool wins).
    let mut candidates: Vec<Range<usize>> = Vec::new();
    if phrase {
        let present = scan
            .lexicon
            .iter()
            .filter(|h| h.category == Category::Sequencing)
            .map(|h| lexicon.lowered(h.category, h.index));
        candidates.extend(sentences_around(f.new, &scan.lowered, present));
    }
    let by_construction = !anchors.is_empty();
    if by_construction {
        let inputs = ctx.input_names();
        let order = holding(
            constructions,
            Kind::Order,
            f.new,
            &scan.lowered,
            anchors,
            inputs,
        );
        candidates.extend(order.map(|(s, _)| s));
    }
    if candidates.is_empty() {
        return;
    }
    candidates.sort_by_key(|s| s.start);
    candidates.dedup();
    let new = orders_in(
        ctx,
        lexicon,
        f.new,
        f.new_refs(ctx),
        &candidates,
        by_construction,
    );
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
