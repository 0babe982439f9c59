//! R11 — HIGH — Self-promotion aimed at the model's choice (taxonomy-v2 4.11).
#![doc = include_str!("r11_self_promotion.md")]

use super::{newly_present, Context, Found};
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r11_self_promotion.md");

/// Words that promote when they name a tool (taxonomy-v3 4.11).
pub const NAME_WORDS: [&str; 18] = [
    "best",
    "top",
    "premium",
    "ultimate",
    "official",
    "recommended",
    "preferred",
    "trusted",
    "verified",
    "certified",
    "superior",
    "optimal",
    "ultra",
    "enhanced",
    "improved",
    "pro",
    "perfect",
    "leading",
];

/// Nouns a count claims of people or popularity (taxonomy-v3 4.11).
pub const COUNTED: [&str; 12] = [
    "users",
    "developers",
    "customers",
    "companies",
    "teams",
    "organizations",
    "organisations",
    "businesses",
    "stars",
    "downloads",
    "installs",
    "installations",
];

/// The count claims of a text: a number (digits, with `,` `.` `+` `k`
/// `m` attached, or followed by `thousand` or `million`) followed, at
/// most one word later, by a word of [`COUNTED`], each as the lowered
/// words from the number to the noun; and each rank claim, a word that is
/// `#1` once `(` `)` `.` `,` `;` `:` `!` `?` around it are removed
/// (taxonomy-v3 draft 2).
pub fn count_claims(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Most texts hold no digit, and a claim starts with one.
    if !text.bytes().any(|b| b.is_ascii_digit()) {
        return out;
    }
    let clean = |w: &str| {
        crate::text::lower(w)
            .trim_matches(|c: char| !c.is_alphanumeric() && c != '+')
            .to_owned()
    };
    let is_number = |w: &str| {
        w.starts_with(|c: char| c.is_ascii_digit())
            && w.chars()
                .all(|c| c.is_ascii_digit() || matches!(c, ',' | '.' | '+' | 'k' | 'm'))
    };
    // Words as `text::words` gives them (runs without White_Space), read
    // lazily: only the words that hold a digit, and the few after each.
    let mut from = 0;
    // A number's cleaned form starts with a digit, so its word holds one.
    while let Some(d) = text.as_bytes()[from..].iter().position(u8::is_ascii_digit) {
        let at = from + d;
        let start = text[..at]
            .char_indices()
            .rev()
            .find(|(_, c)| c.is_whitespace())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = text[at..]
            .find(char::is_whitespace)
            .map_or(text.len(), |i| at + i);
        from = end;
        // A rank claim: the word `#1`, without the punctuation around it.
        if text[start..end].trim_matches(['(', ')', '.', ',', ';', ':', '!', '?']) == "#1" {
            out.push("#1".to_owned());
            continue;
        }
        let first = clean(&text[start..end]);
        if !is_number(&first) {
            continue;
        }
        let mut next = text[end..]
            .split(char::is_whitespace)
            .filter(|w| !w.is_empty())
            .map(clean)
            .peekable();
        let mut claim = vec![first];
        if let Some(scale) =
            next.next_if(|w| matches!(w.as_str(), "thousand" | "million" | "billion"))
        {
            claim.push(scale);
        }
        for w in next.take(2) {
            let counted = COUNTED.contains(&w.as_str());
            claim.push(w);
            if counted {
                out.push(claim.join(" "));
                break;
            }
        }
    }
    out
}

/// Whether `lowered` (a text lowercased per C8) can hold a count claim:
/// it has a digit and the letters of a [`COUNTED`] noun. A claim's noun,
/// lowercased, is part of the lowercased text (C8 lowercases code point
/// by code point).
fn may_hold_claim(lowered: &str) -> bool {
    use memchr::memmem::Finder;
    use std::sync::LazyLock;
    // Built once: `str::contains` would build a searcher per call.
    static NEEDLES: LazyLock<Vec<Finder<'static>>> = LazyLock::new(|| {
        std::iter::once("#1")
            .chain(COUNTED)
            .map(Finder::new)
            .collect()
    });
    let bytes = lowered.as_bytes();
    crate::text::has_ascii_digit(bytes) && NEEDLES.iter().any(|n| n.find(bytes).is_some())
}

fn check_v3(ctx: &Context<'_>, found: &mut Found) {
    use crate::evidence::{Detail, Evidence};
    use crate::json::Value;
    for f in ctx.changed_fields() {
        // A claim holds a counted noun: most fields hold none, and then
        // neither side needs reading word by word.
        if !may_hold_claim(&f.new_scan(ctx.phrases).lowered) {
            continue;
        }
        let new = count_claims(f.new);
        if new.is_empty() {
            continue;
        }
        let old = count_claims(f.old);
        for claim in new {
            if !old.contains(&claim) {
                found.push(Evidence {
                    rule: RuleId::R11,
                    pointer: f.pointer(),
                    detail: Detail::Phrase {
                        phrase: "a count of users, stars or downloads".to_owned(),
                        text: claim,
                    },
                });
            }
        }
    }
    let old = ctx.old.get("name").and_then(Value::as_str);
    let new = ctx.new.get("name").and_then(Value::as_str);
    // An unchanged name gains no word.
    if old == new {
        return;
    }
    let new = new.map(super::name_words).unwrap_or_default();
    let old = old.map(super::name_words).unwrap_or_default();
    for w in NAME_WORDS {
        let has = |s: &str| s.split(' ').any(|x| x == w);
        if has(&new) && !has(&old) {
            found.push(Evidence {
                rule: RuleId::R11,
                pointer: "/name".to_owned(),
                detail: Detail::Phrase {
                    phrase: format!("{w} (in the tool's name)"),
                    text: w.to_owned(),
                },
            });
        }
    }
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    use crate::constructions::Kind;
    let mut found = newly_present(
        ctx,
        Category::Promotion,
        &[Kind::Preference, Kind::Superlative, Kind::Comparison],
        RuleId::R11,
    );
    if ctx.taxonomy == crate::taxonomy::Taxonomy::V3 {
        check_v3(ctx, &mut found);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::count_claims;

    #[test]
    fn only_a_text_with_a_digit_and_a_counted_noun_may_hold_a_claim() {
        assert!(super::may_hold_claim("used by 40,000 developers"));
        assert!(!super::may_hold_claim("used by many developers"));
        assert!(!super::may_hold_claim("returns 40 results"));
    }

    #[test]
    fn count_claims_need_a_number_then_a_counted_noun() {
        assert_eq!(
            count_claims("Used by 40,000 developers worldwide."),
            ["40,000 developers"]
        );
        assert_eq!(count_claims("10k+ GitHub stars"), ["10k+ github stars"]);
        assert_eq!(
            count_claims("3 million active users"),
            ["3 million active users"]
        );
        assert!(count_claims("Returns up to 100 results per page.").is_empty());
        assert!(count_claims("users: 5").is_empty());
        // Words end at any White_Space, ASCII or not.
        assert_eq!(
            count_claims("Trusted by 40,000\u{a0}developers\u{b}and 2m\u{2003}downloads"),
            ["40,000 developers", "2m downloads"]
        );
        assert_eq!(count_claims("über 5 Mio users"), ["5 mio users"]);
        assert!(count_claims("").is_empty());
    }
}
