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

/// taxonomy-v2's further invisible code points (`docs/taxonomy-v2.md`
/// 4.1): what a terminal or a renderer hides or acts on. Tag characters and
/// the variation selectors supplement count as one element each (a hidden
/// message is many of them).
pub fn invisible_name_v2(c: char) -> Option<&'static str> {
    if let Some(name) = invisible_name(c) {
        return Some(name);
    }
    Some(match c {
        '\u{7}' => "BELL",
        '\u{8}' => "BACKSPACE",
        '\u{1B}' => "ESCAPE",
        '\u{7F}' => "DELETE",
        '\u{9B}' => "CONTROL SEQUENCE INTRODUCER",
        '\u{9D}' => "OPERATING SYSTEM COMMAND",
        '\u{0}'..='\u{1F}' if !matches!(c, '\t' | '\n' | '\r') => "C0 CONTROL",
        '\u{80}'..='\u{9F}' => "C1 CONTROL",
        '\u{115F}' => "HANGUL CHOSEONG FILLER",
        '\u{1160}' => "HANGUL JUNGSEONG FILLER",
        '\u{180E}' => "MONGOLIAN VOWEL SEPARATOR",
        '\u{2060}' => "WORD JOINER",
        '\u{2061}'..='\u{2064}' => "INVISIBLE OPERATOR",
        '\u{206A}'..='\u{206F}' => "DEPRECATED FORMAT CHARACTER",
        '\u{3164}' => "HANGUL FILLER",
        '\u{FFA0}' => "HALFWIDTH HANGUL FILLER",
        '\u{FFF9}'..='\u{FFFB}' => "INTERLINEAR ANNOTATION",
        '\u{E0000}'..='\u{E007F}' => "TAG CHARACTERS",
        '\u{E0100}'..='\u{E01EF}' => "VARIATION SELECTORS SUPPLEMENT",
        _ => return None,
    })
}

/// The v2 element a code point counts as: itself, or the first code point
/// of its block for tags and the variation selectors supplement.
fn v2_element(c: char) -> Option<(char, &'static str)> {
    let name = invisible_name_v2(c)?;
    let element = match c {
        '\u{E0000}'..='\u{E007F}' => '\u{E0000}',
        '\u{E0100}'..='\u{E01EF}' => '\u{E0100}',
        _ => c,
    };
    Some((element, name))
}

/// The v2 elements of `s`, sorted, each once.
fn invisible_set_v2(s: &str) -> Vec<(char, &'static str)> {
    let b = s.as_bytes();
    // ASCII controls, or a lead byte of any listed non-ASCII code point.
    let suspect = |x: &u8| {
        (*x < 0x20 && !matches!(x, b'\t' | b'\n' | b'\r'))
            || matches!(x, 0x7F | 0xC2 | 0xE1 | 0xE2 | 0xE3 | 0xEF | 0xF3)
    };
    // Without early exit per byte, so that the test vectorises: most
    // texts hold none of these bytes and are read to the end anyway.
    if !b
        .chunks(64)
        .any(|chunk| chunk.iter().fold(false, |seen, x| seen | suspect(x)))
    {
        return Vec::new();
    }
    // Decode only where a suspect byte starts a character: lead bytes never
    // occur inside another character's encoding.
    let mut set: Vec<(char, &'static str)> = b
        .iter()
        .enumerate()
        .filter(|(_, x)| suspect(x))
        .filter_map(|(i, _)| s.get(i..).and_then(|rest| rest.chars().next()))
        .filter_map(v2_element)
        .collect();
    set.sort_unstable();
    set.dedup();
    set
}

fn check_v2(ctx: &Context<'_>) -> Found {
    let mut found = Vec::new();
    for f in ctx.changed_fields() {
        let new = invisible_set_v2(f.new);
        if !new.is_empty() {
            let old = invisible_set_v2(f.old);
            for (c, name) in new {
                if old.iter().any(|(o, _)| *o == c) {
                    continue;
                }
                found.push(Evidence {
                    rule: RuleId::R01,
                    pointer: f.pointer(),
                    detail: Detail::InvisibleCodePoint {
                        code_point: c,
                        name,
                    },
                });
            }
        }
        // taxonomy-v3 reads `<!--` as wording (R14), not as a payload.
        if ctx.taxonomy == crate::taxonomy::Taxonomy::V2
            && f.new.contains(COMMENT_MARKER)
            && !f.old.contains(COMMENT_MARKER)
        {
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

pub(crate) fn check(ctx: &Context<'_>) -> Found {
    if ctx.is_v2() {
        return check_v2(ctx);
    }
    let mut found = Vec::new();
    for f in ctx.changed_fields() {
        let new_only = invisible_set(f.new) & !invisible_set(f.old);
        for (i, (c, name)) in INVISIBLE.iter().enumerate() {
            if new_only & (1 << i) != 0 {
                found.push(Evidence {
                    rule: RuleId::R01,
                    pointer: f.pointer(),
                    detail: Detail::InvisibleCodePoint {
                        code_point: *c,
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

    #[test]
    fn v2_adds_controls_fillers_and_tags_and_keeps_v1s() {
        let got = invisible_set_v2("a\u{1b}[31mb\u{9b}c\u{E0041}\u{E0042}\u{200B}\t\n\r\u{FE0F}");
        let names: Vec<&str> = got.iter().map(|(_, n)| *n).collect();
        assert_eq!(
            names,
            [
                "ESCAPE",
                "CONTROL SEQUENCE INTRODUCER",
                "ZERO WIDTH SPACE",
                "TAG CHARACTERS"
            ]
        );
        assert!(
            invisible_set_v2("plain text, tabs\tand\nlines, emoji \u{2764}\u{FE0F}").is_empty()
        );
        for (c, _) in INVISIBLE {
            assert!(invisible_name_v2(c).is_some());
        }
    }
}
