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

use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::Context;
use crate::evidence::ReferenceBy;
use crate::json::Value;
use crate::patterns::r03_hits_v2;

/// A word that may name a tool: identifier characters, optionally joined
/// by `.`, `/` or `-` to more of them.
static WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[A-Za-z_][A-Za-z0-9_]*(?:[./-][A-Za-z0-9_]+)*")
        .unwrap_or_else(|e| panic!("the reference word pattern: {e}"))
});

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
    names: HashSet<&'a str>,
}

fn schema_vocabulary<'a>(v: &'a Value, names: &mut HashSet<&'a str>, depth: usize) {
    // Bounded like the parser; a schema is far shallower.
    if depth > crate::json::MAX_DEPTH {
        return;
    }
    match v {
        Value::Object(o) => {
            for (k, item) in o.iter() {
                match (k.as_str(), item) {
                    ("properties", Value::Object(props)) => {
                        names.extend(props.keys().map(String::as_str));
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
        let mut names = HashSet::new();
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

/// The words before `at`, nearest first, lowercased, without wrappers.
fn words_before(text: &str, at: usize) -> impl Iterator<Item = String> + '_ {
    text[..at]
        .rsplit(char::is_whitespace)
        .map(|w| w.trim_matches(is_wrapper).to_ascii_lowercase())
        .filter(|w| !w.is_empty())
}

/// The words after `at`, nearest first, lowercased, without wrappers and
/// trailing punctuation.
fn words_after(text: &str, at: usize) -> impl Iterator<Item = String> + '_ {
    text[at..]
        .split(char::is_whitespace)
        .map(|w| {
            w.trim_matches(is_wrapper)
                .trim_end_matches([',', '.', ';', ':', '!', '?'])
                .to_ascii_lowercase()
        })
        .filter(|w| !w.is_empty())
}

/// Whether the text around `span` treats the word there as a tool.
fn in_tool_context(text: &str, span: &Range<usize>) -> bool {
    if text[span.end..].starts_with('(') {
        return true;
    }
    let mut before =
        words_before(text, span.start).skip_while(|w| matches!(w.as_str(), "the" | "a" | "an"));
    if before.next().is_some_and(|w| BEFORE.contains(&w.as_str())) {
        return true;
    }
    let mut after = words_after(text, span.end);
    match after.next() {
        Some(w) if AFTER.contains(&w.as_str()) => true,
        Some(w) if matches!(w.as_str(), "is" | "was" | "gets" | "get") => {
            after.next().is_some_and(|w| AFTER_IS.contains(&w.as_str()))
        }
        _ => false,
    }
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
    // Most texts name nothing: a cheap test before the word scan.
    let foreign_possible = ctx.inventory.foreign().next().is_some();
    if !foreign_possible && !bytes.iter().any(|b| *b == b'_' || b.is_ascii_uppercase()) {
        return out;
    }
    let own = ctx.own_names();
    let mut excluded: Option<Vec<Range<usize>>> = None;
    for m in WORD.find_iter(text) {
        let word = m.as_str();
        // A word continuing a longer one (`x.y` cut at a non-word) is not
        // a name of its own.
        let before = text[..m.start()].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || matches!(c, '.' | '/' | '-' | '@')) {
            continue;
        }
        let last = last_part(word);
        // `firecrawl_research_*` names the siblings that start so.
        let glob = text[m.end()..].starts_with('*');
        if glob && ctx.inventory.has_sibling_starting_with(word) {
            continue;
        }
        if own.contains(word)
            || own.contains(last)
            || is_sibling(ctx, word)
            || is_sibling(ctx, last)
        {
            continue;
        }
        let shaped = is_identifier_shaped(word);
        let foreign = ctx.inventory.is_foreign(word) || ctx.inventory.is_foreign(last);
        if !shaped && !foreign {
            continue;
        }
        let span = m.range();
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
        let excluded = excluded.get_or_insert_with(|| {
            let mut hits = Vec::new();
            r03_hits_v2(text, &mut hits);
            hits.into_iter().map(|h| h.span).collect()
        });
        if excluded
            .iter()
            .any(|r| r.start <= span.start && span.end <= r.end)
        {
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

fn find_ascii_ci(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle))
}

/// The sentences of `text` as byte ranges: split after `.`, `!` or `?`
/// followed by white space, and at line breaks.
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
            if text[start..end].trim().len() > 1 {
                out.push(start..end);
            }
            start = end;
        }
    }
    if text[start..].trim().len() > 1 {
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
