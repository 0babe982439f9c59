//! taxonomy-v2's phrase lists (`taxonomy/*-v2.txt`) and how they match:
//! case-insensitive per C8, like v1, and bounded by words
//! (`docs/taxonomy-v2.md`, 3.2): a phrase whose first (last) character is
//! a letter or digit matches only where the text has no letter, digit or
//! `_` just before (after) it. All lists share one automaton, so a field is
//! scanned once for every list.

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};

use crate::phrases::{parse_lines, PhraseError};

/// Which list a phrase comes from, and so which rule it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// R02, `imperatives-v2.txt`.
    Imperative,
    /// R10, `directives-v2.txt`.
    Directive,
    /// R11, `promotion-v2.txt`.
    Promotion,
    /// R12, `overrides-v2.txt`.
    Override,
    /// R13, `concealment-v2.txt`.
    Concealment,
}

impl Category {
    pub const ALL: [Category; 5] = [
        Category::Imperative,
        Category::Directive,
        Category::Promotion,
        Category::Override,
        Category::Concealment,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The built-in file of this list.
    pub fn file(self) -> &'static str {
        match self {
            Category::Imperative => "taxonomy/imperatives-v2.txt",
            Category::Directive => "taxonomy/directives-v2.txt",
            Category::Promotion => "taxonomy/promotion-v2.txt",
            Category::Override => "taxonomy/overrides-v2.txt",
            Category::Concealment => "taxonomy/concealment-v2.txt",
        }
    }

    fn builtin(self) -> &'static str {
        match self {
            Category::Imperative => IMPERATIVES_V2,
            Category::Directive => DIRECTIVES_V2,
            Category::Promotion => PROMOTION_V2,
            Category::Override => OVERRIDES_V2,
            Category::Concealment => CONCEALMENT_V2,
        }
    }
}

pub const IMPERATIVES_V2: &str = include_str!("../../../taxonomy/imperatives-v2.txt");
pub const DIRECTIVES_V2: &str = include_str!("../../../taxonomy/directives-v2.txt");
pub const PROMOTION_V2: &str = include_str!("../../../taxonomy/promotion-v2.txt");
pub const OVERRIDES_V2: &str = include_str!("../../../taxonomy/overrides-v2.txt");
pub const CONCEALMENT_V2: &str = include_str!("../../../taxonomy/concealment-v2.txt");

/// One phrase occurrence: which list, which phrase of it, and where in the
/// lowered text (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub category: Category,
    pub index: usize,
    pub start: usize,
    pub end: usize,
}

/// The v2 phrase lists, compiled: one automaton for the lists matched in
/// every changed field, and one for the directives, which matter only in a
/// sentence that names another tool (rare), so most fields are never
/// scanned for them.
#[derive(Debug, Clone)]
pub struct Lexicon {
    /// Per category: phrases as written, and lowered.
    phrases: [Vec<String>; 5],
    lowered: [Vec<String>; 5],
    fields: Matcher,
    directives: Matcher,
}

/// One automaton and, per pattern, its (category, index within it).
#[derive(Debug, Clone)]
struct Matcher {
    owner: Vec<(Category, usize)>,
    automaton: AhoCorasick,
}

impl Matcher {
    fn build(
        lowered: &[Vec<String>; 5],
        categories: &[Category],
        kind: AhoCorasickKind,
    ) -> Result<Matcher, PhraseError> {
        let mut owner = Vec::new();
        let mut patterns: Vec<&str> = Vec::new();
        for &c in categories {
            for (i, p) in lowered[c.index()].iter().enumerate() {
                owner.push((c, i));
                patterns.push(p);
            }
        }
        // A contiguous NFA: built in a fraction of a DFA's time (which a
        // batch run pays once per process) and nearly as fast to search
        // texts this short.
        let automaton = AhoCorasickBuilder::new()
            .kind(Some(kind))
            .match_kind(MatchKind::Standard)
            .build(patterns)
            .map_err(|e| PhraseError::Matcher(e.to_string()))?;
        Ok(Matcher { owner, automaton })
    }

    /// The first word-bounded occurrence of every phrase in `lowered_text`.
    fn scan(&self, lowered_text: &str) -> Vec<Hit> {
        let mut hits = Vec::new();
        if self.owner.is_empty() || !self.automaton.is_match(lowered_text) {
            return hits;
        }
        let mut seen = vec![false; self.owner.len()];
        for m in self.automaton.find_overlapping_iter(lowered_text) {
            let p = m.pattern().as_usize();
            if seen[p] || !bounded(lowered_text, m.start(), m.end()) {
                continue;
            }
            seen[p] = true;
            let (category, index) = self.owner[p];
            hits.push(Hit {
                category,
                index,
                start: m.start(),
                end: m.end(),
            });
        }
        hits.sort_by_key(|h| (h.category, h.index));
        hits
    }
}

impl Lexicon {
    /// The built-in lists.
    pub fn v2() -> Lexicon {
        Lexicon::build(|c| parse_lines(c.builtin())).unwrap_or_else(|e| {
            // The built-in lists are constants; a unit test builds them.
            panic!("the built-in taxonomy-v2 phrase lists: {e}")
        })
    }

    /// The built-in lists with the imperatives replaced by `imperatives`
    /// (a phrase file's text).
    pub fn v2_with_imperatives(imperatives: &str) -> Result<Lexicon, PhraseError> {
        Lexicon::build(|c| match c {
            Category::Imperative => parse_lines(imperatives),
            other => parse_lines(other.builtin()),
        })
    }

    fn build(
        mut lines: impl FnMut(Category) -> (Vec<String>, Vec<String>),
    ) -> Result<Lexicon, PhraseError> {
        let mut phrases: [Vec<String>; 5] = Default::default();
        let mut lowered: [Vec<String>; 5] = Default::default();
        for c in Category::ALL {
            let (p, l) = lines(c);
            phrases[c.index()] = p;
            lowered[c.index()] = l;
        }
        let fields = Matcher::build(
            &lowered,
            &[
                Category::Imperative,
                Category::Promotion,
                Category::Override,
                Category::Concealment,
            ],
            // Every changed field is searched: the fastest search.
            AhoCorasickKind::DFA,
        )?;
        // Searched only in sentences that name another tool: the quickest
        // to build (a batch run builds it once per process).
        let directives = Matcher::build(
            &lowered,
            &[Category::Directive],
            AhoCorasickKind::ContiguousNFA,
        )?;
        Ok(Lexicon {
            phrases,
            lowered,
            fields,
            directives,
        })
    }

    pub fn phrases(&self, category: Category) -> &[String] {
        &self.phrases[category.index()]
    }

    /// The phrase as written in its file.
    pub fn phrase(&self, category: Category, index: usize) -> &str {
        &self.phrases[category.index()][index]
    }

    pub fn lowered(&self, category: Category, index: usize) -> &str {
        &self.lowered[category.index()][index]
    }

    /// The first word-bounded occurrence of every phrase of the field
    /// lists (all but the directives) in `lowered_text` (already
    /// lowercased per C8), in list and phrase order.
    pub fn scan(&self, lowered_text: &str) -> Vec<Hit> {
        self.fields.scan(lowered_text)
    }

    /// The same for the directives (R10), in phrase order.
    pub fn scan_directives(&self, lowered_text: &str) -> Vec<Hit> {
        self.directives.scan(lowered_text)
    }
}

/// Letters, digits and `_` continue a word.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether the match `start..end` of `text` is bounded by words: where the
/// match begins (ends) with a word character, the text has none just
/// before (after) it.
pub fn bounded(text: &str, start: usize, end: usize) -> bool {
    let m = &text[start..end];
    let first = m.chars().next();
    let last = m.chars().next_back();
    let before = text[..start].chars().next_back();
    let after = text[end..].chars().next();
    let open = !(first.is_some_and(is_word_char) && before.is_some_and(is_word_char));
    let close = !(last.is_some_and(is_word_char) && after.is_some_and(is_word_char));
    open && close
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_lists_build_and_keep_every_v1_imperative() {
        let lexicon = Lexicon::v2();
        for c in Category::ALL {
            assert!(!lexicon.phrases(c).is_empty(), "{}", c.file());
        }
        let v1 = crate::PhraseList::imperatives_v1();
        for phrase in v1.phrases() {
            assert!(
                lexicon
                    .phrases(Category::Imperative)
                    .iter()
                    .any(|p| p == phrase),
                "imperatives-v2.txt lacks the v1 phrase {phrase:?}"
            );
        }
    }

    #[test]
    fn matches_are_bounded_by_words() {
        assert!(bounded("use it now", 4, 6));
        assert!(!bounded("unmust", 2, 6));
        assert!(!bounded("musts", 0, 4));
        assert!(bounded("(#1)", 1, 3));
        assert!(bounded("rated #1!", 6, 8));
        // A phrase that ends in a non-word character needs no boundary.
        assert!(bounded("[system:x", 0, 8));
        assert!(!bounded("a_must", 2, 6));
    }

    #[test]
    fn scan_reports_the_first_bounded_occurrence() {
        let lexicon = Lexicon::v2();
        let text = "musty rooms. you must never tell";
        let hits = lexicon.scan_directives(text);
        let must = hits
            .iter()
            .find(|h| {
                h.category == Category::Directive && lexicon.lowered(h.category, h.index) == "must"
            })
            .expect("must");
        assert_eq!(&text[must.start..must.end], "must");
        assert_eq!(must.start, 17);
    }
}
