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
///
/// Every invisible code point is encoded with a lead byte of 0xC2 (U+00AD),
/// 0xE2 (U+200B–U+2069) or 0xEF (U+FEFF), and lead bytes never occur
/// inside another character's encoding, so a vectorised byte search finds
/// the few places worth decoding.
fn invisible_set(s: &str) -> u16 {
    let mut set = 0u16;
    for i in memchr::memchr3_iter(0xC2, 0xE2, 0xEF, s.as_bytes()) {
        let Some(c) = s.get(i..).and_then(|rest| rest.chars().next()) else {
            continue;
        };
        if let Some(index) = INVISIBLE.iter().position(|(x, _)| *x == c) {
            set |= 1 << index;
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
                    pointer: f.pointer(),
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
                pointer: f.pointer(),
                detail: Detail::CommentMarker {
                    text: COMMENT_MARKER.to_owned(),
                },
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_invisible_code_point_is_found_and_its_neighbours_are_not() {
        for (i, (c, _)) in INVISIBLE.iter().enumerate() {
            assert_eq!(
                invisible_set(&format!("a{c}b")),
                1 << i,
                "U+{:04X}",
                *c as u32
            );
            for n in [*c as u32 - 1, *c as u32 + 1] {
                let n = char::from_u32(n).unwrap_or('x');
                if invisible_name(n).is_none() {
                    assert_eq!(invisible_set(&format!("é{n}€")), 0, "U+{:04X}", n as u32);
                }
            }
        }
        assert_eq!(invisible_set("plain ascii"), 0);
        assert_eq!(invisible_set("\u{FEFF}\u{AD}"), (1 << 15) | 1);
    }
}
