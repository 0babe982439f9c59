//! The rules, one module each, with each rule's documentation in a
//! Markdown file beside its code (the text `plumbline explain` prints).
//! R01–R09 are taxonomy-v1's; where taxonomy-v2 revises one, the rule's
//! module holds both versions and its documentation says how they differ.
//! R10–R13 exist in taxonomy-v2 and v3; R14–R20 in taxonomy-v3 only, which
//! revises R01, R02, R03, R04, R06 and R11 again (`docs/taxonomy-v3.md`).

use crate::diff::Change;
use crate::evidence::Evidence;
use std::cell::OnceCell;

use crate::fields::{for_each_string_at, is_human_readable, pointer_of, Seg};
use crate::inventory::Inventory;
use crate::json::Value;
use crate::lexicon::{self, Category, Lexicon};
use crate::phrases::{PhraseHits, PhraseList};
use crate::severity::RuleId;
use crate::taxonomy::Taxonomy;
use crate::text::lower;

pub mod r01_invisible_payload;
pub mod r02_imperative_instruction;
pub mod r03_new_endpoint;
pub mod r04_new_required_property;
pub mod r05_cross_tool_reference;
pub mod r06_new_optional_property;
pub mod r07_annotation_relaxed;
pub mod r08_description_rewrite;
pub mod r09_cosmetic_only;
pub mod r10_instruction_about_another_tool;
pub mod r11_self_promotion;
pub mod r12_input_override;
pub mod r13_concealment;
pub mod r14_wording_aimed_at_the_model;
pub mod r15_required_call_order;
pub mod r16_duplicate_tool;
pub mod r17_authority_or_redirection;
pub mod r18_sensitive_capability;
pub mod r19_second_signal;
pub mod r20_undefined_field_text;
pub(crate) mod references;

/// The documentation of `rule`.
pub fn documentation(rule: RuleId) -> &'static str {
    match rule {
        RuleId::R01 => r01_invisible_payload::DOC,
        RuleId::R02 => r02_imperative_instruction::DOC,
        RuleId::R03 => r03_new_endpoint::DOC,
        RuleId::R04 => r04_new_required_property::DOC,
        RuleId::R05 => r05_cross_tool_reference::DOC,
        RuleId::R06 => r06_new_optional_property::DOC,
        RuleId::R07 => r07_annotation_relaxed::DOC,
        RuleId::R08 => r08_description_rewrite::DOC,
        RuleId::R09 => r09_cosmetic_only::DOC,
        RuleId::R10 => r10_instruction_about_another_tool::DOC,
        RuleId::R11 => r11_self_promotion::DOC,
        RuleId::R12 => r12_input_override::DOC,
        RuleId::R13 => r13_concealment::DOC,
        RuleId::R14 => r14_wording_aimed_at_the_model::DOC,
        RuleId::R15 => r15_required_call_order::DOC,
        RuleId::R16 => r16_duplicate_tool::DOC,
        RuleId::R17 => r17_authority_or_redirection::DOC,
        RuleId::R18 => r18_sensitive_capability::DOC,
        RuleId::R19 => r19_second_signal::DOC,
        RuleId::R20 => r20_undefined_field_text::DOC,
    }
}

/// A string value of the new tool whose text differs from the value at
/// the same pointer in the old tool. `old` is empty when the old value is
/// missing or not a string: then everything in `new` is newly present
/// (C12). Strings that did not change cannot make anything newly present
/// in their field, so the rules never look at them.
pub(crate) struct StringChange<'a> {
    pub path: Vec<Seg<'a>>,
    pub old: &'a str,
    pub new: &'a str,
    /// Whether the field is human-readable (C6).
    pub human_readable: bool,
    old_scan: OnceCell<Scan>,
    new_scan: OnceCell<Scan>,
    /// taxonomy-v2: the old value lowered, when only looked up in.
    old_lowered: OnceCell<String>,
    /// taxonomy-v2: the references of each side (R05 and R10 share them).
    old_refs: OnceCell<Vec<references::Reference>>,
    new_refs: OnceCell<Vec<references::Reference>>,
}

/// A text lowercased per C8 and the phrases found in it, computed once per
/// side for every phrase rule together: v1's list and R05's fixed phrases,
/// or v2's lexicon.
pub(crate) struct Scan {
    pub lowered: String,
    /// taxonomy-v1: R02's and R05's phrases.
    pub hits: PhraseHits,
    /// taxonomy-v2: every list's word-bounded phrases.
    pub lexicon: Vec<lexicon::Hit>,
}

impl StringChange<'_> {
    /// The field's RFC 6901 pointer, built only for evidence.
    pub fn pointer(&self) -> String {
        pointer_of(&self.path)
    }

    pub fn old_scan(&self, phrases: Phrases<'_>) -> &Scan {
        self.old_scan.get_or_init(|| Scan::of(self.old, phrases))
    }

    pub fn new_scan(&self, phrases: Phrases<'_>) -> &Scan {
        self.new_scan.get_or_init(|| Scan::of(self.new, phrases))
    }

    /// taxonomy-v2: whether the old value holds the phrase `index` of
    /// `category`, bounded by words. A field's new value holds few
    /// phrases; looking each up in the old value costs less than
    /// scanning the old value for all of them.
    pub fn old_holds(&self, lexicon: &Lexicon, category: Category, index: usize) -> bool {
        let old = match self.old_scan.get() {
            Some(scan) => &scan.lowered,
            None => self.old_lowered.get_or_init(|| lower(self.old)),
        };
        lexicon::occurs_bounded(old, lexicon.lowered(category, index))
    }

    /// The old value lowered per C8.
    pub fn old_lowered(&self) -> &str {
        match self.old_scan.get() {
            Some(scan) => &scan.lowered,
            None => self.old_lowered.get_or_init(|| lower(self.old)),
        }
    }

    pub fn old_refs(&self, ctx: &Context<'_>) -> &[references::Reference] {
        self.old_refs
            .get_or_init(|| references::references(ctx, self.old))
    }

    pub fn new_refs(&self, ctx: &Context<'_>) -> &[references::Reference] {
        self.new_refs
            .get_or_init(|| references::references(ctx, self.new))
    }
}

/// The phrases a taxonomy scans for.
#[derive(Clone, Copy)]
pub(crate) enum Phrases<'a> {
    V1(&'a PhraseList),
    V2(&'a Lexicon),
}

impl Scan {
    fn of(text: &str, phrases: Phrases<'_>) -> Scan {
        let lowered = lower(text);
        match phrases {
            Phrases::V1(list) => Scan {
                hits: list.scan(&lowered),
                lexicon: Vec::new(),
                lowered,
            },
            Phrases::V2(lexicon) => Scan {
                hits: PhraseHits::default(),
                lexicon: lexicon.scan(&lowered),
                lowered,
            },
        }
    }
}

/// Everything a rule may consult, computed once per classification.
pub(crate) struct Context<'a> {
    pub taxonomy: Taxonomy,
    pub old: &'a Value,
    pub new: &'a Value,
    pub changes: &'a [Change<'a>],
    pub phrases: Phrases<'a>,
    pub inventory: &'a Inventory,
    /// Every changed string value of the new tool, in document order.
    pub changed_strings: Vec<StringChange<'a>>,
    /// Grading an added tool (against `{}`): schema metadata is no
    /// endpoint under either taxonomy.
    pub added: bool,
    /// taxonomy-v2: what this tool calls itself (names and parameters),
    /// built on first use.
    own: OnceCell<references::OwnNames<'a>>,
    /// taxonomy-v2: the required inputs gained and lost (R04 and R06).
    required: OnceCell<r04_new_required_property::RequiredChange>,
    /// The words of `/description` and their distance (R08, and R09 when
    /// R08 did not fire), computed once; R08's evidence counts its edits
    /// from the same words.
    description_distance: OnceCell<(crate::text::WordPair, crate::text::WordDistance)>,
    /// taxonomy-v3: the new tool's input names, lowered.
    inputs: OnceCell<Vec<String>>,
    /// taxonomy-v3 draft 6: the new tool's name words (R18's erase).
    name_words: OnceCell<Vec<String>>,
}

impl<'a> Context<'a> {
    pub fn new(
        taxonomy: Taxonomy,
        old: &'a Value,
        new: &'a Value,
        changes: &'a [Change<'a>],
        phrases: Phrases<'a>,
        inventory: &'a Inventory,
    ) -> Self {
        // A string of the new tool differs from the old value at its path
        // exactly when it lies at or under an Added or Modified change: the
        // diff descends wherever both sides are objects or both arrays, so
        // every other string is equal to its old counterpart.
        // Most changes are one modified string: room for one each spares
        // regrowing (and copying) these large entries.
        // An added or replaced container brings all its strings: they are
        // counted first (a walk without allocation), so that the vector
        // is allocated once instead of regrown and copied.
        let strings: usize = changes
            .iter()
            .filter_map(|c| c.new)
            .map(|v| match v {
                Value::String(_) => 1,
                other => crate::fields::count_strings(other),
            })
            .sum();
        let mut changed_strings = Vec::with_capacity(strings);
        for change in changes {
            let Some(new_value) = change.new else {
                continue;
            };
            let depth = change.path.len();
            // Room to descend: a clone has no spare capacity, and the walk
            // would grow it at its first step down.
            let mut prefix = Vec::with_capacity(depth + 8);
            prefix.extend_from_slice(&change.path);
            for_each_string_at(new_value, prefix, &mut |path, new_text| {
                // Only the change's own value has an old counterpart; below
                // it the old side is missing or of another type.
                let old_text = if path.len() == depth {
                    change.old.and_then(Value::as_str)
                } else {
                    None
                };
                if old_text == Some(new_text) {
                    return;
                }
                changed_strings.push(StringChange {
                    path: path.to_vec(),
                    old: old_text.unwrap_or(""),
                    new: new_text,
                    human_readable: is_human_readable(path),
                    old_scan: OnceCell::new(),
                    new_scan: OnceCell::new(),
                    old_lowered: OnceCell::new(),
                    old_refs: OnceCell::new(),
                    new_refs: OnceCell::new(),
                });
            });
        }
        Context {
            taxonomy,
            old,
            new,
            changes,
            phrases,
            inventory,
            changed_strings,
            added: false,
            own: OnceCell::new(),
            required: OnceCell::new(),
            description_distance: OnceCell::new(),
            inputs: OnceCell::new(),
            name_words: OnceCell::new(),
        }
    }

    /// The changed human-readable fields (C12's per-field comparison).
    pub fn changed_fields(&self) -> impl Iterator<Item = &StringChange<'a>> {
        self.changed_strings.iter().filter(|s| s.human_readable)
    }

    /// taxonomy-v2 or later: v2's revisions of v1's rules apply (v3
    /// changes some of them again, and says so where it does).
    pub fn is_v2(&self) -> bool {
        self.taxonomy.since_v2()
    }

    /// v1's phrase list (R02 and R05 of taxonomy-v1 only).
    pub fn v1_phrases(&self) -> Option<&'a PhraseList> {
        match self.phrases {
            Phrases::V1(list) => Some(list),
            Phrases::V2(_) => None,
        }
    }

    /// v2's lexicon (taxonomy-v2 rules only).
    pub fn lexicon(&self) -> Option<&'a Lexicon> {
        match self.phrases {
            Phrases::V1(_) => None,
            Phrases::V2(lexicon) => Some(lexicon),
        }
    }

    /// The word distance between the old and new `/description`, both
    /// strings (the caller checked).
    pub fn description_distance(&self, old: &str, new: &str) -> crate::text::WordDistance {
        self.description_words(old, new).1
    }

    /// The exact word edit count of `/description` within `max_words`
    /// words (R08's evidence), from the words already interned.
    pub fn description_edits(&self, old: &str, new: &str, max_words: usize) -> Option<usize> {
        self.description_words(old, new).0.edits(max_words)
    }

    fn description_words(
        &self,
        old: &str,
        new: &str,
    ) -> &(crate::text::WordPair, crate::text::WordDistance) {
        self.description_distance.get_or_init(|| {
            let words = crate::text::WordPair::of(old, new);
            let distance = words.distance();
            (words, distance)
        })
    }

    pub fn required_change(&self) -> &r04_new_required_property::RequiredChange {
        self.required
            .get_or_init(|| r04_new_required_property::RequiredChange::of(self.old, self.new))
    }

    /// The names of the new tool's inputs (`inputSchema.properties`),
    /// lowered per C8 (taxonomy-v3 2.14, the "ignored" construction).
    pub fn input_names(&self) -> &[String] {
        self.inputs.get_or_init(|| {
            self.new
                .get("inputSchema")
                .and_then(|s| s.get("properties"))
                .and_then(Value::as_object)
                .map(|p| p.keys().map(lower).collect())
                .unwrap_or_default()
        })
    }

    /// The name words (4.4) of the new tool's name, each on its own (R18's
    /// erase construction, draft 6).
    pub fn name_word_list(&self) -> &[String] {
        self.name_words.get_or_init(|| {
            self.new
                .get("name")
                .and_then(Value::as_str)
                .map(|n| {
                    name_words(n)
                        .split(' ')
                        .filter(|w| !w.is_empty())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    pub fn own_names(&self) -> &references::OwnNames<'a> {
        self.own
            .get_or_init(|| references::OwnNames::of(self.old, self.new))
    }
}

/// taxonomy-v2's per-field phrase rule (R02, R11, R12, R13): `rule` fires
/// for each phrase of `category` that occurs (word-bounded, C8) in a
/// changed human-readable field's new value and not in its old value.
pub(crate) fn newly_present_phrases(ctx: &Context<'_>, category: Category, rule: RuleId) -> Found {
    newly_present_phrases_where(ctx, category, rule, |_, _| true)
}

/// [`newly_present_phrases`] of the occurrences `keep` keeps, given the
/// field's lowered new value and where the phrase starts in it.
pub(crate) fn newly_present_phrases_where(
    ctx: &Context<'_>,
    category: Category,
    rule: RuleId,
    keep: impl Fn(&str, usize) -> bool,
) -> Found {
    let mut found = Vec::new();
    let Some(lexicon) = ctx.lexicon() else {
        return found;
    };
    for f in ctx.changed_fields() {
        let new = f.new_scan(ctx.phrases);
        if !new.lexicon.iter().any(|h| h.category == category) {
            continue;
        }
        for h in new.lexicon.iter().filter(|h| h.category == category) {
            // The old value holds the phrase where an occurrence it keeps
            // does (R18: a forbidden one there does not count either).
            let old = f.old_lowered();
            let phrase = lexicon.lowered(category, h.index);
            if lexicon::occurs_bounded_where(old, phrase, |at| keep(old, at)) {
                continue;
            }
            if !keep(&new.lowered, h.start) {
                continue;
            }
            found.push(Evidence {
                rule,
                pointer: f.pointer(),
                detail: crate::evidence::Detail::Phrase {
                    phrase: lexicon.phrase(category, h.index).to_owned(),
                    text: r02_imperative_instruction::original_span(
                        f.new,
                        &new.lowered,
                        h.start,
                        lexicon.lowered(category, h.index).chars().count(),
                    ),
                },
            });
        }
    }
    found
}

/// taxonomy-v3's phrase-and-construction rules (R02, R11, R13, R14, R17,
/// R18):
/// [`newly_present_phrases`] of `category`, then the constructions
/// `kinds` newly present (2.14).
pub(crate) fn newly_present(
    ctx: &Context<'_>,
    category: Category,
    kinds: &[crate::constructions::Kind],
    rule: RuleId,
) -> Found {
    let mut found = newly_present_phrases(ctx, category, rule);
    found.extend(newly_present_constructions(ctx, kinds, rule));
    found
}

/// taxonomy-v3's per-field construction rule (2.14): `rule` fires once
/// for each construction of `kinds` that some sentence of a changed
/// human-readable field's new value holds and no sentence of its old
/// value does. Only a field whose new value holds one of the
/// construction's anchor entries is read.
pub(crate) fn newly_present_constructions(
    ctx: &Context<'_>,
    kinds: &[crate::constructions::Kind],
    rule: RuleId,
) -> Found {
    use crate::constructions::holding;
    let mut found = Vec::new();
    let Some(lexicon) = ctx.lexicon() else {
        return found;
    };
    let constructions = lexicon.constructions();
    let wanted = kinds.iter().fold(0u32, |m, &k| m | (1 << k as u32));
    for f in ctx.changed_fields() {
        let scan = f.new_scan(ctx.phrases);
        // One lookup per anchor found: most fields anchor none of `kinds`.
        let anchored = scan
            .lexicon
            .iter()
            .filter(|h| h.category == Category::Anchor)
            .fold(0, |m, h| {
                m | constructions.anchored_kinds(lexicon.lowered(h.category, h.index))
            });
        if anchored & wanted == 0 {
            continue;
        }
        for &kind in kinds {
            if anchored & (1 << kind as u32) == 0 {
                continue;
            }
            let present: Vec<&str> = scan
                .lexicon
                .iter()
                .filter(|h| h.category == Category::Anchor)
                .map(|h| lexicon.lowered(h.category, h.index))
                .filter(|a| constructions.anchors(a, kind))
                .collect();
            if present.is_empty() {
                continue;
            }
            let inputs = if kind == crate::constructions::Kind::Erase {
                ctx.name_word_list()
            } else {
                ctx.input_names()
            };
            let Some((sentence, how)) =
                holding(constructions, kind, f.new, &scan.lowered, present, inputs).next()
            else {
                continue;
            };
            let old = f.old_lowered();
            let anchors = constructions.anchors_of(kind);
            if holding(constructions, kind, f.old, old, anchors, inputs)
                .next()
                .is_some()
            {
                continue;
            }
            found.push(Evidence {
                rule,
                pointer: f.pointer(),
                detail: crate::evidence::Detail::Construction {
                    construction: kind.title(),
                    words: how,
                    sentence: references::shown_sentence(f.new, &sentence),
                },
            });
        }
    }
    found
}

/// The words of a name, lowered and joined by single spaces: split at
/// every character that is not a letter or digit and before an upper-case
/// letter that follows a lower-case one (`content_from_reading_ssh_id_rsa`
/// → `content from reading ssh id rsa`, `llmModelName` → `llm model
/// name`), taxonomy-v3 4.4.
pub(crate) fn name_words(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    let mut prev: Option<char> = None;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            prev = None;
            continue;
        }
        if c.is_uppercase() && prev.is_some_and(char::is_lowercase) && !out.ends_with(' ') {
            out.push(' ');
        }
        out.push(crate::text::lower_char(c));
        prev = Some(c);
    }
    out.trim_end().to_owned()
}

/// Evidence collected for one rule.
pub(crate) type Found = Vec<Evidence>;

#[cfg(test)]
mod tests {
    use super::name_words;

    #[test]
    fn name_words_split_at_separators_and_camel_case() {
        assert_eq!(
            name_words("content_from_reading_ssh_id_rsa"),
            "content from reading ssh id rsa"
        );
        assert_eq!(name_words("llmModelName"), "llm model name");
        assert_eq!(name_words("HTTPServer"), "httpserver");
        assert_eq!(name_words("--tools--list--"), "tools list");
        assert_eq!(name_words(""), "");
        assert_eq!(name_words("Ünïcode_Name"), "ünïcode name");
    }
}
