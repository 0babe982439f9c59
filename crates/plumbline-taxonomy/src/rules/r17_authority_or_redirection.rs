//! R17 — HIGH — Authority claim or silent redirection (taxonomy-v3 4.17).
#![doc = include_str!("r17_authority_or_redirection.md")]

use super::{newly_present, Context, Found};
use crate::constructions::{Constructions, Kind};
use crate::evidence::{Detail, Evidence};
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r17_authority_or_redirection.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = newly_present(
        ctx,
        Category::Authority,
        &[
            Kind::Ignored,
            Kind::Substitution,
            Kind::Notice,
            Kind::Replacement,
        ],
        RuleId::R17,
    );
    let Some(lexicon) = ctx.lexicon() else {
        return found;
    };
    let constructions = lexicon.constructions();
    for f in ctx.changed_fields() {
        let new = authority_tags(constructions, f.new);
        if new.is_empty() {
            continue;
        }
        let old: rustc_hash::FxHashSet<String> = authority_tags(constructions, f.old)
            .into_iter()
            .map(|(_, words)| words)
            .collect();
        let mut seen = rustc_hash::FxHashSet::default();
        for (written, words) in new {
            // Once per tag (its closing tag is the same one).
            if old.contains(&words) || !seen.insert(words) {
                continue;
            }
            found.push(Evidence {
                rule: RuleId::R17,
                pointer: f.pointer(),
                detail: Detail::Phrase {
                    phrase: "a tag naming an authority".to_owned(),
                    text: written.to_owned(),
                },
            });
        }
    }
    found
}

/// The longest tag name read (draft 5): a tag is short.
const MAX_TAG_NAME: usize = 40;

/// The *authority tags* of `text` (`docs/taxonomy-v3.md` 4.17, draft 5),
/// each as written and as its name words: `<` then a name of ASCII
/// letters, digits, `-` and `_`, then `>`; or `[` then a name that may
/// also hold spaces, then `]` (at most 40 characters, an optional `/`
/// after the opening one). The name's words (2.11) must all be
/// `tag.authority` or `tag.modifier` words, at least one of them
/// `tag.authority`: `<admin-policy>`, `[SYSTEM MESSAGE]`; not
/// `<PolicyDocument>`, `<company>`.
fn authority_tags<'t>(c: &Constructions, text: &'t str) -> Vec<(&'t str, String)> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let (authority, modifier) = c.tag_bits();
    for at in memchr::memchr2_iter(b'<', b'[', bytes) {
        let close = match bytes[at] {
            b'<' => b'>',
            b'[' => b']',
            _ => continue,
        };
        let start = at + 1 + usize::from(bytes.get(at + 1) == Some(&b'/'));
        let name_len = bytes[start.min(bytes.len())..]
            .iter()
            .take(MAX_TAG_NAME + 1)
            .take_while(|&&b| {
                b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (close == b']' && b == b' ')
            })
            .count();
        if name_len == 0 || name_len > MAX_TAG_NAME || bytes.get(start + name_len) != Some(&close) {
            continue;
        }
        let name = &bytes[start..start + name_len];
        // Most bracketed text ("[FILE]", "[see the docs]") fails on its
        // first word, looked up without building the name words.
        let lead = name
            .iter()
            .take_while(|b| !b.is_ascii_alphanumeric())
            .count();
        let word = &name[lead..];
        let first_len = (0..word.len())
            .find(|&i| {
                !word[i].is_ascii_alphanumeric()
                    || (i > 0 && word[i].is_ascii_uppercase() && word[i - 1].is_ascii_lowercase())
            })
            .unwrap_or(word.len());
        let mut first = [0u8; MAX_TAG_NAME];
        for (lowered, b) in first.iter_mut().zip(&word[..first_len]) {
            *lowered = b.to_ascii_lowercase();
        }
        let first = std::str::from_utf8(&first[..first_len]).unwrap_or_default();
        if c.word_bits(first) & (authority | modifier) == 0 {
            continue;
        }
        let words = super::name_words(&text[start..start + name_len]);
        let bits = || words.split(' ').map(|w| c.word_bits(w));
        if bits().all(|b| b & (authority | modifier) != 0) && bits().any(|b| b & authority != 0) {
            out.push((&text[at..=start + name_len], words));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constructions::CONSTRUCTIONS_V3;

    fn tags(text: &str) -> Vec<String> {
        let c = Constructions::parse(CONSTRUCTIONS_V3);
        authority_tags(&c, text)
            .into_iter()
            .map(|(written, _)| written.to_owned())
            .collect()
    }

    #[test]
    fn a_tag_is_a_short_name_of_authority_words_in_brackets() {
        assert_eq!(
            tags("x <admin-policy>y</admin-policy>"),
            ["<admin-policy>", "</admin-policy>"]
        );
        assert_eq!(tags("[SYSTEM MESSAGE] hi"), ["[SYSTEM MESSAGE]"]);
        assert_eq!(tags("<SystemNotice>"), ["<SystemNotice>"]);
        assert_eq!(tags("[ SYSTEM MESSAGE ]"), ["[ SYSTEM MESSAGE ]"]);
        assert_eq!(tags("<_system>"), ["<_system>"]);
        // A modifier alone, another word, spaces inside `<…>`, no closing
        // character, or a name past forty characters: no tag.
        assert!(tags("<company>").is_empty());
        assert!(tags("<PolicyDocument>").is_empty());
        assert!(tags("<system notice>").is_empty());
        assert!(tags("<system").is_empty());
        assert!(tags(&format!("[system {}]", "notice ".repeat(6))).is_empty());
        assert!(tags("[link text](https://x) and [FILE]").is_empty());
    }
}
