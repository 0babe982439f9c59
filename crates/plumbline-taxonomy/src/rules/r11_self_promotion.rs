//! R11 — HIGH — Self-promotion aimed at the model's choice (taxonomy-v2 4.11).
#![doc = include_str!("r11_self_promotion.md")]

use super::{newly_present_phrases, Context, Found};
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
/// most one word later, by a word of [`COUNTED`]. Each as the lowered
/// words from the number to the noun.
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
    for raw in crate::text::words(text) {
        // A number's cleaned form starts with a digit, so its raw word
        // holds one; only such words are cleaned, and only their next
        // three words are read.
        if !raw.bytes().any(|b| b.is_ascii_digit()) {
            continue;
        }
        let first = clean(raw);
        if !is_number(&first) {
            continue;
        }
        // `raw` is a slice of `text`: the words after it start there.
        let end = raw.as_ptr() as usize - text.as_ptr() as usize + raw.len();
        let mut next = crate::text::words(&text[end..]).map(clean).peekable();
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

fn check_v3(ctx: &Context<'_>, found: &mut Found) {
    use crate::evidence::{Detail, Evidence};
    use crate::json::Value;
    for f in ctx.changed_fields() {
        let old = count_claims(f.old);
        for claim in count_claims(f.new) {
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
    let name_words = |t: &Value| {
        t.get("name")
            .and_then(Value::as_str)
            .map(super::name_words)
            .unwrap_or_default()
    };
    let new = name_words(ctx.new);
    let old = name_words(ctx.old);
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
    let mut found = newly_present_phrases(ctx, Category::Promotion, RuleId::R11);
    if ctx.taxonomy == crate::taxonomy::Taxonomy::V3 {
        check_v3(ctx, &mut found);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::count_claims;

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
        assert!(count_claims("").is_empty());
    }
}
