//! R02 — CRITICAL — New imperative instruction to the model (spec 4.2, C8, C12).
#![doc = include_str!("r02_imperative_instruction.md")]

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r02_imperative_instruction.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let Some(phrases) = ctx.v1_phrases() else {
        // taxonomy-v2: imperatives-v2.txt, bounded by words.
        return super::newly_present(
            ctx,
            Category::Imperative,
            &[
                crate::constructions::Kind::Override,
                crate::constructions::Kind::Role,
            ],
            RuleId::R02,
        );
    };
    let mut found = Vec::new();
    if phrases.is_empty() {
        return found;
    }
    for f in ctx.changed_fields() {
        let new = f.new_scan(ctx.phrases);
        if new.hits.imperative.is_empty() {
            continue;
        }
        let in_old = &f.old_scan(ctx.phrases).hits.imperative;
        for &(index, at) in &new.hits.imperative {
            if in_old.iter().any(|(i, _)| *i == index) {
                continue;
            }
            let phrase = phrases.phrase(index);
            let len = phrases.lowered(index).chars().count();
            found.push(Evidence {
                rule: RuleId::R02,
                pointer: f.pointer(),
                detail: Detail::Phrase {
                    phrase: phrase.to_owned(),
                    text: original_span(f.new, &new.lowered, at, len),
                },
            });
        }
    }
    found
}

/// The text of `original` that lowercases to the `chars` characters of
/// `lowered` starting at byte `at`. C8 lowercasing maps one code point to
/// one, so character positions carry over even where byte lengths differ.
pub(crate) fn original_span(original: &str, lowered: &str, at: usize, chars: usize) -> String {
    let skip = lowered[..at].chars().count();
    original.chars().skip(skip).take(chars).collect()
}
