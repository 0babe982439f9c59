//! Making server-supplied text safe to print in a terminal.
//!
//! A tool description is written by the server, which may be hostile: raw
//! ANSI escapes could rewrite the screen, and bidi or invisible code points
//! could hide exactly what the report is trying to show. Everything that is
//! not plainly visible is printed as a Rust-style `\u{…}` escape instead.

/// True when `c` must not reach a terminal raw: controls (C0, DEL, C1),
/// the invisible and bidi code points of R01, and other format characters
/// (general category Cf), line and paragraph separators, and unassigned or
/// private-use code points that a terminal could render unpredictably.
pub fn needs_escape(c: char) -> bool {
    use unicode_general_category::{get_general_category, GeneralCategory as G};
    if c == '\n' || c == '\t' {
        return false;
    }
    matches!(
        get_general_category(c),
        G::Control
            | G::Format
            | G::LineSeparator
            | G::ParagraphSeparator
            | G::PrivateUse
            | G::Surrogate
            | G::Unassigned
    ) || c == '\u{00AD}'
        || c == '\u{034F}'
        || c == '\u{115F}'
        || c == '\u{1160}'
        || c == '\u{3164}'
        || c == '\u{FFA0}'
        || ('\u{FE00}'..='\u{FE0F}').contains(&c)
        || ('\u{E0100}'..='\u{E01EF}').contains(&c)
}

/// `json` (a JSON text) with every character [`needs_escape`] names written
/// as a JSON `\uXXXX` escape (a surrogate pair past U+FFFF). Outside
/// strings JSON text is ASCII, so this only changes how strings are spelt,
/// never what they hold: a reviewer's viewer shows `\u202e`, not a text
/// silently reversed (Trojan Source).
pub fn escape_hidden_in_json(json: &str) -> std::borrow::Cow<'_, str> {
    use std::fmt::Write as _;
    if !json.chars().any(needs_escape) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if needs_escape(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Escapes one character for an error message: printable characters are
/// quoted as they are, everything else as `\u{…}`.
pub fn escape_char_for_message(c: char) -> String {
    if needs_escape(c) || c == '\n' || c == '\t' {
        format!("\\u{{{:x}}}", c as u32)
    } else {
        format!("'{c}'")
    }
}

/// Returns `s` with every character that [`needs_escape`] escaped as
/// `\u{…}`; newlines and tabs are kept when `keep_newlines` is set (for
/// multi-line reports), escaped otherwise (for one-line fields).
pub fn for_terminal(s: &str, keep_newlines: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        let escape = needs_escape(c) || (!keep_newlines && (c == '\n' || c == '\t'));
        if escape {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// At most `max` characters of `bytes`, lossily decoded and sanitised.
pub fn excerpt(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(max * 4)]);
    let cut: String = text.chars().take(max).collect();
    let mut out = for_terminal(&cut, false);
    if cut.len() < text.len() || bytes.len() > max * 4 {
        out.push('…');
    }
    out
}

/// `word` as one POSIX shell word: as it is when it holds only characters
/// no shell treats specially, else in single quotes (a quote inside
/// written `'\''`).
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'_' | b'-' | b'.' | b'/' | b':' | b'@' | b'+' | b',')
        });
    if plain && !word.starts_with('-') {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn hidden_characters_in_json_become_escapes_and_the_value_stays() {
        let value = serde_json::json!({"t": "a\u{202e}b\u{9b}c\u{e0041}d\u{2066}", "n": "plain é"});
        let raw = serde_json::to_string(&value).unwrap();
        assert!(raw.contains('\u{202e}'));
        let safe = escape_hidden_in_json(&raw);
        assert!(safe.is_ascii() || safe.contains('é'));
        assert!(!safe.chars().any(needs_escape), "{safe}");
        assert!(
            safe.contains("\\u202e") && safe.contains("\\u009b") && safe.contains("\\udb40\\udc41"),
            "{safe}"
        );
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, value);
        assert!(matches!(
            escape_hidden_in_json("{\"a\":\"b\"}"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    use super::*;

    #[test]
    fn ansi_escapes_bidi_and_invisibles_are_shown_escaped() {
        assert_eq!(
            for_terminal("a\u{1b}[31mred\u{202e}x\u{200b}y\u{ad}", true),
            "a\\u{1b}[31mred\\u{202e}x\\u{200b}y\\u{ad}"
        );
        assert_eq!(for_terminal("line\nnext\r", true), "line\nnext\\u{d}");
        assert_eq!(for_terminal("line\nnext", false), "line\\u{a}next");
        assert_eq!(for_terminal("café ✓ 日本", false), "café ✓ 日本");
        assert_eq!(for_terminal("\u{9b}2J\u{7f}", false), "\\u{9b}2J\\u{7f}");
    }
}
