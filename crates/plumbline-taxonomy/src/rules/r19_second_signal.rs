//! R19 — CRITICAL — Instruction with a second signal (taxonomy-v3 4.19).
#![doc = include_str!("r19_second_signal.md")]

use super::{Context, Found, StringChange};
use crate::evidence::{Detail, Evidence, ReferenceBy};
use crate::lexicon::{Category, Hit, Lexicon};
use crate::patterns::{r03_hits_v3, PatternKind};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r19_second_signal.md");

/// The phrases of `category` in the field's new value and not in its old
/// one (by phrase).
fn newly<'h>(
    lexicon: &'h Lexicon,
    f: &'h StringChange<'_>,
    new: &'h [Hit],
    category: Category,
) -> impl Iterator<Item = &'h Hit> {
    new.iter()
        .filter(move |h| h.category == category && !f.old_holds(lexicon, category, h.index))
}

/// The field's second signal, in this order: a new endpoint, a new
/// reference to another tool, a new sensitive phrase.
fn second_signal(
    ctx: &Context<'_>,
    lexicon: &Lexicon,
    f: &StringChange<'_>,
) -> Option<(&'static str, String)> {
    let mut new = Vec::new();
    r03_hits_v3(f.new, &mut new);
    if !new.is_empty() {
        let mut old = Vec::new();
        r03_hits_v3(f.old, &mut old);
        let old: Vec<&str> = old.iter().map(|h| &f.old[h.span.clone()]).collect();
        // A destination: a URL, domain, address or home path; an absolute
        // path in an honest how-to is as often documentation.
        let destination = |h: &&crate::patterns::Hit| {
            !matches!(h.kind, PatternKind::UnixPath | PatternKind::WindowsPath)
        };
        if let Some(h) = new
            .iter()
            .filter(destination)
            .find(|h| !old.contains(&&f.new[h.span.clone()]))
        {
            return Some(("endpoint", f.new[h.span.clone()].to_owned()));
        }
    }
    let old_refs = f.old_refs(ctx);
    if let Some(r) = f
        .new_refs(ctx)
        .iter()
        .filter(|r| r.by != ReferenceBy::Form)
        .find(|r| !old_refs.iter().any(|o| o.name == r.name))
    {
        return Some(("tool", r.name.clone()));
    }
    let new = &f.new_scan(ctx.phrases).lexicon;
    newly(lexicon, f, new, Category::Sensitive).next().map(|h| {
        (
            "sensitive",
            lexicon.phrase(Category::Sensitive, h.index).to_owned(),
        )
    })
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    let Some(lexicon) = ctx.lexicon() else {
        return found;
    };
    for f in ctx.changed_fields() {
        let new = &f.new_scan(ctx.phrases).lexicon;
        if !new.iter().any(|h| h.category == Category::Cue) {
            continue;
        }
        let Some(cue) = newly(lexicon, f, new, Category::Cue).next() else {
            continue;
        };
        let Some((signal, text)) = second_signal(ctx, lexicon, f) else {
            continue;
        };
        found.push(Evidence {
            rule: RuleId::R19,
            pointer: f.pointer(),
            detail: Detail::SecondSignal {
                cue: lexicon.phrase(Category::Cue, cue.index).to_owned(),
                signal,
                text,
            },
        });
    }
    found
}
