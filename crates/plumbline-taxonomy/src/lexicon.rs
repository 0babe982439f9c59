//! taxonomy-v2's phrase lists (`taxonomy/*-v2.txt`) and how they match:
//! case-insensitive per C8, like v1, and bounded by words
//! (`docs/taxonomy-v2.md`, 3.2): a phrase whose first (last) character is
//! a letter or digit matches only where the text has no letter, digit or
//! `_` just before (after) it. All lists share one index, so a field is
//! read once for every list.

use rustc_hash::FxHashMap;

use crate::constructions::Constructions;
use crate::phrases::parse_lines;
use crate::taxonomy::Taxonomy;

/// Which list a phrase comes from, and so which rule it serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// R02, `imperatives-v2.txt` / `imperatives-v3.txt`.
    Imperative,
    /// R10, `directives-v2.txt` / `directives-v3.txt`.
    Directive,
    /// R11, `promotion-v2.txt` / `promotion-v3.txt`.
    Promotion,
    /// R12, `overrides-v2.txt` / `overrides-v3.txt`.
    Override,
    /// R13, `concealment-v2.txt` / `concealment-v3.txt`.
    Concealment,
    /// taxonomy-v3 R14 (and R19), `cues-v3.txt`.
    Cue,
    /// taxonomy-v3 R15, `sequencing-v3.txt`.
    Sequencing,
    /// taxonomy-v3 R17, `authority-v3.txt`.
    Authority,
    /// taxonomy-v3 R18 (and R04, R19), `sensitive-v3.txt`.
    Sensitive,
    /// taxonomy-v3 R04 only (input names), `channels-v3.txt`.
    Channel,
    /// taxonomy-v3 constructions (2.14): the anchor entries of
    /// `constructions-v3.txt`.
    Anchor,
}

/// The number of categories.
const CATEGORIES: usize = 11;

impl Category {
    pub const ALL: [Category; CATEGORIES] = [
        Category::Imperative,
        Category::Directive,
        Category::Promotion,
        Category::Override,
        Category::Concealment,
        Category::Cue,
        Category::Sequencing,
        Category::Authority,
        Category::Sensitive,
        Category::Channel,
        Category::Anchor,
    ];

    fn index(self) -> usize {
        self as usize
    }

    /// The built-in file of this list under `taxonomy` (taxonomy-v2 has
    /// no list of the v3 categories; taxonomy-v1 uses none of these).
    pub fn file(self, taxonomy: Taxonomy) -> Option<&'static str> {
        Some(match (self, taxonomy) {
            (_, Taxonomy::V1) => return None,
            (Category::Imperative, Taxonomy::V2) => "taxonomy/imperatives-v2.txt",
            (Category::Directive, Taxonomy::V2) => "taxonomy/directives-v2.txt",
            (Category::Promotion, Taxonomy::V2) => "taxonomy/promotion-v2.txt",
            (Category::Override, Taxonomy::V2) => "taxonomy/overrides-v2.txt",
            (Category::Concealment, Taxonomy::V2) => "taxonomy/concealment-v2.txt",
            (_, Taxonomy::V2) => return None,
            (Category::Imperative, Taxonomy::V3) => "taxonomy/imperatives-v3.txt",
            (Category::Directive, Taxonomy::V3) => "taxonomy/directives-v3.txt",
            (Category::Promotion, Taxonomy::V3) => "taxonomy/promotion-v3.txt",
            (Category::Override, Taxonomy::V3) => "taxonomy/overrides-v3.txt",
            (Category::Concealment, Taxonomy::V3) => "taxonomy/concealment-v3.txt",
            (Category::Cue, Taxonomy::V3) => "taxonomy/cues-v3.txt",
            (Category::Sequencing, Taxonomy::V3) => "taxonomy/sequencing-v3.txt",
            (Category::Authority, Taxonomy::V3) => "taxonomy/authority-v3.txt",
            (Category::Sensitive, Taxonomy::V3) => "taxonomy/sensitive-v3.txt",
            (Category::Channel, Taxonomy::V3) => "taxonomy/channels-v3.txt",
            (Category::Anchor, Taxonomy::V3) => "taxonomy/constructions-v3.txt",
        })
    }

    /// The built-in list's text under `taxonomy` (empty where it has none).
    /// The phrases of this list's built-in file (the anchors of the
    /// constructions file are its phrases).
    fn builtin_lines(self, taxonomy: Taxonomy) -> (Vec<String>, Vec<String>) {
        match self {
            Category::Anchor => crate::constructions::anchor_lines(self.builtin(taxonomy)),
            _ => parse_lines(self.builtin(taxonomy)),
        }
    }

    fn builtin(self, taxonomy: Taxonomy) -> &'static str {
        match (self, taxonomy) {
            (_, Taxonomy::V1) => "",
            (Category::Imperative, Taxonomy::V2) => IMPERATIVES_V2,
            (Category::Directive, Taxonomy::V2) => DIRECTIVES_V2,
            (Category::Promotion, Taxonomy::V2) => PROMOTION_V2,
            (Category::Override, Taxonomy::V2) => OVERRIDES_V2,
            (Category::Concealment, Taxonomy::V2) => CONCEALMENT_V2,
            (_, Taxonomy::V2) => "",
            (Category::Imperative, Taxonomy::V3) => IMPERATIVES_V3,
            (Category::Directive, Taxonomy::V3) => DIRECTIVES_V3,
            (Category::Promotion, Taxonomy::V3) => PROMOTION_V3,
            (Category::Override, Taxonomy::V3) => OVERRIDES_V3,
            (Category::Concealment, Taxonomy::V3) => CONCEALMENT_V3,
            (Category::Cue, Taxonomy::V3) => CUES_V3,
            (Category::Sequencing, Taxonomy::V3) => SEQUENCING_V3,
            (Category::Authority, Taxonomy::V3) => AUTHORITY_V3,
            (Category::Sensitive, Taxonomy::V3) => SENSITIVE_V3,
            (Category::Channel, Taxonomy::V3) => CHANNELS_V3,
            (Category::Anchor, Taxonomy::V3) => crate::constructions::CONSTRUCTIONS_V3,
        }
    }
}

pub const IMPERATIVES_V2: &str = include_str!("../../../taxonomy/imperatives-v2.txt");
pub const DIRECTIVES_V2: &str = include_str!("../../../taxonomy/directives-v2.txt");
pub const PROMOTION_V2: &str = include_str!("../../../taxonomy/promotion-v2.txt");
pub const OVERRIDES_V2: &str = include_str!("../../../taxonomy/overrides-v2.txt");
pub const CONCEALMENT_V2: &str = include_str!("../../../taxonomy/concealment-v2.txt");
pub const IMPERATIVES_V3: &str = include_str!("../../../taxonomy/imperatives-v3.txt");
pub const DIRECTIVES_V3: &str = include_str!("../../../taxonomy/directives-v3.txt");
pub const PROMOTION_V3: &str = include_str!("../../../taxonomy/promotion-v3.txt");
pub const OVERRIDES_V3: &str = include_str!("../../../taxonomy/overrides-v3.txt");
pub const CONCEALMENT_V3: &str = include_str!("../../../taxonomy/concealment-v3.txt");
pub const CUES_V3: &str = include_str!("../../../taxonomy/cues-v3.txt");
pub const SEQUENCING_V3: &str = include_str!("../../../taxonomy/sequencing-v3.txt");
pub const AUTHORITY_V3: &str = include_str!("../../../taxonomy/authority-v3.txt");
pub const SENSITIVE_V3: &str = include_str!("../../../taxonomy/sensitive-v3.txt");
pub const CHANNELS_V3: &str = include_str!("../../../taxonomy/channels-v3.txt");

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
    taxonomy: Taxonomy,
    /// taxonomy-v3's constructions (2.14), whose anchors are
    /// [`Category::Anchor`].
    constructions: Constructions,
    /// Per category: phrases as written, and lowered.
    phrases: [Vec<String>; CATEGORIES],
    lowered: [Vec<String>; CATEGORIES],
    fields: Matcher,
    directives: Matcher,
    names: Matcher,
}

/// The phrases of some lists, indexed for word-bounded search: per
/// pattern its (category, index within it) and lowered text.
///
/// A word-bounded occurrence of a phrase that begins with a word
/// character begins where a run of word characters begins, and that run
/// is exactly the phrase's first word: the phrase's next character is
/// not a word character and the text must hold it too, or the phrase
/// ends there and then the text's next character must not be one either.
/// So the text is read run by run, and each run is looked up among the
/// first words. Phrases that begin with another character (`<!--`,
/// `[system]`) are few: they are tried where the text holds their first
/// byte.
#[derive(Debug, Clone)]
struct Matcher {
    owner: Vec<(Category, usize)>,
    patterns: Vec<String>,
    /// The patterns that begin with a word character, by first word: of
    /// at most eight bytes, packed into an integer (a word holds no zero
    /// byte, so the packing is exact), else as text.
    by_short_first_word: FxHashMap<u64, Vec<Candidate>>,
    by_long_first_word: FxHashMap<Box<str>, Vec<Candidate>>,
    /// A bit per [`word_key`] of some first word: most runs of a text are
    /// no phrase's first word, and this rules them out without hashing.
    first_word_keys: Box<[u64; KEY_WORDS]>,
    /// The other patterns, by their first byte (256 entries).
    by_first_byte: Vec<Vec<usize>>,
    /// Empty patterns (a list can yield one only as name words): each
    /// occurs at the start of every text.
    empty: Vec<usize>,
    /// Per byte: [`OTHER`], [`WORD`], [`STARTS`] or [`NON_ASCII`].
    classes: [u8; 256],
}

/// A pattern that begins with a word, under its first word: with the
/// (up to) eight bytes after that word, packed, and a mask of the bytes
/// it has. Common first words ("the", "to") begin many phrases, and
/// comparing these first rules most of them out without a call.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    tail: u64,
    mask: u64,
    /// The length of the rest of the pattern after its first word. When
    /// it is at most eight, the tail is all of it: a text whose first word
    /// is the pattern's, with at least `rest` bytes after it that agree
    /// under the mask, holds the pattern there.
    rest: usize,
    pattern: usize,
}

/// An ASCII byte that is not a word character and begins no pattern.
const OTHER: u8 = 0;
/// An ASCII word character (letter, digit, `_`).
const WORD: u8 = 1;
/// An ASCII byte that is not a word character and begins some pattern.
const STARTS: u8 = 2;
/// A byte of a non-ASCII character.
const NON_ASCII: u8 = 3;

/// The size of [`Matcher::first_word_keys`] in 64-bit words (2^16 bits).
const KEY_WORDS: usize = 1 << 10;

/// A word of at most eight bytes as one integer.
fn packed(word: &[u8]) -> Option<u64> {
    if word.len() > 8 {
        return None;
    }
    let mut b = [0u8; 8];
    b[..word.len()].copy_from_slice(word);
    Some(u64::from_le_bytes(b))
}

/// The first (up to) eight bytes of `bytes` as one integer (zeros after
/// its end), with a mask of the bytes taken: `packed_prefix(a).0 &
/// packed_prefix(b).1` equals `packed_prefix(b).0` when `a` begins with
/// those bytes of `b`, and conversely when `a` has at least as many bytes
/// as were taken of `b` (else a zero byte of `b` would agree with the
/// zeros after the end of `a`).
fn packed_prefix(bytes: &[u8]) -> (u64, u64) {
    if let Some(eight) = bytes.first_chunk::<8>() {
        return (u64::from_le_bytes(*eight), u64::MAX);
    }
    // Fewer than eight: byte by byte (a copy of unknown length is a call).
    let value = bytes
        .iter()
        .enumerate()
        .fold(0, |v, (i, &b)| v | u64::from(b) << (8 * i));
    (value, (1u64 << (8 * bytes.len())) - 1)
}

/// A 16-bit key of a word from its length and first and last bytes.
pub(crate) fn word_key(word: &[u8]) -> usize {
    let (first, last) = (word[0] as usize, word[word.len() - 1] as usize);
    (first ^ (last << 5) ^ (word.len().min(31) << 11)) & 0xFFFF
}

impl Matcher {
    fn build(lowered: &[Vec<String>; CATEGORIES], categories: &[Category]) -> Matcher {
        let mut owner = Vec::new();
        let mut patterns = Vec::new();
        for &c in categories {
            for (i, p) in lowered[c.index()].iter().enumerate() {
                owner.push((c, i));
                patterns.push(p.clone());
            }
        }
        let mut by_short_first_word: FxHashMap<u64, Vec<Candidate>> = FxHashMap::default();
        let mut by_long_first_word: FxHashMap<Box<str>, Vec<Candidate>> = FxHashMap::default();
        let mut first_word_keys = Box::new([0u64; KEY_WORDS]);
        let mut by_first_byte = vec![Vec::new(); 256];
        let mut empty = Vec::new();
        for (p, pattern) in patterns.iter().enumerate() {
            let first = pattern
                .char_indices()
                .find(|&(_, c)| !is_word_char(c))
                .map_or(pattern.as_str(), |(i, _)| &pattern[..i]);
            if !first.is_empty() {
                let key = word_key(first.as_bytes());
                first_word_keys[key / 64] |= 1 << (key % 64);
                let rest = &pattern.as_bytes()[first.len()..];
                let (tail, mask) = packed_prefix(rest);
                let c = Candidate {
                    tail,
                    mask,
                    rest: rest.len(),
                    pattern: p,
                };
                match packed(first.as_bytes()) {
                    Some(word) => by_short_first_word.entry(word).or_default().push(c),
                    None => by_long_first_word.entry(first.into()).or_default().push(c),
                }
            } else if let Some(&b) = pattern.as_bytes().first() {
                by_first_byte[usize::from(b)].push(p);
            } else {
                empty.push(p);
            }
        }
        let mut classes = [OTHER; 256];
        for (b, class) in classes.iter_mut().enumerate() {
            *class = match u8::try_from(b) {
                Ok(b) if !b.is_ascii() => NON_ASCII,
                Ok(b) if b.is_ascii_alphanumeric() || b == b'_' => WORD,
                _ if !by_first_byte[b].is_empty() => STARTS,
                _ => OTHER,
            };
        }
        Matcher {
            owner,
            patterns,
            by_short_first_word,
            by_long_first_word,
            first_word_keys,
            by_first_byte,
            empty,
            classes,
        }
    }

    /// Calls `f` with each pattern that begins with a character other
    /// than a word character and occurs at byte `at`.
    fn others_at(&self, bytes: &[u8], at: usize, mut f: impl FnMut(usize)) {
        for &p in &self.by_first_byte[usize::from(bytes[at])] {
            if bytes[at..].starts_with(self.patterns[p].as_bytes()) {
                f(p);
            }
        }
    }

    /// The first word-bounded occurrence of every phrase in `lowered_text`.
    fn scan(&self, lowered_text: &str) -> Vec<Hit> {
        let mut hits = Vec::new();
        let mut seen: Vec<bool> = Vec::new();
        let mut found = |p: usize, start: usize, hits: &mut Vec<Hit>| {
            if seen.is_empty() {
                seen = vec![false; self.owner.len()];
            }
            let end = start + self.patterns[p].len();
            if seen[p] || !bounded(lowered_text, start, end) {
                return;
            }
            seen[p] = true;
            let (category, index) = self.owner[p];
            hits.push(Hit {
                category,
                index,
                start,
                end,
            });
        };
        for &p in &self.empty {
            found(p, 0, &mut hits);
        }
        let bytes = lowered_text.as_bytes();
        let len = bytes.len();
        // The end of the run of word characters from `at` (at a char
        // boundary).
        let run_end = |mut at: usize| {
            while at < len {
                match self.classes[usize::from(bytes[at])] {
                    WORD => at += 1,
                    NON_ASCII => match lowered_text[at..].chars().next() {
                        Some(c) if is_word_char(c) => at += c.len_utf8(),
                        _ => break,
                    },
                    _ => break,
                }
            }
            at
        };
        // Character by character: a run of word characters may begin a
        // phrase with its first word, another character a phrase that
        // begins with it.
        let mut at = 0;
        while at < len {
            let start = at;
            match self.classes[usize::from(bytes[at])] {
                OTHER => {
                    at += 1;
                    continue;
                }
                WORD => at = run_end(at + 1),
                STARTS => {
                    self.others_at(bytes, at, |p| found(p, start, &mut hits));
                    at += 1;
                    continue;
                }
                _ => match lowered_text[at..].chars().next() {
                    Some(c) if is_word_char(c) => at = run_end(at + c.len_utf8()),
                    Some(c) => {
                        self.others_at(bytes, at, |p| found(p, start, &mut hits));
                        at += c.len_utf8();
                        continue;
                    }
                    None => break,
                },
            }
            let key = word_key(&bytes[start..at]);
            if self.first_word_keys[key / 64] & (1 << (key % 64)) == 0 {
                continue;
            }
            let ids = match packed(&bytes[start..at]) {
                Some(word) => self.by_short_first_word.get(&word),
                None => self.by_long_first_word.get(&lowered_text[start..at]),
            };
            let Some(ids) = ids else {
                continue;
            };
            let (next, _) = packed_prefix(&bytes[at..]);
            let left = len - at;
            for c in ids {
                if next & c.mask == c.tail
                    && if c.rest <= 8 {
                        left >= c.rest
                    } else {
                        bytes[start..].starts_with(self.patterns[c.pattern].as_bytes())
                    }
                {
                    found(c.pattern, start, &mut hits);
                }
            }
        }
        hits.sort_by_key(|h| (h.category, h.index));
        hits
    }
}

impl Lexicon {
    /// taxonomy-v2's built-in lists.
    pub fn v2() -> Lexicon {
        Lexicon::builtin(Taxonomy::V2)
    }

    /// The built-in lists of `taxonomy` (v2 or later).
    pub fn builtin(taxonomy: Taxonomy) -> Lexicon {
        Lexicon::build(taxonomy, |c| c.builtin_lines(taxonomy))
    }

    /// `taxonomy`'s built-in lists with the imperatives (R02) replaced by
    /// `imperatives` (a phrase file's text).
    pub fn with_imperatives(taxonomy: Taxonomy, imperatives: &str) -> Lexicon {
        Lexicon::build(taxonomy, |c| match c {
            Category::Imperative => parse_lines(imperatives),
            other => other.builtin_lines(taxonomy),
        })
    }

    fn build(
        taxonomy: Taxonomy,
        mut lines: impl FnMut(Category) -> (Vec<String>, Vec<String>),
    ) -> Lexicon {
        let mut phrases: [Vec<String>; CATEGORIES] = Default::default();
        let mut lowered: [Vec<String>; CATEGORIES] = Default::default();
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
                Category::Cue,
                Category::Sequencing,
                Category::Authority,
                Category::Sensitive,
                Category::Anchor,
            ],
        );
        // Searched only in sentences that name another tool.
        let directives = Matcher::build(&lowered, &[Category::Directive]);
        // Input names only (R04 of taxonomy-v3), sensitive words included,
        // written as name words: `id_rsa` is `id rsa`, `.ssh` is `ssh`.
        let mut as_words: [Vec<String>; CATEGORIES] = Default::default();
        for c in [Category::Sensitive, Category::Channel] {
            as_words[c.index()] = lowered[c.index()]
                .iter()
                .map(|p| {
                    p.split(|ch: char| !ch.is_alphanumeric())
                        .filter(|w| !w.is_empty())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .collect();
        }
        let names = Matcher::build(&as_words, &[Category::Sensitive, Category::Channel]);
        let constructions = match taxonomy {
            Taxonomy::V3 => Constructions::parse(crate::constructions::CONSTRUCTIONS_V3),
            _ => Constructions::default(),
        };
        Lexicon {
            taxonomy,
            constructions,
            names,
            phrases,
            lowered,
            fields,
            directives,
        }
    }

    pub fn constructions(&self) -> &Constructions {
        &self.constructions
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

    /// The taxonomy whose lists these are.
    pub fn taxonomy(&self) -> Taxonomy {
        self.taxonomy
    }

    /// The sensitive and side-channel phrases (taxonomy-v3 R04) in an
    /// input's name, written as lowered words joined by spaces.
    pub fn scan_name(&self, lowered_words: &str) -> Vec<Hit> {
        self.names.scan(lowered_words)
    }

    /// The same for the directives (R10), in phrase order.
    pub fn scan_directives(&self, lowered_text: &str) -> Vec<Hit> {
        self.directives.scan(lowered_text)
    }
}

/// Whether `pattern` (lowered) occurs in `text` (lowered) bounded by
/// words: what [`Lexicon::scan`] finds for it, for one phrase.
pub(crate) fn occurs_bounded(text: &str, pattern: &str) -> bool {
    occurs_bounded_where(text, pattern, |_| true)
}

/// [`occurs_bounded`], counting only the occurrences (by start) `keep`
/// keeps.
pub(crate) fn occurs_bounded_where(
    text: &str,
    pattern: &str,
    keep: impl Fn(usize) -> bool,
) -> bool {
    if pattern.is_empty() {
        return true;
    }
    memchr::memmem::find_iter(text.as_bytes(), pattern.as_bytes())
        .any(|at| bounded(text, at, at + pattern.len()) && keep(at))
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
        for taxonomy in [Taxonomy::V2, Taxonomy::V3] {
            let lexicon = Lexicon::builtin(taxonomy);
            for c in Category::ALL {
                assert_eq!(
                    lexicon.phrases(c).is_empty(),
                    c.file(taxonomy).is_none(),
                    "{c:?} {taxonomy}"
                );
            }
        }
        let lexicon = Lexicon::v2();
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
    fn every_v2_imperative_is_a_v3_imperative_or_cue_not_both() {
        // docs/taxonomy-v3.md 3: v3 splits v2's R02 list into strong
        // (R02) and weak (R14) phrases, and only adds to each.
        let v2 = Lexicon::v2();
        let v3 = Lexicon::builtin(Taxonomy::V3);
        for phrase in v2.phrases(Category::Imperative) {
            let strong = v3.phrases(Category::Imperative).contains(phrase);
            let weak = v3.phrases(Category::Cue).contains(phrase);
            assert!(strong ^ weak, "{phrase:?}: strong {strong}, weak {weak}");
        }
        assert!(v3.phrases(Category::Cue).iter().any(|p| p == "<!--"));
    }

    #[test]
    fn input_names_match_the_name_form_of_phrases() {
        let v3 = Lexicon::builtin(Taxonomy::V3);
        let first = |words: &str| {
            v3.scan_name(words)
                .first()
                .map(|h| v3.phrase(h.category, h.index).to_owned())
        };
        // `id_rsa` is listed; an input name's words are split at `_`.
        assert_eq!(
            first("content from reading ssh id rsa").as_deref(),
            Some("id_rsa")
        );
        assert_eq!(first("llm model name").as_deref(), Some("llm"));
        assert_eq!(first("sidenote").as_deref(), Some("sidenote"));
        assert_eq!(first("connection id"), None);
        assert_eq!(first("path"), None);
        // Bounded by words: `tools` is listed, `toolset` is not it.
        assert_eq!(first("toolset"), None);
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

    /// The first word-bounded occurrence of each pattern, found the slow
    /// way: at every character boundary.
    fn naive_scan(matcher: &Matcher, text: &str) -> Vec<(Category, usize, usize)> {
        let mut hits: Vec<(Category, usize, usize)> = Vec::new();
        for (p, pattern) in matcher.patterns.iter().enumerate() {
            let first = (0..=text.len()).find(|&i| {
                text.is_char_boundary(i)
                    && text[i..].starts_with(pattern.as_str())
                    && bounded(text, i, i + pattern.len())
            });
            if let Some(i) = first {
                let (c, index) = matcher.owner[p];
                hits.push((c, index, i));
            }
        }
        hits.sort();
        hits
    }

    #[test]
    fn the_word_index_finds_what_a_search_at_every_position_finds() {
        // Phrases that begin with words, share first words, overlap, hold
        // punctuation, begin with other characters (one of them
        // non-ASCII), and texts made of their pieces, other words and
        // separators, ASCII or not.
        let mut lowered: [Vec<String>; CATEGORIES] = Default::default();
        lowered[Category::Imperative.index()] = [
            "ignore",
            "ignore previous",
            "ignore previous instructions",
            "you must",
            "über alles",
            "do not",
            "don't",
            "aa",
            "aa aa",
            "a_b",
            "x1",
            "instructions above",
            "a\0",
            "ignore \0",
        ]
        .map(str::to_owned)
        .to_vec();
        lowered[Category::Cue.index()] =
            ["<!--", "[system]", "<important>", ".env", "«note»", "must"]
                .map(str::to_owned)
                .to_vec();
        let matcher = Matcher::build(&lowered, &[Category::Imperative, Category::Cue]);
        let pieces = [
            "ignore",
            "previous",
            "instructions",
            "you",
            "must",
            "über",
            "alles",
            "do",
            "not",
            "don't",
            "aa",
            "a_b",
            "x1",
            "<!--",
            "[system]",
            "<important>",
            ".env",
            "«note»",
            "note",
            "system",
            "ab",
            "_",
            "é",
            "1",
            "the",
            "above",
            "a",
            "\0",
        ];
        let separators = [
            " ", "", "  ", "\n", ".", ",", "-", "_", "é", "\u{a0}", "/", "«",
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as usize % n
        };
        for _ in 0..20_000 {
            let mut text = String::new();
            for _ in 0..next(9) {
                text.push_str(pieces[next(pieces.len())]);
                text.push_str(separators[next(separators.len())]);
            }
            let got: Vec<(Category, usize, usize)> = matcher
                .scan(&text)
                .iter()
                .map(|h| (h.category, h.index, h.start))
                .collect();
            let mut got_sorted = got.clone();
            got_sorted.sort();
            assert_eq!(got_sorted, naive_scan(&matcher, &text), "{text:?}");
            for h in matcher.scan(&text) {
                let pattern = &matcher.patterns[matcher
                    .owner
                    .iter()
                    .position(|&o| o == (h.category, h.index))
                    .unwrap()];
                assert_eq!(&text[h.start..h.end], pattern.as_str());
                assert!(occurs_bounded(&text, pattern));
            }
        }
    }
}
