//! R01 — CRITICAL — Invisible payload introduced (spec 4.1, C12).
#![doc = include_str!("r01_invisible_payload.md")]

use super::{Context, Found};
use crate::evidence::{Detail, Evidence};
use crate::severity::RuleId;

pub const DOC: &str = include_str!("r01_invisible_payload.md");

/// The invisible and bidi code points of spec 4.1, with their names.
pub const INVISIBLE: [(char, &str); 16] = [
    ('\u{00AD}', "SOFT HYPHEN"),
    ('\u{200B}', "ZERO WIDTH SPACE"),
    ('\u{200C}', "ZERO WIDTH NON-JOINER"),
    ('\u{200D}', "ZERO WIDTH JOINER"),
    ('\u{200E}', "LEFT-TO-RIGHT MARK"),
    ('\u{200F}', "RIGHT-TO-LEFT MARK"),
    ('\u{202A}', "LEFT-TO-RIGHT EMBEDDING"),
    ('\u{202B}', "RIGHT-TO-LEFT EMBEDDING"),
    ('\u{202C}', "POP DIRECTIONAL FORMATTING"),
    ('\u{202D}', "LEFT-TO-RIGHT OVERRIDE"),
    ('\u{202E}', "RIGHT-TO-LEFT OVERRIDE"),
    ('\u{2066}', "LEFT-TO-RIGHT ISOLATE"),
    ('\u{2067}', "RIGHT-TO-LEFT ISOLATE"),
    ('\u{2068}', "FIRST STRONG ISOLATE"),
    ('\u{2069}', "POP DIRECTIONAL ISOLATE"),
    ('\u{FEFF}', "ZERO WIDTH NO-BREAK SPACE"),
];

/// The HTML/XML comment marker, matched case-sensitively.
pub const COMMENT_MARKER: &str = "<!--";

/// The name of `c` if it is one of the R01 invisible code points.
pub fn invisible_name(c: char) -> Option<&'static str> {
    INVISIBLE.iter().find(|(i, _)| *i == c).map(|(_, n)| *n)
}

/// Bit `i` is set when `INVISIBLE[i]` occurs in `s`.
fn invisible_set(s: &str) -> u16 {
    if s.is_ascii() {
        return 0;
    }
    let mut set = 0u16;
    for c in s.chars() {
        if let Some(i) = INVISIBLE.iter().position(|(x, _)| *x == c) {
            set |= 1 << i;
        }
    }
    set
}

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    for f in ctx.changed_fields() {
        let new_only = invisible_set(f.new) & !invisible_set(f.old);
        for (i, (c, name)) in INVISIBLE.iter().enumerate() {
            if new_only & (1 << i) != 0 {
                found.push(Evidence {
                    rule: RuleId::R01,
                    pointer: f.pointer.clone(),
                    detail: Detail::InvisibleCodePoint {
                        code_point: format!("U+{:04X}", *c as u32),
                        name,
                    },
                });
            }
        }
        if f.new.contains(COMMENT_MARKER) && !f.old.contains(COMMENT_MARKER) {
            found.push(Evidence {
                rule: RuleId::R01,
                pointer: f.pointer.clone(),
                detail: Detail::CommentMarker {
                    text: COMMENT_MARKER.to_owned(),
                },
            });
        }
    }
    found
}
