//! R18 — HIGH — Sensitive capability described (taxonomy-v3 4.18).
#![doc = include_str!("r18_sensitive_capability.md")]

use super::{newly_present_constructions, newly_present_phrases_where, Context, Found};
use crate::constructions::{plain_words, Kind};
use crate::lexicon::Category;
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r18_sensitive_capability.md");

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found =
        newly_present_phrases_where(ctx, Category::Sensitive, RuleId::R18, |lowered, start| {
            !forbidden(lowered, start)
        });
    found.extend(newly_present_constructions(
        ctx,
        &[Kind::Outbound, Kind::Code, Kind::Erase],
        RuleId::R18,
    ));
    found
}

/// The words that forbid what follows them (draft 5).
const PROHIBITIONS: [&str; 7] = ["not", "never", "don't", "dont", "avoid", "no", "nor"];

/// Whether one of the three plain words (2.14) before `start` in the
/// lowered text forbids what follows (draft 5): "do not put passwords in
/// the filter" warns against secret material; it does not reach for it.
fn forbidden(lowered: &str, start: usize) -> bool {
    // The words just before `start`, read from a window that grows until
    // it holds a fourth word (so the three after it are whole) or the
    // whole text: a phrase late in a megabyte field costs no more.
    let mut width = 64;
    loop {
        let mut from = start.saturating_sub(width);
        while !lowered.is_char_boundary(from) {
            from -= 1;
        }
        let words: Vec<&str> = plain_words(&lowered[from..start]).collect();
        if words.len() > 3 || from == 0 {
            return words.iter().rev().take(3).any(|w| PROHIBITIONS.contains(w));
        }
        width *= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::forbidden;

    #[test]
    fn a_prohibition_counts_among_the_three_words_before() {
        let text = "do not put passwords in it";
        assert!(forbidden(text, text.find("passwords").unwrap()));
        let text = "never paste api keys";
        assert!(forbidden(text, text.find("api keys").unwrap()));
        let text = "do not worry, it also copies your .env file";
        assert!(!forbidden(text, text.find(".env").unwrap()));
        let text = "reads the ssh key";
        assert!(!forbidden(text, text.find("ssh key").unwrap()));
        // Far into a long text, with long words and multi-byte ones.
        let text = format!("{} never é{} tokens", "word ".repeat(5000), "x".repeat(300));
        assert!(forbidden(&text, text.find("tokens").unwrap()));
        let text = format!("not {} a b c tokens", "é".repeat(100));
        assert!(!forbidden(&text, text.find("tokens").unwrap()));
    }
}
