//! taxonomy-v2's answer to "does this text name another tool?"
//! (`docs/taxonomy-v2.md` 2.7), shared by R05 and R10.
//!
//! v1 took any `word/word` for a `server/tool` reference, so prose slashes
//! (`offset/length`) and paths (`~/.ssh/id_rsa`) fired R05. v2 names a tool
//! only where the text itself treats a word as one, or where the word is a
//! tool of another observed server:
//!
//! - an `mcp://` address;
//! - the name of a *foreign* tool (another server's, from the inventory):
//!   an identifier-shaped one anywhere, a plain word only in tool context;
//! - an identifier-shaped word (`send_email`, `sendEmail`,
//!   `mail.send_email`) in tool context: next to `tool`, `function`,
//!   `call`, `use`, `invoke`, `run`, `execute`, followed by `(`, or
//!   followed by `is invoked` / `is called`.
//!
//! Never a reference: the tool's own names and input names, a sibling
//! (another tool of the same listing), or a word inside an R03 match (a
//! URL, path or domain).

use std::ops::Range;

use rustc_hash::FxHashSet;

use super::Context;
use crate::evidence::ReferenceBy;
use crate::json::Value;
use crate::patterns::r03_hits_v2;

/// The words that may name a tool, as byte ranges: the leftmost-first,
/// non-overlapping matches of `[A-Za-z_][A-Za-z0-9_]*(?:[./-][A-Za-z0-9_]+)*`
/// (`docs/taxonomy-v2.md` 2.7 item 2), scanned by hand: a regex engine
/// costs more than the whole rest of the rule on real descriptions.
#[cfg(test)]
fn words(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    words_shaped(text).map(|(span, _)| span)
}

/// Byte classes for the word scanner, one table lookup per byte.
const WORD: u8 = 1; // [A-Za-z0-9_]
const START: u8 = 2; // [A-Za-z_]
const LOWER: u8 = 4; // [a-z]
const UPPER: u8 = 8; // [A-Z]
const ALNUM: u8 = 16; // [A-Za-z0-9]
const SEP: u8 = 32; // [./-]

static CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        let mut k = 0;
        if b.is_ascii_alphanumeric() || b == b'_' {
            k |= WORD;
        }
        if b.is_ascii_alphabetic() || b == b'_' {
            k |= START;
        }
        if b.is_ascii_lowercase() {
            k |= LOWER;
        }
        if b.is_ascii_uppercase() {
            k |= UPPER;
        }
        if b.is_ascii_alphanumeric() {
            k |= ALNUM;
        }
        if b == b'.' || b == b'/' || b == b'-' {
            k |= SEP;
        }
        t[c] = k;
        c += 1;
    }
    t
};

/// [`words`], each with whether it is identifier-shaped
/// ([`is_identifier_shaped`]), found in the same pass.
fn words_shaped(text: &str) -> impl Iterator<Item = (Range<usize>, bool)> + '_ {
    let b = text.as_bytes();
    let class = |i: usize| CLASS[usize::from(b[i])];
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < b.len() && class(i) & START == 0 {
            i += 1;
        }
        if i >= b.len() {
            return None;
        }
        let start = i;
        let mut shaped = false;
        // One part: a run of word characters, its shape found on the way
        // (a `_` between alphanumerics, or camelCase from a lower-case
        // first letter).
        let mut part = |i: &mut usize| {
            let lower_first = class(*i) & LOWER != 0;
            let mut prev = 0u8;
            while *i < b.len() {
                let k = class(*i);
                if k & WORD == 0 {
                    break;
                }
                // `_` after an alphanumeric, then an alphanumeric; or a
                // lower-case letter, then an upper-case one. The rare byte
                // is tested first.
                if b[*i] == b'_'
                    && prev & ALNUM != 0
                    && *i + 1 < b.len()
                    && class(*i + 1) & ALNUM != 0
                {
                    shaped = true;
                }
                if k & UPPER != 0 && prev & LOWER != 0 && lower_first {
                    shaped = true;
                }
                prev = k;
                *i += 1;
            }
        };
        part(&mut i);
        while i + 1 < b.len() && class(i) & SEP != 0 && class(i + 1) & WORD != 0 {
            i += 1;
            part(&mut i);
        }
        Some((start..i, shaped))
    })
}

/// Words before a name that treat it as a tool (after skipping `the`, `a`,
/// `an`).
const BEFORE: [&str; 17] = [
    "tool",
    "function",
    "call",
    "calls",
    "calling",
    "invoke",
    "invokes",
    "invoking",
    "use",
    "uses",
    "using",
    "run",
    "runs",
    "running",
    "execute",
    "executes",
    "executing",
];

/// Words after a name that treat it as a tool.
const AFTER: [&str; 5] = ["tool", "tools", "function", "call", "calls"];

/// After `is`, `was` or `gets`: words that treat the name before as a tool.
const AFTER_IS: [&str; 5] = ["invoked", "called", "used", "executed", "run"];

/// What the tool being graded calls itself, on either side of the change:
/// its name, and the vocabulary of its own schemas (every property name at
/// any depth of `inputSchema` and `outputSchema`, and every string of an
/// `enum` or `const` there).
pub(crate) struct OwnNames<'a> {
    names: FxHashSet<&'a str>,
}

fn schema_vocabulary<'a>(v: &'a Value, names: &mut FxHashSet<&'a str>, depth: usize) {
    // Bounded like the parser; a schema is far shallower.
    if depth > crate::json::MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(o) => {
            for (k, item) in o.iter() {
                match (k, item) {
                    ("properties", Value::Object(props)) => {
                        names.extend(props.keys());
                    }
                    ("enum", Value::Array(values)) => {
                        names.extend(values.iter().filter_map(Value::as_str));
                    }
                    ("const", Value::String(s)) => {
                        names.insert(s);
                    }
                    _ => {}
                }
                schema_vocabulary(item, names, depth + 1);
            }
        }
        Value::Array(items) => {
            for item in items {
                schema_vocabulary(item, names, depth + 1);
            }
        }
        _ => {}
    }
}

impl<'a> OwnNames<'a> {
    pub fn of(old: &'a Value, new: &'a Value) -> OwnNames<'a> {
        let mut names = FxHashSet::default();
        for tool in [old, new] {
            if let Some(name) = tool.get("name").and_then(Value::as_str) {
                names.insert(name);
            }
            for schema in ["inputSchema", "outputSchema"] {
                if let Some(s) = tool.get(schema) {
                    schema_vocabulary(s, &mut names, 1);
                }
            }
        }
        OwnNames { names }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }
}

/// A place where a text names another tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// The name as written (for an `mcp://` address, the address).
    pub name: String,
    pub by: ReferenceBy,
    pub span: Range<usize>,
}

/// Whether `word` is written like an identifier: a `_` between word
/// characters (`send_email`), or camelCase: a lower-case first letter and
/// a lower-case ASCII letter followed by an upper-case one (`sendEmail`;
/// not `MongoDB` or `GitHub`, which are names of products). A word joined
/// by `.`, `/` or `-` is one when any part is.
#[cfg(test)]
pub(crate) fn is_identifier_shaped(word: &str) -> bool {
    word.split(['.', '/', '-']).any(|part| {
        let b = part.as_bytes();
        let snake = b
            .windows(3)
            .any(|w| w[1] == b'_' && w[0].is_ascii_alphanumeric() && w[2].is_ascii_alphanumeric());
        let camel = b.first().is_some_and(u8::is_ascii_lowercase)
            && b.windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
        snake || camel
    })
}

/// Whether `word` names a sibling: a sibling's name, or its end after a
/// `_`, `-` or `.` (servers prefix their tools, `firecrawl_scrape`, and
/// their texts often drop the prefix).
fn is_sibling(ctx: &Context<'_>, word: &str) -> bool {
    ctx.inventory.is_sibling(word) || ctx.inventory.has_sibling_ending_with(word)
}

/// The last part of a qualified name (`mail.send_email` → `send_email`).
fn last_part(word: &str) -> &str {
    word.rsplit(['.', '/']).next().unwrap_or(word)
}

/// Characters skipped around a name when looking for its context words.
fn is_wrapper(c: char) -> bool {
    matches!(
        c,
        '`' | '"' | '\'' | '(' | ')' | '[' | ']' | '*' | '_' | '“' | '”' | '‘' | '’'
    )
}

/// The words before `at`, nearest first, without wrappers (compared
/// ignoring ASCII case).
fn words_before(text: &str, at: usize) -> impl Iterator<Item = &str> + '_ {
    text[..at]
        .rsplit(char::is_whitespace)
        .map(|w| w.trim_matches(is_wrapper))
        .filter(|w| !w.is_empty())
}

/// The words after `at`, nearest first, without wrappers and trailing
/// punctuation (compared ignoring ASCII case).
fn words_after(text: &str, at: usize) -> impl Iterator<Item = &str> + '_ {
    text[at..]
        .split(char::is_whitespace)
        .map(|w| {
            w.trim_matches(is_wrapper)
                .trim_end_matches([',', '.', ';', ':', '!', '?'])
        })
        .filter(|w| !w.is_empty())
}

/// Whether `word` is one of `list`, ignoring ASCII case.
fn one_of(word: &str, list: &[&str]) -> bool {
    list.iter().any(|l| l.eq_ignore_ascii_case(word))
}

/// Whether the text around `span` treats the word there as a tool.
fn in_tool_context(text: &str, span: &Range<usize>) -> bool {
    if text[span.end..].starts_with('(') {
        return true;
    }
    let mut before = words_before(text, span.start).skip_while(|w| one_of(w, &["the", "a", "an"]));
    if before.next().is_some_and(|w| one_of(w, &BEFORE)) {
        return true;
    }
    let mut after = words_after(text, span.end);
    match after.next() {
        Some(w) if one_of(w, &AFTER) => true,
        Some(w) if one_of(w, &["is", "was", "gets", "get"]) => {
            after.next().is_some_and(|w| one_of(w, &AFTER_IS))
        }
        _ => false,
    }
}

/// The identifier-shaped words of `text` only, as [`words_shaped`] finds
/// them, found from the places a shape can start: every `_`, and every
/// upper-case letter after a lower-case one. Only the runs of word and
/// separator bytes around them are segmented, so the cost follows the
/// identifiers, not the text.
fn shaped_words(text: &str) -> Vec<Range<usize>> {
    let b = text.as_bytes();
    let in_run = |c: u8| CLASS[usize::from(c)] & (WORD | SEP) != 0;
    let mut marks: Vec<usize> = memchr::memchr_iter(b'_', b).collect();
    // Blocks of 64 bytes without a lower-case letter followed by an
    // upper-case one are passed over by the test of [`has_camel`], which
    // vectorises; a byte loop over the whole text cost as much as the
    // rest of the search.
    for block in (0..b.len()).step_by(64) {
        let (lo, hi) = (block.max(1), b.len().min(block + 64));
        if lo < hi && has_camel(&b[lo - 1..hi]) {
            marks.extend(
                (lo..hi).filter(|&i| b[i].is_ascii_uppercase() && b[i - 1].is_ascii_lowercase()),
            );
        }
    }
    marks.sort_unstable();
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut done = 0; // runs before this byte were segmented
    for m in marks {
        if m < done {
            continue;
        }
        // The run of word and separator bytes around the mark. A word never
        // spans two runs, and segmentation restarts at each run's start.
        let start = b[..m]
            .iter()
            .rposition(|&c| !in_run(c))
            .map_or(0, |p| p + 1);
        let end = b[m..]
            .iter()
            .position(|&c| !in_run(c))
            .map_or(b.len(), |p| m + p);
        for (span, shaped) in words_shaped(&text[start..end]) {
            if shaped {
                out.push(start + span.start..start + span.end);
            }
        }
        done = end;
    }
    out
}

/// Whether a lower-case ASCII letter is followed by an upper-case one,
/// without early exit so that it vectorises.
fn has_camel(bytes: &[u8]) -> bool {
    bytes.chunks(64).any(|chunk| {
        chunk.windows(2).fold(false, |seen, w| {
            seen | (w[0].is_ascii_lowercase() & w[1].is_ascii_uppercase())
        })
    }) || bytes
        .chunks(64)
        .zip(bytes.chunks(64).skip(1))
        .any(|(a, b)| {
            a.last().is_some_and(u8::is_ascii_lowercase)
                && b.first().is_some_and(u8::is_ascii_uppercase)
        })
}

/// Whether a word after `before` continues a longer one (`x.y` cut at a
/// non-word, 2.7 item 2): it is then not a name of its own.
fn continues_a_word(before: Option<char>) -> bool {
    before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '/' | '-' | '@'))
}

/// Whether `span` lies inside an R03 match the taxonomy keeps in `text`
/// (2.7 item 7): the matches are found once per text, on first need.
fn inside_endpoint(
    ctx: &Context<'_>,
    text: &str,
    span: &Range<usize>,
    matches: &mut Option<Vec<Range<usize>>>,
) -> bool {
    let matches = matches.get_or_insert_with(|| {
        let mut hits = Vec::new();
        if ctx.taxonomy >= crate::taxonomy::Taxonomy::V3 {
            crate::patterns::r03_hits_v3(text, &mut hits);
        } else {
            r03_hits_v2(text, &mut hits);
        }
        hits.into_iter().map(|h| h.span).collect()
    });
    matches
        .iter()
        .any(|r| r.start <= span.start && span.end <= r.end)
}

/// Every place in `text` that names another tool, in text order.
pub(crate) fn references(ctx: &Context<'_>, text: &str) -> Vec<Reference> {
    let mut out = Vec::new();
    // `mcp://` addresses, matched case-insensitively (C8 on ASCII).
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(at) = find_ascii_ci(&bytes[i..], b"mcp://").map(|p| p + i) {
        let end = text[at..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`' | '<' | '>' | ')'))
            .map_or(text.len(), |e| at + e);
        out.push(Reference {
            name: text[at..end].to_owned(),
            by: ReferenceBy::McpUri,
            span: at..end,
        });
        i = end.max(at + 1);
    }
    // Most texts name nothing: without foreign names, only an identifier
    // can be a reference, and one needs a `_` or a lower-case letter
    // followed by an upper-case one.
    let foreign_possible = ctx.inventory.foreign().next().is_some();
    if !foreign_possible && memchr::memchr(b'_', bytes).is_none() && !has_camel(bytes) {
        return out;
    }
    let mut excluded: Option<Vec<Range<usize>>> = None;
    // Without foreign names only identifier-shaped words can be references:
    // find just those.
    let candidates: Box<dyn Iterator<Item = (Range<usize>, bool)>> = if foreign_possible {
        Box::new(words_shaped(text))
    } else {
        Box::new(shaped_words(text).into_iter().map(|span| (span, true)))
    };
    for (span, shaped) in candidates {
        // The cheap tests first: most words are neither shaped nor foreign.
        if !shaped && !foreign_possible {
            continue;
        }
        let word = &text[span.clone()];
        let last = last_part(word);
        let foreign =
            foreign_possible && (ctx.inventory.is_foreign(word) || ctx.inventory.is_foreign(last));
        if !shaped && !foreign {
            continue;
        }
        // A word continuing a longer one (`x.y` cut at a non-word) is not
        // a name of its own.
        let before = text[..span.start].chars().next_back();
        if continues_a_word(before) {
            continue;
        }
        // The context next (cheap, and most identifiers in prose are
        // inputs mentioned without it), then what the tool calls itself.
        let by = if foreign {
            if !shaped && !in_tool_context(text, &span) {
                continue;
            }
            ReferenceBy::Inventory
        } else {
            if !in_tool_context(text, &span) {
                continue;
            }
            ReferenceBy::Form
        };
        // `firecrawl_research_*` names the siblings that start so.
        let glob = text[span.end..].starts_with('*');
        if glob && ctx.inventory.has_sibling_starting_with(word) {
            continue;
        }
        let own = ctx.own_names();
        if own.contains(word)
            || own.contains(last)
            || is_sibling(ctx, word)
            || is_sibling(ctx, last)
        {
            continue;
        }
        // Every R03 match needs a `/`, a `\` or a `.`: a word without a
        // `.` in a text with neither slash cannot lie inside one.
        let inside_possible = word.contains('.') || bytes.contains(&b'/') || bytes.contains(&b'\\');
        if !inside_possible {
            out.push(Reference {
                name: word.to_owned(),
                by,
                span,
            });
            continue;
        }
        if inside_endpoint(ctx, text, &span, &mut excluded) {
            continue;
        }
        out.push(Reference {
            name: word.to_owned(),
            by,
            span,
        });
    }
    out.sort_by_key(|r| r.span.start);
    out
}

/// taxonomy-v3 (4.15): the tools of the same server a text names, and the
/// names it writes as code. A word (2.7 item 2) names one when it, or its
/// last part, is a sibling's name and the word is identifier-shaped or in
/// tool context; or when it is identifier-shaped, not the tool's own
/// vocabulary, starts with a lower-case ASCII letter, and is wrapped in
/// backticks (`` `sync_state` ``). Words inside
/// an R03 match are skipped as in 2.7 item 7. Foreign names and form
/// references are [`references`]'.
pub(crate) fn sibling_and_code_names(ctx: &Context<'_>, text: &str) -> Vec<Reference> {
    sibling_and_code_names_in(ctx, text, 0..text.len())
}

/// [`sibling_and_code_names`] of the words within `within` (a sentence:
/// no word crosses its ends), each read in the whole `text`.
pub(crate) fn sibling_and_code_names_in(
    ctx: &Context<'_>,
    text: &str,
    within: Range<usize>,
) -> Vec<Reference> {
    let mut out = Vec::new();
    // Without siblings only a name written as code can be one.
    if !ctx.inventory.has_siblings() && !text[within.clone()].contains('`') {
        return out;
    }
    let mut excluded: Option<Vec<Range<usize>>> = None;
    let offset = within.start;
    for (span, shaped) in words_shaped(&text[within]) {
        let span = span.start + offset..span.end + offset;
        let word = &text[span.clone()];
        let last = last_part(word);
        let before = text[..span.start].chars().next_back();
        if continues_a_word(before) {
            continue;
        }
        let sibling = ctx.inventory.is_sibling(word) || ctx.inventory.is_sibling(last);
        let backticked = before == Some('`') && text[span.end..].starts_with('`');
        let code = backticked
            && (shaped || called(ctx, text, span.start))
            && word.starts_with(|c: char| c.is_ascii_lowercase())
            && !sibling
            && !ctx.own_names().contains(word)
            && !ctx.own_names().contains(last);
        let by = if sibling && (shaped || backticked || in_tool_context(text, &span)) {
            ReferenceBy::Inventory
        } else if code {
            ReferenceBy::Form
        } else {
            continue;
        };
        if inside_endpoint(ctx, text, &span, &mut excluded) {
            continue;
        }
        out.push(Reference {
            name: word.to_owned(),
            by,
            span,
        });
    }
    out
}

/// taxonomy-v3 (2.12): whether the word before `at` (skipping one `to`)
/// is a call word of the order construction (2.14): "call `setup`",
/// "a call to `heartbeat`".
fn called(ctx: &Context<'_>, text: &str, at: usize) -> bool {
    let Some(lexicon) = ctx.lexicon() else {
        return false;
    };
    let mut before = words_before(text, at);
    let mut word = before.next();
    if word.is_some_and(|w| w.eq_ignore_ascii_case("to")) {
        word = before.next();
    }
    word.is_some_and(|w| lexicon.constructions().is_call_word(&crate::text::lower(w)))
}

/// The first ASCII-case-insensitive occurrence of `needle` (which starts
/// with a letter) in `haystack`: a vectorised search for its first letter
/// in either case, then a comparison.
fn find_ascii_ci(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let first = needle.first()?;
    memchr::memchr2_iter(
        first.to_ascii_lowercase(),
        first.to_ascii_uppercase(),
        haystack,
    )
    .find(|&at| {
        haystack
            .get(at..at + needle.len())
            .is_some_and(|w| w.eq_ignore_ascii_case(needle))
    })
}

/// Whether a sentence ends after the character `c` at byte `i` of `text`
/// (2.8): a line break, or `.`, `!` or `?` followed by white space or the
/// end.
fn ends_sentence(text: &str, i: usize, c: char) -> bool {
    match c {
        '\n' | '\r' => true,
        '.' | '!' | '?' => text[i + c.len_utf8()..]
            .chars()
            .next()
            .is_none_or(char::is_whitespace),
        _ => false,
    }
}

/// The longest sentence kept as evidence (R10, R15), in characters.
const SENTENCE_CHARS: usize = 200;

/// A sentence as evidence shows it: trimmed, at most [`SENTENCE_CHARS`].
pub(crate) fn shown_sentence(text: &str, sentence: &Range<usize>) -> String {
    text[sentence.clone()]
        .trim()
        .chars()
        .take(SENTENCE_CHARS)
        .collect()
}

/// The references in `refs` (in text order) grouped by the sentence of
/// `text` (2.8) that holds them, in text order, each sentence once.
pub(crate) fn by_sentence<'r>(
    text: &str,
    refs: impl IntoIterator<Item = &'r Reference>,
) -> Vec<(Range<usize>, Vec<&'r Reference>)> {
    let mut out: Vec<(Range<usize>, Vec<&Reference>)> = Vec::new();
    for r in refs {
        let sentence = sentence_around(text, &r.span);
        match out.last_mut() {
            Some((last, named)) if *last == sentence => named.push(r),
            _ => out.push((sentence, vec![r])),
        }
    }
    out
}

/// The sentence of `text` (2.8) that holds `span`, found by looking only
/// around it: the same range [`sentences`] would give, at a cost that
/// follows the sentence, not the text.
pub(crate) fn sentence_around(text: &str, span: &Range<usize>) -> Range<usize> {
    // Every character that can end a sentence is ASCII, so its byte is
    // never part of another character: the bytes are searched directly.
    // A line break always ends one; `.`, `!`, `?` only before white space.
    let b = text.as_bytes();
    let ends_at = |i: usize| ends_sentence(text, i, char::from(b[i]));
    let line = memchr::memrchr2(b'\n', b'\r', &b[..span.start]);
    let floor = line.map_or(0, |l| l + 1);
    let mut hi = span.start;
    let start = loop {
        match memchr::memrchr3(b'.', b'!', b'?', &b[floor..hi]).map(|i| floor + i) {
            Some(i) if ends_at(i) => break i + 1,
            Some(i) => hi = i,
            None => break floor,
        }
    };
    // The sentence ends at the first end at or after the span's last byte.
    let from = span.start.max(span.end.saturating_sub(1));
    let line = memchr::memchr2(b'\n', b'\r', &b[from..]).map(|i| from + i);
    let limit = line.unwrap_or(b.len());
    let mut lo = from;
    let end = loop {
        match memchr::memchr3(b'.', b'!', b'?', &b[lo..limit]).map(|i| lo + i) {
            Some(i) if ends_at(i) => break i + 1,
            Some(i) => lo = i + 1,
            None => break line.map_or(b.len(), |l| l + 1),
        }
    };
    start..end
}

/// The sentences of `text` as byte ranges: split after `.`, `!` or `?`
/// followed by white space, and at line breaks.
#[cfg(test)]
pub(crate) fn sentences(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let end_here = match c {
            '\n' | '\r' => true,
            '.' | '!' | '?' => chars.peek().is_none_or(|(_, n)| n.is_whitespace()),
            _ => false,
        };
        if end_here {
            let end = i + c.len_utf8();
            if text[start..end].trim().chars().nth(1).is_some() {
                out.push(start..end);
            }
            start = end;
        }
    }
    if text[start..].trim().chars().nth(1).is_some() {
        out.push(start..text.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifier_shapes() {
        for w in [
            "send_email",
            "sendEmail",
            "mail.send_email",
            "getTinyImage",
            "x/get_it",
        ] {
            assert!(is_identifier_shaped(w), "{w}");
        }
        for w in [
            "search",
            "read-only",
            "e.g",
            "offset/length",
            "_private",
            "URL",
            "JSON",
            "MongoDB",
        ] {
            assert!(!is_identifier_shaped(w), "{w}");
        }
    }

    #[test]
    fn words_follow_the_pattern_leftmost_first() {
        let t = "9ab use mail.send_email, x-y- z/_q. a..b _x_";
        let got: Vec<&str> = words(t).map(|r| &t[r]).collect();
        assert_eq!(
            got,
            [
                "ab",
                "use",
                "mail.send_email",
                "x-y",
                "z/_q",
                "a",
                "b",
                "_x_"
            ]
        );
    }

    proptest::proptest! {
        #[test]
        fn shaped_words_are_the_shaped_ones_of_the_full_scan(
            t in "[a-zA-Z0-9_./\\- ()é`]{0,40}"
        ) {
            let full: Vec<Range<usize>> = words_shaped(&t)
                .filter(|(_, shaped)| *shaped)
                .map(|(span, _)| span)
                .collect();
            proptest::prop_assert_eq!(shaped_words(&t), full);
        }
    }

    #[test]
    fn the_scanner_agrees_with_the_shape_test() {
        let t = "send_email sendEmail MongoDB mail.send_email x-y_z a_ _b plain e.g";
        for (span, shaped) in words_shaped(t) {
            assert_eq!(
                shaped,
                is_identifier_shaped(&t[span.clone()]),
                "{}",
                &t[span]
            );
        }
    }

    #[test]
    fn a_sentence_around_a_span_is_the_sentence_that_holds_it() {
        let t = "Call x_y first. Then mcp://a/b. stop!\nNew line? yes mail.send_email works";
        for (needle, want) in [
            ("x_y", "Call x_y first."),
            ("mcp://a/b.", " Then mcp://a/b."),
            ("mail.send_email", " yes mail.send_email works"),
        ] {
            let at = t.find(needle).unwrap();
            let span = at..at + needle.len();
            let got = sentence_around(t, &span);
            assert_eq!(&t[got.clone()], want);
            assert!(sentences(t).contains(&got), "{needle}");
        }
    }

    /// The byte search of [`sentence_around`] against the definition read
    /// character by character (2.8), on generated texts and every span.
    #[test]
    fn sentence_around_agrees_with_a_character_scan() {
        fn by_chars(text: &str, span: &Range<usize>) -> Range<usize> {
            let start = text[..span.start]
                .char_indices()
                .rev()
                .find(|&(i, c)| ends_sentence(text, i, c))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let end = text[span.start..]
                .char_indices()
                .map(|(i, c)| (span.start + i, c))
                .find(|&(i, c)| i + c.len_utf8() >= span.end && ends_sentence(text, i, c))
                .map_or(text.len(), |(i, c)| i + c.len_utf8());
            start..end
        }
        let pieces = [
            "a", "é", ".", "!", "?", " ", "\n", "\r", "e.g", "ß", "\u{2003}", "x_y",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..3_000 {
            let mut text = String::new();
            for _ in 0..(seed % 14) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                text.push_str(pieces[(seed % pieces.len() as u64) as usize]);
            }
            let bounds: Vec<usize> = (0..=text.len())
                .filter(|&i| text.is_char_boundary(i))
                .collect();
            for (k, &a) in bounds.iter().enumerate() {
                for &b in &bounds[k..] {
                    assert_eq!(
                        sentence_around(&text, &(a..b)),
                        by_chars(&text, &(a..b)),
                        "{text:?} {a}..{b}"
                    );
                }
            }
        }
    }

    #[test]
    fn sentences_split_at_terminators_and_lines() {
        let t = "Call x_y first. Then stop!\nNew line? yes mail.send_email works";
        let got: Vec<&str> = sentences(t).into_iter().map(|r| t[r].trim()).collect();
        assert_eq!(
            got,
            [
                "Call x_y first.",
                "Then stop!",
                "New line?",
                "yes mail.send_email works"
            ]
        );
    }
}
