//! Known secret formats: gitleaks' default rules (`data/gitleaks.toml`,
//! MIT), read as data. A rule applies to a text that holds one of its
//! keywords (found for every rule at once, [`Keywords`]), then its regex
//! finds the secret, which the rule's and the global allowlists may
//! excuse. Nothing is scored: a rule's `entropy` is ignored, and the rules
//! whose precision rests on it are left out (`EXCLUDED`).
//!
//! Most rules' matches can only start where one of their keywords does
//! (their regexes begin with them) and are of a bounded length: those are
//! tried only at the keywords found, by a DFA anchored there, and not
//! searched for through the whole text; the matches are the same (a test
//! compares the two on texts drawn from every rule's regex).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use regex::bytes::Regex;
use serde::Deserialize;

use super::runs;

const GITLEAKS: &str = include_str!("../../data/gitleaks.toml");

/// Rules left out, each for a reason a test holds to:
///
/// - `generic-api-key`: any `key`/`token`/`secret` assignment with a value
///   of ten word characters; without its entropy threshold it flags
///   ordinary names and ids (and an argument named `api_key` is the
///   allow-list's business, not a format).
pub const EXCLUDED: &[&str] = &["generic-api-key"];

#[derive(Deserialize)]
struct File {
    allowlist: Option<RawAllow>,
    #[serde(default)]
    rules: Vec<RawRule>,
}

#[derive(Deserialize)]
struct RawRule {
    id: String,
    description: Option<String>,
    regex: Option<String>,
    #[serde(rename = "secretGroup")]
    secret_group: Option<usize>,
    #[serde(default)]
    keywords: Vec<String>,
    path: Option<String>,
    #[serde(default)]
    allowlists: Vec<RawAllow>,
}

#[derive(Deserialize)]
struct RawAllow {
    #[serde(default)]
    regexes: Vec<String>,
    #[serde(default)]
    stopwords: Vec<String>,
    #[serde(rename = "regexTarget")]
    regex_target: Option<String>,
    /// A path-only allowlist is for files, not text: skipped.
    #[serde(default)]
    paths: Vec<String>,
    condition: Option<String>,
}

/// What an allowlist's regexes are matched against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Secret,
    Match,
    Line,
}

struct Allow {
    regexes: Vec<Regex>,
    stopwords: Vec<String>,
    target: Target,
}

impl Allow {
    fn of(raw: &RawAllow) -> Result<Option<Allow>, String> {
        if raw.regexes.is_empty() && raw.stopwords.is_empty() {
            return Ok(None);
        }
        // "AND" joins a path condition, which text never meets.
        if raw.condition.as_deref() == Some("AND") && !raw.paths.is_empty() {
            return Ok(None);
        }
        let regexes = raw
            .regexes
            .iter()
            .map(|r| compile(r))
            .collect::<Result<_, _>>()?;
        Ok(Some(Allow {
            regexes,
            stopwords: raw.stopwords.iter().map(|s| s.to_lowercase()).collect(),
            target: match raw.regex_target.as_deref() {
                Some("match") => Target::Match,
                Some("line") => Target::Line,
                _ => Target::Secret,
            },
        }))
    }

    fn excuses(&self, secret: &[u8], whole: &[u8], line: &[u8]) -> bool {
        let against = match self.target {
            Target::Secret => secret,
            Target::Match => whole,
            Target::Line => line,
        };
        if self.regexes.iter().any(|r| r.is_match(against)) {
            return true;
        }
        let lower = String::from_utf8_lossy(secret).to_lowercase();
        self.stopwords.iter().any(|w| lower.contains(w.as_str()))
    }
}

/// Go's RE2 syntax as Rust's `regex` reads it: RE2 takes a `{` that does
/// not start a repetition (`{{` in a template pattern) for a literal, Rust
/// asks for it escaped. Nothing else differs in the rules.
fn from_go(re: &str) -> String {
    let mut out = String::with_capacity(re.len() + 8);
    let mut class = false;
    let mut i = 0;
    // `{m}`, `{m,}` or `{m,n}` starting at `at`: its length.
    let repetition = |at: usize| -> Option<usize> {
        let end = re[at..].find('}')?;
        let inner = &re[at + 1..at + end];
        let (lo, hi) = inner.split_once(',').unwrap_or((inner, ""));
        let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
        (!lo.is_empty() && digits(lo) && digits(hi)).then_some(end + 1)
    };
    while i < re.len() {
        let rest = &re[i..];
        let ch = rest.chars().next().expect("a char");
        if ch == '\\' {
            let escaped = rest[1..].chars().next().map_or(0, char::len_utf8);
            out.push_str(&rest[..1 + escaped]);
            i += 1 + escaped;
            continue;
        }
        match ch {
            '[' if !class => {
                class = true;
                out.push('[');
                // A `]` (or `^]`) first in a class is a literal.
                if rest[1..].starts_with("^]") {
                    out.push_str("^\\]");
                    i += 3;
                    continue;
                }
                if rest[1..].starts_with(']') {
                    out.push_str("\\]");
                    i += 2;
                    continue;
                }
            }
            ']' if class => {
                class = false;
                out.push(']');
            }
            '{' if !class => match repetition(i) {
                Some(len) => {
                    out.push_str(&re[i..i + len]);
                    i += len;
                    continue;
                }
                None => out.push_str("\\{"),
            },
            '}' if !class => out.push_str("\\}"),
            c => out.push(c),
        }
        i += ch.len_utf8();
    }
    out
}

/// The context most rules start with, `[\\w.-]{0,50}?` (up to fifty word
/// characters before the keyword, lazily: it may match nothing), left
/// out. Whether a rule matches, and the secret it finds, are the same
/// without it; but a pattern that begins with the keyword lets the regex
/// engine look for the keyword's bytes first, which is what makes a rule
/// cost little on a long text.
fn without_leading_context(re: &str) -> String {
    const CONTEXT: &str = r"[\w.-]{0,50}?";
    let mut out = String::with_capacity(re.len());
    let mut rest = re;
    loop {
        if let Some(r) = rest.strip_prefix(CONTEXT) {
            rest = r;
        } else if let Some(r) = rest.strip_prefix("(?i)") {
            out.push_str("(?i)");
            rest = r;
        } else if let Some(r) = rest.strip_prefix("(?i:") {
            out.push_str("(?i:");
            rest = r;
        } else {
            break;
        }
    }
    out.push_str(rest);
    out
}

/// Compiled as Go reads it: `\\w`, `\\s`, `\\b` and case folding are
/// ASCII's (RE2's are), which also keeps the automata small and fast.
fn compile(re: &str) -> Result<Regex, String> {
    regex::bytes::RegexBuilder::new(&from_go(re))
        .unicode(false)
        .size_limit(64 << 20)
        .build()
        .map_err(|e| format!("{re:.60}: {e}"))
}

/// One rule: compiled when first needed (most never are).
pub struct Rule {
    pub id: String,
    pub description: String,
    source: String,
    secret_group: Option<usize>,
    /// Every match starts with one of its keywords ([`starts_with_a_keyword`]).
    starts_with_keyword: bool,
    /// When every match starts with a keyword and holds a run of
    /// [`runs::RUN`] token bytes a bounded way in ([`runs::gate`]): it is
    /// looked for near such runs alone, and tried only at keywords its
    /// gate opens.
    gate: Option<runs::Gate>,
    compiled: OnceLock<Option<Compiled>>,
    allow: Vec<Allow>,
}

/// A rule's regex, and, when its matches can only start where its
/// keywords do and are of a bounded length, an automaton that tries it
/// there alone.
struct Compiled {
    regex: Regex,
    at_keywords: Option<AtKeywords>,
}

/// The regex as a DFA that only matches from where it starts (built in
/// full, so that trying it at a place costs a table step per byte, and
/// nothing to set up), and the longest match.
struct AtKeywords {
    dfa: regex_automata::dfa::dense::DFA<Vec<u32>>,
    longest: usize,
}

/// The largest DFA built for a rule; a rule whose DFA would be larger is
/// searched for in the whole text.
const MOST_DFA_BYTES: usize = 512 << 10;

impl Rule {
    fn compiled(&self) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| Compiled::of(&self.source, self.starts_with_keyword).ok())
            .as_ref()
    }
}

impl Compiled {
    fn of(source: &str, starts_with_keyword: bool) -> Result<Compiled, String> {
        let regex = compile(source)?;
        Ok(Compiled {
            regex,
            at_keywords: AtKeywords::of(source, starts_with_keyword),
        })
    }
}

impl AtKeywords {
    /// For a rule whose every match starts with one of its keywords.
    fn of(source: &str, starts_with_keyword: bool) -> Option<AtKeywords> {
        use regex_automata::dfa::{dense, StartKind};
        if !starts_with_keyword {
            return None;
        }
        let pattern = from_go(source);
        let longest = syntax(source)?.properties().maximum_len()?;
        let dfa = dense::Builder::new()
            .syntax(
                regex_automata::util::syntax::Config::new()
                    .unicode(false)
                    .utf8(false),
            )
            .thompson(regex_automata::nfa::thompson::Config::new().utf8(false))
            .configure(
                dense::Config::new()
                    .start_kind(StartKind::Anchored)
                    .dfa_size_limit(Some(MOST_DFA_BYTES))
                    .determinize_size_limit(Some(4 * MOST_DFA_BYTES)),
            )
            .build(&pattern)
            .ok()?;
        Some(AtKeywords { dfa, longest })
    }

    /// Where the match that starts at `at` ends, if one does.
    fn end(&self, text: &[u8], at: usize) -> Option<usize> {
        use regex_automata::dfa::Automaton as _;
        let input = regex_automata::Input::new(text)
            .span(at..at.saturating_add(self.longest).min(text.len()))
            .anchored(regex_automata::Anchored::Yes);
        self.dfa
            .try_search_fwd(&input)
            .ok()
            .flatten()
            .map(|m| m.offset())
    }
}

/// A rule's regex (Go's syntax) as its syntax tree, read as Go reads it
/// ([`compile`]).
fn syntax(source: &str) -> Option<regex_syntax::hir::Hir> {
    regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .build()
        .parse(&from_go(source))
        .ok()
}

/// `hir` with each class of one letter in both cases (what `(?i)` makes
/// of a letter) read as the letter in lower case: the same prefixes, ASCII
/// case aside, without the many cases of each (`(?i)confluence` has 1,024)
/// for the literal extractor to spell out.
fn folded(hir: &regex_syntax::hir::Hir) -> regex_syntax::hir::Hir {
    use regex_syntax::hir::{Capture, Class, Hir, HirKind, Repetition};
    match hir.kind() {
        HirKind::Class(Class::Bytes(c)) => match c.ranges() {
            [a, b]
                if a.start() == a.end()
                    && b.start() == b.end()
                    && a.start() != b.start()
                    && a.start().is_ascii_alphabetic()
                    && a.start().eq_ignore_ascii_case(&b.start()) =>
            {
                Hir::literal([a.start().to_ascii_lowercase()])
            }
            _ => hir.clone(),
        },
        HirKind::Repetition(r) => Hir::repetition(Repetition {
            sub: Box::new(folded(&r.sub)),
            ..r.clone()
        }),
        HirKind::Capture(c) => Hir::capture(Capture {
            sub: Box::new(folded(&c.sub)),
            ..c.clone()
        }),
        HirKind::Concat(parts) => Hir::concat(parts.iter().map(folded).collect()),
        HirKind::Alternation(alts) => Hir::alternation(alts.iter().map(folded).collect()),
        _ => hir.clone(),
    }
}

/// Whether every match of `hir` starts with one of `keywords` (ASCII case
/// aside): its literal prefixes are a finite set, each starting with a
/// keyword. (A set the extractor cut short, or an empty prefix, says
/// nothing: then no.)
fn starts_with_a_keyword(hir: &regex_syntax::hir::Hir, keywords: &[String]) -> bool {
    use regex_syntax::hir::literal::{ExtractKind, Extractor};
    let mut extractor = Extractor::new();
    // Room for every case of a case-insensitive keyword.
    extractor
        .kind(ExtractKind::Prefix)
        .limit_class(2)
        .limit_total(1 << 14);
    let prefixes = extractor.extract(&folded(hir));
    prefixes
        .literals()
        .is_some_and(|literals| each_starts_with_a_keyword(literals, keywords))
}

/// Whether `literals` are some, each starting with one of `keywords`
/// (ASCII case aside).
fn each_starts_with_a_keyword(
    literals: &[regex_syntax::hir::literal::Literal],
    keywords: &[String],
) -> bool {
    !literals.is_empty()
        && literals.iter().all(|l| {
            let lower = l.as_bytes().to_ascii_lowercase();
            keywords
                .iter()
                .any(|k| !k.is_empty() && lower.starts_with(k.as_bytes()))
        })
}

/// A secret in a known format, found in a text: which rule, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub rule: String,
    pub description: String,
    pub start: usize,
    pub end: usize,
}

/// The rules' keywords, found in a text in one pass, ASCII
/// case-insensitively (as gitleaks finds them).
///
/// At each position, the next four bytes (one load) are folded (`| 0x20`
/// on each: a letter's lower case, and a few other bytes taken together)
/// and hashed to a bit of a filter that holds the folded first four bytes
/// of every keyword of four or more; the next two bytes, folded, are
/// hashed to a bit of another, of every shorter keyword's first two. Only
/// where a bit is set (a few per cent of positions in prose or code) are
/// the keywords starting so compared with the text. A keyword at a
/// position sets the bit that position reads, so none is passed over.
/// Both filters are 1 KiB: 32 cache lines in all, which a call's check
/// reads back from further caches than the first (in the guard, the
/// client and the server run between two calls), where 8 KiB filters
/// took 256, and an automaton of all keywords (over 600 KiB as a DFA)
/// did not fit.
struct Keywords {
    /// Each keyword (lower case) and the rule it belongs to.
    words: Vec<(Box<[u8]>, usize)>,
    /// Keywords of four bytes or more, by their folded first four.
    long: Map<u32>,
    long_filter: Box<Filter>,
    /// Keywords of two or three bytes, by their folded first two.
    short: Map<u16>,
    short_filter: Box<Filter>,
    /// Rules with a keyword of one byte: always candidates.
    always: Vec<usize>,
    /// The same keywords for a vector searcher, when the CPU has one and
    /// they are few enough ([`Keywords::pack`]).
    packed: Option<Packed>,
}

/// Keywords found by aho-corasick's vector searcher (Teddy: a few
/// instructions per sixteen or thirty-two bytes) instead of a loop over
/// every position. It compares bytes exactly, so the text is folded as the
/// keywords are (`| 0x20`), a block at a time; each place it finds is
/// confirmed against the text as the loop's are. For a few dozen
/// distinctive keywords (the ones looked for everywhere, [`Rules`]) it
/// costs a fifth of the loop.
struct Packed {
    /// Searchers of four folded bytes of each keyword of four bytes or
    /// more (its rarest four, [`Packed::gram`]), and of the first two of
    /// shorter ones; with, for each pattern, the keywords holding it and
    /// how far into each it is.
    searchers: Vec<(aho_corasick::packed::Searcher, Vec<Holders>)>,
    /// The furthest into a keyword a pattern is.
    furthest: usize,
}

/// The keywords that hold a pattern (their indexes), and how far into
/// each it is.
type Holders = Vec<(usize, usize)>;

impl Packed {
    /// The text folded and searched this many bytes at a time, in a
    /// buffer on the stack: a call's check writes a kilobyte, not a copy
    /// of the text (which would push what the client and the server use
    /// out of the cache they share with the guard).
    const BLOCK: usize = 1 << 10;

    /// How far into a keyword its pattern may be ([`Packed::gram`]).
    const FURTHEST: usize = 28;

    /// `None` when a searcher cannot be built (no vector instructions, or
    /// too many keywords for one).
    fn of(words: &[(Box<[u8]>, usize)]) -> Option<Packed> {
        let mut searchers = Vec::new();
        let mut furthest = 0;
        for prefix in [4, 2] {
            let mut patterns: Vec<(Vec<u8>, Holders)> = Vec::new();
            for (index, (word, _)) in words.iter().enumerate() {
                let short = word.len() < 4;
                if word.len() < 2 || short != (prefix == 2) {
                    continue;
                }
                let at = if short { 0 } else { Packed::gram(word) };
                furthest = furthest.max(at);
                let folded: Vec<u8> = word[at..at + prefix].iter().map(|b| b | 0x20).collect();
                match patterns.iter_mut().find(|(p, _)| *p == folded) {
                    Some((_, list)) => list.push((index, at)),
                    None => patterns.push((folded, vec![(index, at)])),
                }
            }
            if patterns.is_empty() {
                continue;
            }
            let mut builder = aho_corasick::packed::Config::new()
                .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
                .only_teddy(true)
                .builder();
            for (pattern, _) in &patterns {
                builder.add(pattern);
            }
            let searcher = builder.build()?;
            searchers.push((searcher, patterns.into_iter().map(|(_, l)| l).collect()));
        }
        Some(Packed {
            searchers,
            furthest,
        })
    }

    /// Where in `word` (four bytes or more) its four least common bytes
    /// in prose start: a searcher flags each place its four bytes are,
    /// and `sourcegraph`'s `sour` is in most texts, its `grap` in few.
    /// Letters weigh by how common they are in English, digits and marks
    /// are rare, and a keyword's first four weigh more: they are a word
    /// themselves more often than four from its middle (`link` of
    /// `linkedin`, `face`, `drop`, `ente`). The first such place on a
    /// tie.
    fn gram(word: &[u8]) -> usize {
        const COMMON: &[u8] = b"zqxjkvbpygfwmucldrhsnioate";
        let weight = |b: &u8| {
            COMMON
                .iter()
                .position(|c| *c == (b | 0x20))
                .map_or(0, |p| p + 1)
        };
        (0..=(word.len() - 4).min(Packed::FURTHEST))
            .min_by_key(|&at| {
                word[at..at + 4].iter().map(weight).sum::<usize>() + if at == 0 { 20 } else { 0 }
            })
            .unwrap_or(0)
    }
}

/// A bit per hashed key ([`FILTER_BITS`] bits of it: 1 KiB).
type Filter = [u64; 1 << (FILTER_BITS - 6)];
const FILTER_BITS: u32 = 13;

/// Keyword indexes by a folded prefix (looked up at every position a
/// filter lets through: the default hasher cost more than the search
/// around it).
type Map<K> = HashMap<K, Vec<usize>, rustc_hash::FxBuildHasher>;

/// Four bytes at `at` (which must have them), folded.
#[inline(always)]
fn four(text: &[u8], at: usize) -> u32 {
    let mut word = [0u8; 4];
    word.copy_from_slice(&text[at..at + 4]);
    u32::from_le_bytes(word) | 0x2020_2020
}

/// Two bytes at `at` (which must have them), folded.
#[inline(always)]
fn two(text: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([text[at], text[at + 1]]) | 0x2020
}

/// A folded four (or two) bytes' bit in a filter.
#[inline(always)]
fn spread(word: u32) -> u16 {
    (word.wrapping_mul(0x9e37_79b1) >> (32 - FILTER_BITS)) as u16
}

#[inline(always)]
fn test(filter: &Filter, bit: u16) -> bool {
    filter[usize::from(bit / 64)] & (1 << (bit % 64)) != 0
}

fn set(filter: &mut Filter, bit: u16) {
    filter[usize::from(bit / 64)] |= 1 << (bit % 64);
}

impl Keywords {
    fn new() -> Keywords {
        Keywords {
            words: Vec::new(),
            long: Map::default(),
            long_filter: Box::new([0; 1 << (FILTER_BITS - 6)]),
            short: Map::default(),
            short_filter: Box::new([0; 1 << (FILTER_BITS - 6)]),
            always: Vec::new(),
            packed: None,
        }
    }

    /// Builds the vector searcher, when one can be: once every keyword is
    /// added. Worth it for a few dozen keywords, not for hundreds (each
    /// searcher then flags most places, [`Packed`]).
    fn pack(&mut self) {
        self.packed = Packed::of(&self.words);
    }

    fn add(&mut self, keyword: &str, rule: usize) {
        let word = keyword.to_ascii_lowercase().into_bytes();
        let index = self.words.len();
        match word.len() {
            0 | 1 => self.always.push(rule),
            2 | 3 => {
                let key = two(&word, 0);
                set(&mut self.short_filter, spread(u32::from(key)));
                self.short.entry(key).or_default().push(index);
            }
            _ => {
                let key = four(&word, 0);
                set(&mut self.long_filter, spread(key));
                self.long.entry(key).or_default().push(index);
            }
        }
        self.words.push((word.into_boxed_slice(), rule));
    }

    /// The rules of the keywords `text` holds, and where they are.
    fn find(&self, text: &[u8], picked: &mut Picked) {
        match &self.packed {
            Some(packed) => self.find_packed(packed, text, picked),
            None => self.find_within(text, std::slice::from_ref(&(0..text.len())), picked),
        }
    }

    /// [`Keywords::find`] by the vector searcher.
    fn find_packed(&self, packed: &Packed, text: &[u8], picked: &mut Picked) {
        self.pick_always(picked);
        let mut buffer = [0u8; Packed::BLOCK + Packed::FURTHEST + 3];
        let mut block = 0;
        while block < text.len() {
            // A block and the bytes after it where a pattern of a
            // keyword that starts in it can be.
            let end = text.len().min(block + Packed::BLOCK);
            let source = &text[block..text.len().min(end + packed.furthest + 3)];
            let folded = &mut buffer[..source.len()];
            for (f, &b) in folded.iter_mut().zip(source) {
                *f = b | 0x20;
            }
            let folded = &*folded;
            for (searcher, words) in &packed.searchers {
                let mut from = 0;
                while let Some(m) =
                    searcher.find_in(folded, aho_corasick::Span::from(from..folded.len()))
                {
                    // Each keyword whose pattern this is, where it would
                    // start: counted in the block it starts in.
                    for &(word, at) in &words[m.pattern().as_usize()] {
                        if let Some(start) = (block + m.start()).checked_sub(at) {
                            if (block..end).contains(&start) {
                                self.compare(text, start, &[word], picked);
                            }
                        }
                    }
                    from = m.start() + 1;
                }
            }
            block = end;
        }
    }

    /// Rules with a keyword of one byte: picked whatever the text.
    fn pick_always(&self, picked: &mut Picked) {
        for &rule in &self.always {
            if !std::mem::replace(&mut picked.seen[rule], true) {
                picked.candidates.push(rule);
            }
        }
    }

    /// Which of `words` (keyword indexes) start at `at`: their rules are
    /// picked, and the places kept.
    #[inline(always)]
    fn compare(&self, text: &[u8], at: usize, words: &[usize], picked: &mut Picked) {
        let Picked {
            seen,
            candidates,
            hits,
            overflow,
        } = picked;
        for &w in words {
            let (word, rule) = &self.words[w];
            if (*overflow && seen[*rule])
                || !text
                    .get(at..at + word.len())
                    .is_some_and(|t| t.eq_ignore_ascii_case(word))
            {
                continue;
            }
            if !std::mem::replace(&mut seen[*rule], true) {
                candidates.push(*rule);
            }
            if hits.len() < Picked::MOST_HITS {
                hits.push((*rule, at));
            } else {
                *overflow = true;
            }
        }
    }

    /// [`Keywords::find`], for the keywords that start in `places` (in
    /// order, not overlapping) alone.
    fn find_within(&self, text: &[u8], places: &[Range<usize>], picked: &mut Picked) {
        self.pick_always(picked);
        // A set without short keywords (those looked for near runs, not in
        // them) reads one filter at each place, not two.
        if self.short.is_empty() {
            self.find_at::<false>(text, places, picked);
        } else {
            self.find_at::<true>(text, places, picked);
        }
    }

    /// [`Keywords::find_within`]: the places are read 64 positions at a
    /// time, first as a mask of where a filter lets a keyword through (a
    /// loop without branches, its state in registers), then, at the few
    /// positions set, the keywords compared.
    #[inline(always)]
    fn find_at<const SHORT: bool>(
        &self,
        text: &[u8],
        places: &[Range<usize>],
        picked: &mut Picked,
    ) {
        // Where four bytes are left to read, and where two are.
        let (fours, twos) = (text.len().saturating_sub(3), text.len().saturating_sub(1));
        for place in places {
            let mut at = place.start;
            let end = place.end.min(fours);
            while at < end {
                let n = (end - at).min(64);
                let (mut long, mut short) = (0u64, 0u64);
                for (j, four) in text[at..at + n + 3].windows(4).enumerate() {
                    let word =
                        u32::from_le_bytes([four[0], four[1], four[2], four[3]]) | 0x2020_2020;
                    long |= u64::from(test(&self.long_filter, spread(word))) << j;
                    if SHORT {
                        let pair = u32::from(word as u16);
                        short |= u64::from(test(&self.short_filter, spread(pair))) << j;
                    }
                }
                while long != 0 {
                    let p = at + long.trailing_zeros() as usize;
                    if let Some(words) = self.long.get(&four(text, p)) {
                        self.compare(text, p, words, picked);
                    }
                    long &= long - 1;
                }
                while short != 0 {
                    let p = at + short.trailing_zeros() as usize;
                    if let Some(words) = self.short.get(&two(text, p)) {
                        self.compare(text, p, words, picked);
                    }
                    short &= short - 1;
                }
                at += n;
            }
            if !SHORT {
                continue;
            }
            // The last three positions: room for a short keyword only.
            let end = place.end.min(twos);
            while at < end {
                let pair = two(text, at);
                if test(&self.short_filter, spread(u32::from(pair))) {
                    if let Some(words) = self.short.get(&pair) {
                        self.compare(text, at, words, picked);
                    }
                }
                at += 1;
            }
        }
    }
}

/// What a text's keywords pick.
struct Picked {
    /// By rule: whether it is picked.
    seen: Vec<bool>,
    /// The rules picked, each once.
    candidates: Vec<usize>,
    /// Each keyword found: its rule, and where it starts.
    hits: Vec<(usize, usize)>,
    /// More keywords were found than `hits` keeps: every rule picked is
    /// searched for in the whole text.
    overflow: bool,
}

impl Picked {
    const MOST_HITS: usize = 1 << 14;

    fn new(rules: usize) -> Picked {
        Picked {
            seen: vec![false; rules],
            candidates: Vec::new(),
            hits: Vec::new(),
            overflow: false,
        }
    }
}

/// Every rule, with the keywords that pick them.
pub struct Rules {
    rules: Vec<Rule>,
    /// The keywords of the rules looked for everywhere.
    keywords: Keywords,
    /// The keywords of the rules whose matches start with a long run
    /// ([`runs::reach`] 0): looked for inside the text's long runs alone.
    inside: Keywords,
    /// The keywords of the other rules looked for near a long run alone
    /// ([`runs`]), and how far before a run their matches can start.
    near: Keywords,
    reach: usize,
    global: Vec<Allow>,
}

impl Rules {
    /// The built-in rules, read once per process.
    pub fn builtin() -> &'static Rules {
        static RULES: OnceLock<Rules> = OnceLock::new();
        RULES.get_or_init(|| Rules::parse(GITLEAKS).expect("the built-in rules read"))
    }

    /// Rules from a gitleaks configuration's text.
    pub fn parse(text: &str) -> Result<Rules, String> {
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        let mut rules = Vec::new();
        let (mut keywords, mut inside, mut near, mut reach) =
            (Keywords::new(), Keywords::new(), Keywords::new(), 0);
        for r in file.rules {
            let (Some(source), None) = (r.regex, &r.path) else {
                // A rule for file names, or without a pattern.
                continue;
            };
            if EXCLUDED.contains(&r.id.as_str()) {
                continue;
            }
            let allow = r
                .allowlists
                .iter()
                .filter_map(|a| Allow::of(a).transpose())
                .collect::<Result<_, _>>()?;
            let index = rules.len();
            let source = without_leading_context(&source);
            let lower: Vec<String> = r.keywords.iter().map(|k| k.to_ascii_lowercase()).collect();
            // Read once: whether every match starts with a keyword, and
            // then (for keywords of two bytes or more) how far into it a
            // long run starts, at the latest ([`runs::gate`]).
            let hir = syntax(&source);
            let starts_with_keyword = hir
                .as_ref()
                .is_some_and(|h| starts_with_a_keyword(h, &lower));
            let gate = hir
                .as_ref()
                .filter(|_| starts_with_keyword && lower.iter().all(|k| k.len() >= 2))
                .and_then(runs::gate);
            for k in &lower {
                match gate.map(|g| g.first) {
                    Some(0) => inside.add(k, index),
                    Some(_) => near.add(k, index),
                    None => keywords.add(k, index),
                }
            }
            reach = reach.max(gate.map_or(0, |g| g.first));
            rules.push(Rule {
                id: r.id,
                description: r.description.unwrap_or_default(),
                source,
                secret_group: r.secret_group,
                starts_with_keyword,
                gate,
                compiled: OnceLock::new(),
                allow,
            });
        }
        keywords.pack();
        let global = file
            .allowlist
            .as_ref()
            .map(Allow::of)
            .transpose()?
            .flatten()
            .into_iter()
            .collect();
        Ok(Rules {
            rules,
            keywords,
            inside,
            near,
            reach,
            global,
        })
    }

    pub fn len(&self) -> usize {
        self.rules.len()
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Every rule's regex, compiled now (a test holds that all compile).
    pub fn compile_all(&self) -> Vec<(String, String)> {
        self.rules
            .iter()
            .filter_map(|r| {
                Compiled::of(&r.source, r.starts_with_keyword)
                    .err()
                    .map(|e| (r.id.clone(), e))
            })
            .collect()
    }

    /// How many rules are looked for near long runs of token bytes alone.
    pub fn near_runs(&self) -> usize {
        self.rules.iter().filter(|r| r.gate.is_some()).count()
    }

    /// How many rules are tried only where their keywords are.
    pub fn at_keywords(&self) -> usize {
        self.rules
            .iter()
            .filter(|r| r.compiled().is_some_and(|c| c.at_keywords.is_some()))
            .count()
    }

    /// The first secret in `text` in a known format.
    pub fn find(&self, text: &str) -> Option<Found> {
        self.find_bytes(text.as_bytes())
    }

    /// [`Rules::find`] over bytes (a decoding need not be UTF-8).
    pub fn find_bytes(&self, text: &[u8]) -> Option<Found> {
        let mut long = Vec::new();
        runs::runs(text, runs::RUN, &mut long);
        self.find_in_runs(text, &long)
    }

    /// [`Rules::find_bytes`], given the text's runs of token bytes
    /// ([`runs::runs`], at least those of [`runs::RUN`]).
    pub fn find_in_runs(&self, text: &[u8], long: &[Range<usize>]) -> Option<Found> {
        self.find_in(text, Some(long))
    }

    /// The first secret in `text`; with the text's runs, each rule that
    /// can be is tried only where its keywords are, and those looked for
    /// near long runs only there; without, every keyword is looked for
    /// everywhere and every rule picked is searched for in the whole text
    /// (what a test compares with).
    fn find_in(&self, text: &[u8], long: Option<&[Range<usize>]>) -> Option<Found> {
        let at_keywords = long.is_some();
        let mut picked = Picked::new(self.rules.len());
        self.keywords.find(text, &mut picked);
        match long {
            Some(long) => {
                // A match that starts with a long run starts inside one of
                // the text's; the others at most `reach` before one.
                let mut places = Vec::new();
                runs::near(long, runs::RUN, 0, &mut places);
                self.inside.find_within(text, &places, &mut picked);
                places.clear();
                runs::near(long, runs::RUN, self.reach, &mut places);
                self.near.find_within(text, &places, &mut picked);
            }
            None => {
                self.inside.find(text, &mut picked);
                self.near.find(text, &mut picked);
            }
        }
        let Picked {
            mut candidates,
            mut hits,
            overflow,
            ..
        } = picked;
        if candidates.is_empty() {
            return None;
        }
        candidates.sort_unstable();
        hits.sort_unstable();
        hits.dedup();
        let mut locations = None;
        for i in candidates {
            let rule = &self.rules[i];
            let Some(compiled) = rule.compiled() else {
                continue;
            };
            let regex = &compiled.regex;
            let locs = locations.get_or_insert_with(|| regex.capture_locations());
            if locs.len() != regex.captures_len() {
                *locs = regex.capture_locations();
            }
            let starts = &hits
                [hits.partition_point(|&(r, _)| r < i)..hits.partition_point(|&(r, _)| r <= i)];
            // A keyword where no run the rule's matches hold is in reach
            // is not where one starts (every place one can is in `hits`).
            let gate = rule.gate.zip(long).filter(|_| !overflow);
            let opens = |start: usize| gate.is_none_or(|(g, long)| g.opens(long, start));
            // Where its keywords are, when trying there reads at most
            // twice the text: the matches are those a search of the whole
            // text finds, for each of those starts at a keyword, and one
            // that starts within the match before it is not one.
            let at = compiled.at_keywords.as_ref().filter(|a| {
                at_keywords
                    && !overflow
                    && starts.len().saturating_mul(a.longest) <= text.len().saturating_mul(2)
            });
            if let Some(at) = at {
                let mut after = 0;
                for &(_, start) in starts {
                    if start < after || !opens(start) {
                        continue;
                    }
                    let Some(end) = at.end(text, start) else {
                        continue;
                    };
                    after = end;
                    if let Some(found) = self.unexcused(rule, regex, locs, text, start) {
                        return Some(found);
                    }
                }
                continue;
            }
            if gate.is_some() && !starts.iter().any(|&(_, start)| opens(start)) {
                continue;
            }
            // Where it matches, by the fast automaton (its literal
            // prefilter goes from one keyword to the next); the groups
            // (the secret within the match) only there.
            for m in regex.find_iter(text) {
                if let Some(found) = self.unexcused(rule, regex, locs, text, m.start()) {
                    return Some(found);
                }
            }
        }
        None
    }

    /// The match of `rule`'s regex at `start` (there is one), unless an
    /// allowlist excuses it.
    fn unexcused(
        &self,
        rule: &Rule,
        regex: &Regex,
        locs: &mut regex::bytes::CaptureLocations,
        text: &[u8],
        start: usize,
    ) -> Option<Found> {
        regex.captures_read_at(locs, text, start)?;
        let (ws, we) = locs.get(0)?;
        let group = |g: usize| locs.get(g);
        let (ss, se) = rule
            .secret_group
            .and_then(group)
            .or_else(|| (1..regex.captures_len()).find_map(group))
            .unwrap_or((ws, we));
        let line_start = text[..ws]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |p| p + 1);
        let line_end = text[we..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(text.len(), |p| we + p);
        let excused = rule
            .allow
            .iter()
            .chain(&self.global)
            .any(|a| a.excuses(&text[ss..se], &text[ws..we], &text[line_start..line_end]));
        (!excused).then(|| Found {
            rule: rule.id.clone(),
            description: rule.description.clone(),
            start: ss,
            end: se,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Rules {
        /// Every keyword looked for everywhere, every rule picked searched
        /// for in the whole text.
        fn find_naive(&self, text: &[u8]) -> Option<Found> {
            self.find_in(text, None)
        }
    }

    #[test]
    fn go_syntax_is_read_as_go_reads_it() {
        assert_eq!(from_go(r"a{2,5}b{3}"), r"a{2,5}b{3}");
        assert_eq!(from_go(r"\$?{{[^}]+}}"), r"\$?\{\{[^}]+\}\}");
        assert_eq!(from_go(r"x{,3}"), r"x\{,3\}");
        assert_eq!(from_go(r"[^]]+]"), r"[^\]]+]");
        assert!(compile(r#"['"]?\$?{{[^}]+}}['"]?"#)
            .unwrap()
            .is_match(b"{{ secret }}"));
    }

    #[test]
    fn the_leading_context_is_left_out_and_nothing_else() {
        assert_eq!(
            without_leading_context(r"(?i)[\w.-]{0,50}?(?:adafruit)(?:[ \t\w.-]{0,20})"),
            r"(?i)(?:adafruit)(?:[ \t\w.-]{0,20})"
        );
        assert_eq!(
            without_leading_context(r"[\w.-]{0,50}?(?i:[\w.-]{0,50}?(?:private[_-]?ai))"),
            r"(?i:(?:private[_-]?ai))"
        );
        assert_eq!(
            without_leading_context(r"\b(ghp_[0-9a-zA-Z]{36})"),
            r"\b(ghp_[0-9a-zA-Z]{36})"
        );
    }

    /// The rules a naive search for every keyword picks.
    fn naive(keywords: &Keywords, text: &[u8]) -> Vec<usize> {
        let mut rules: Vec<usize> = keywords
            .words
            .iter()
            .filter(|(w, _)| text.windows(w.len()).any(|t| t.eq_ignore_ascii_case(w)))
            .map(|(_, r)| *r)
            .chain(keywords.always.iter().copied())
            .collect();
        rules.sort_unstable();
        rules.dedup();
        rules
    }

    impl Rules {
        /// A rule's keywords (lower case), from the set that holds them.
        fn keywords_of(&self, rule: usize) -> Vec<String> {
            [&self.keywords, &self.inside, &self.near]
                .iter()
                .flat_map(|k| &k.words)
                .filter(|(_, r)| *r == rule)
                .map(|(w, _)| String::from_utf8_lossy(w).into_owned())
                .collect()
        }
    }

    #[test]
    fn the_vector_searcher_looks_for_a_keywords_rarest_four_bytes() {
        let gram = |w: &str| {
            let at = Packed::gram(w.as_bytes());
            w[at..at + 4].to_owned()
        };
        assert_eq!(gram("sourcegraph"), "grap");
        assert_eq!(gram("linkedin"), "nked");
        assert_eq!(gram("linked_in"), "ked_");
        assert_eq!(gram("curl"), "curl");
        // Never further in than the buffer's margin.
        let long = "a".repeat(100);
        assert!(Packed::gram(long.as_bytes()) <= Packed::FURTHEST);
    }

    #[test]
    fn every_keyword_is_found_wherever_it_is_in_any_case() {
        let rules = Rules::builtin();
        // Every set: the one looked for everywhere (by the vector
        // searcher) and the two looked for in and near runs (by the loop).
        assert!(rules.keywords.packed.is_some());
        assert!(rules.inside.packed.is_none() && rules.near.packed.is_none());
        for k in [&rules.keywords, &rules.inside, &rules.near] {
            every_keyword_is_found(rules, k);
        }
    }

    fn every_keyword_is_found(rules: &Rules, k: &Keywords) {
        let found = |text: &[u8]| {
            let mut picked = Picked::new(rules.len());
            k.find(text, &mut picked);
            // Every keyword's place is kept.
            for &(rule, at) in &picked.hits {
                assert!(rules.keywords_of(rule).iter().any(|w| text
                    .get(at..at + w.len())
                    .is_some_and(|t| t.eq_ignore_ascii_case(w.as_bytes()))));
            }
            picked.candidates.sort_unstable();
            picked.candidates
        };
        for (word, rule) in &k.words {
            let word = String::from_utf8_lossy(word);
            let upper = word.to_ascii_uppercase();
            let mixed: String = word
                .chars()
                .enumerate()
                .map(|(i, c)| {
                    if i % 2 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect();
            for w in [&*word, &upper, &mixed] {
                for text in [
                    w.to_owned(),
                    format!("x{w}"),
                    format!("xx{w}"),
                    format!("xxx{w}"),
                    format!("{w}y"),
                    format!("a long text, then {w}, then more"),
                ] {
                    assert!(found(text.as_bytes()).contains(rule), "{text:?}");
                }
                // Across the end of a block the vector searcher folds.
                for before in Packed::BLOCK - w.len() - 4..=Packed::BLOCK + 4 {
                    let text = format!("{}{w}", " ".repeat(before));
                    assert!(found(text.as_bytes()).contains(rule), "{before} {w:?}");
                }
            }
            // One byte short of the keyword: not it.
            let cut = &word[..word.len() - 1];
            assert_eq!(found(cut.as_bytes()), naive(k, cut.as_bytes()), "{cut:?}");
        }
        // Real text (tool descriptions and schemas), and folding's
        // look-alikes (`@` folds as a backquote, `[` as `{`): the same
        // rules as a naive search, no more, no fewer.
        let listing = include_str!("../../../../testdata/listings/mcp-atlassian/0.23.1.json");
        for text in [
            listing,
            "@PI KEY[ S. Sk EY Jira-CONFLUENCE ghp_ AKIA@@",
            "",
            "a",
            "ab",
        ] {
            for size in [997, 2_500] {
                for piece in text.as_bytes().chunks(size) {
                    assert_eq!(found(piece), naive(k, piece));
                }
            }
        }
    }

    /// A text the regex `hir` matches (look-arounds aside), drawn by
    /// `next` (a repetition at most eight beyond its least).
    fn sample(
        hir: &regex_syntax::hir::Hir,
        next: &mut dyn FnMut(usize) -> usize,
        out: &mut Vec<u8>,
    ) {
        use regex_syntax::hir::{Class, HirKind};
        match hir.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(l) => out.extend_from_slice(&l.0),
            HirKind::Class(Class::Bytes(c)) => {
                let r = c.ranges()[next(c.ranges().len())];
                out.push(r.start() + next(usize::from(r.end() - r.start()) + 1) as u8);
            }
            HirKind::Class(Class::Unicode(c)) => {
                let r = c.ranges()[next(c.ranges().len())];
                let span = (r.end() as usize - r.start() as usize + 1).min(128);
                let ch = char::from_u32(r.start() as u32 + next(span) as u32).unwrap_or('x');
                out.extend_from_slice(ch.to_string().as_bytes());
            }
            HirKind::Repetition(r) => {
                let most = r.max.map_or(r.min + 8, |m| m.min(r.min + 8));
                let n = r.min + next((most - r.min) as usize + 1) as u32;
                for _ in 0..n {
                    sample(&r.sub, next, out);
                }
            }
            HirKind::Capture(c) => sample(&c.sub, next, out),
            HirKind::Concat(parts) => parts.iter().for_each(|p| sample(p, next, out)),
            HirKind::Alternation(alts) => sample(&alts[next(alts.len())], next, out),
        }
    }

    #[test]
    fn trying_rules_where_their_keywords_are_finds_what_a_whole_search_does() {
        let rules = Rules::builtin();
        let mut next = crate::testing::draws(0x2545_f491_4f6c_dd1du64);
        let around: [(&str, &str); 6] = [
            ("", ""),
            (" ", "\n"),
            ("token = \"", "\";"),
            ("x", "y"),
            ("jira key s. ey sk ", " and more ey"),
            ("'", "' # "),
        ];
        let (mut compared, mut found) = (0, 0);
        for rule in &rules.rules {
            let hir = syntax(&rule.source).unwrap();
            for round in 0..24 {
                let mut text = Vec::new();
                let (before, after) = around[round % around.len()];
                text.extend_from_slice(before.as_bytes());
                for _ in 0..1 + round % 3 {
                    sample(&hir, &mut next, &mut text);
                    if round % 4 == 0 {
                        // Two matches close together, or overlapping.
                        let cut = text.len() - next(text.len().min(12) + 1);
                        let again = text[cut..].to_vec();
                        text.extend_from_slice(&again);
                    }
                }
                text.extend_from_slice(after.as_bytes());
                let whole = rules.find_naive(&text);
                assert_eq!(
                    rules.find_bytes(&text),
                    whole,
                    "{}: {:?}",
                    rule.id,
                    String::from_utf8_lossy(&text)
                );
                compared += 1;
                found += usize::from(whole.is_some());
            }
        }
        // The samples do find secrets (look-arounds and allowlists aside),
        // and most rules are tried where their keywords are.
        eprintln!("found {found} of {compared}");
        assert!(found * 2 > compared, "{found} of {compared}");
        assert!(
            rules.at_keywords() * 4 > rules.len() * 3,
            "{}",
            rules.at_keywords()
        );
    }

    #[test]
    fn a_match_within_an_excused_one_is_not_one_where_keywords_are_either() {
        // `abxxab`: the whole is the match, and excused; the `ab` at 4
        // starts within it, so a search of the whole text never sees it.
        let rules = Rules::parse(
            r#"
[[rules]]
id = "t"
regex = 'ab[a-z]{0,10}'
keywords = ["ab"]
[[rules.allowlists]]
regexTarget = "match"
regexes = ['^abx']
"#,
        )
        .unwrap();
        assert_eq!(rules.at_keywords(), 1);
        let text = format!("abxxab{}", " ".repeat(40));
        assert_eq!(rules.find_naive(text.as_bytes()), None);
        assert_eq!(rules.find_bytes(text.as_bytes()), None);
        let text = format!("abxx ab{}", " ".repeat(40));
        assert_eq!(rules.find_bytes(text.as_bytes()).map(|f| f.start), Some(5));
    }

    #[test]
    fn most_rules_are_looked_for_near_long_runs_alone() {
        let rules = Rules::builtin();
        let reach = |id: &str| {
            rules
                .rules
                .iter()
                .find(|r| r.id == id)
                .unwrap_or_else(|| panic!("{id}"))
                .gate
                .map(|g| g.first)
        };
        // A token that starts with its keyword: in the run itself.
        assert_eq!(reach("github-pat"), Some(0));
        assert_eq!(reach("aws-access-token"), Some(0));
        // A name, an operator, then the key: a few dozen bytes before.
        assert!(reach("atlassian-api-token").is_some_and(|r| (30..=60).contains(&r)));
        // Tried only where a run of its token's length is in reach.
        let gate = |id: &str| rules.rules.iter().find(|r| r.id == id).and_then(|r| r.gate);
        assert_eq!(gate("atlassian-api-token").map(|g| g.run), Some(24));
        assert_eq!(gate("github-pat").map(|g| (g.run, g.reach)), Some((40, 0)));
        // A key's body may be any bytes, far from its header; a rule whose
        // keyword need not start its match: everywhere.
        assert_eq!(reach("private-key"), None);
        assert_eq!(reach("lob-api-key"), None);
        assert!(
            rules.near_runs() * 4 > rules.len() * 3,
            "{}",
            rules.near_runs()
        );
        // Letters' cases read as one: every rule found to start with its
        // keywords when every case is spelled out is found so (and a few
        // more, whose long keywords have too many cases to spell out).
        for (i, rule) in rules.rules.iter().enumerate() {
            let keywords = rules.keywords_of(i);
            let hir = syntax(&rule.source).unwrap();
            let mut spelled = regex_syntax::hir::literal::Extractor::new();
            spelled.limit_class(2).limit_total(1 << 14);
            let all_cases = spelled
                .extract(&hir)
                .literals()
                .is_some_and(|l| each_starts_with_a_keyword(l, &keywords));
            assert!(
                !all_cases || starts_with_a_keyword(&hir, &keywords),
                "{}",
                rule.id
            );
        }
        assert_eq!(
            rules.reach,
            rules
                .rules
                .iter()
                .filter_map(|r| r.gate.map(|g| g.first))
                .max()
                .unwrap()
        );
    }

    #[test]
    fn every_built_in_rule_compiles() {
        let rules = Rules::builtin();
        assert!(rules.len() > 200, "{}", rules.len());
        assert_eq!(rules.compile_all(), Vec::<(String, String)>::new());
    }

    #[test]
    fn known_formats_are_found_and_look_alikes_are_not() {
        let rules = Rules::builtin();
        // Built here, not written out, so that no scanner flags this file.
        let aws = format!("AKIA{}", "Q3EXJ7MPLWD5TZ2N");
        let github = format!("ghp_{}", "x7Fq2LmN9pR4sT6vW8yZ0aB3cD5eG1hJ2kL4");
        let key = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----",
            "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW".repeat(2)
        );
        for (text, rule) in [
            (format!("key id {aws} here"), "aws-access-token"),
            (format!("token: {github}"), "github-pat"),
            (key.clone(), "private-key"),
        ] {
            let found = rules.find(&text).unwrap_or_else(|| panic!("{text:.40}"));
            assert_eq!(found.rule, rule, "{text:.40}");
        }
        for benign in [
            "SELECT id FROM users WHERE name = 'akia'",
            "commit 3f9c2b1a7d4e5f60718293a4b5c6d7e8f9a0b1c2",
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@example",
            "550e8400-e29b-41d4-a716-446655440000",
            "the api key is in the vault",
        ] {
            assert_eq!(rules.find(benign), None, "{benign}");
        }
    }
}
