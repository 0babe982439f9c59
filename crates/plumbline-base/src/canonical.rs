//! RFC 8785 JSON Canonicalization Scheme (JCS) for one tool.
//!
//! A tool version is identified by the SHA-256 of its canonical form, so two
//! servers (or two releases of one server) that send the same tool with
//! different white space, key order or escapes share one version. The input
//! is read with [`crate::json::parse_tool`], the reader the
//! classifier uses, so "the same tool" means the same thing in the store and
//! in a grade: the last duplicate key wins, numbers are doubles, lone
//! surrogates are U+FFFD and nesting is bounded (taxonomy-v1 C1–C3).
//!
//! The output follows RFC 8785 section 3.2:
//!
//! - no white space between tokens;
//! - object members sorted by their keys as arrays of UTF-16 code units
//!   (section 3.2.3), which differs from UTF-8 byte order for keys mixing
//!   supplementary-plane characters with characters in U+E000..U+FFFF;
//! - strings escaped as ECMAScript's `JSON.stringify` does: `\"`, `\\`,
//!   `\b`, `\f`, `\n`, `\r`, `\t`, the other C0 controls as `\u00xx` in
//!   lowercase hex, everything else as literal UTF-8;
//! - numbers as ECMAScript's `Number.prototype.toString` writes them
//!   (section 3.2.2.3), with `-0` written `0`.
//!
//! Serialisation recurses at most as deep as the reader allowed
//! ([`crate::json::MAX_DEPTH`]), so it cannot overflow the stack
//! on anything `parse_tool` accepted.

use std::cmp::Ordering;

use crate::json::{parse_tool, ParseError, Value};

/// Why a tool has no canonical form.
#[derive(Debug, thiserror::Error)]
pub enum CanonicalError {
    /// The bytes are not a JSON object that the taxonomy reader accepts.
    #[error("the tool is not valid JSON for taxonomy-v1: {0}")]
    Parse(#[from] ParseError),
    /// A number is NaN or infinite; RFC 8785 section 3.2.2.2 forbids them.
    /// The reader never produces one, but [`canonicalize_value`] accepts
    /// values built by hand.
    #[error("the number {0} has no JSON form (RFC 8785 allows finite numbers only)")]
    NonFiniteNumber(f64),
}

/// The RFC 8785 canonical form of one tool given as raw JSON bytes.
pub fn canonicalize(raw: &[u8]) -> Result<Vec<u8>, CanonicalError> {
    let value = parse_tool(raw)?;
    canonicalize_value(&value)
}

/// The RFC 8785 canonical form of an already parsed value.
pub fn canonicalize_value(value: &Value) -> Result<Vec<u8>, CanonicalError> {
    let mut out = String::new();
    write_value(value, &mut out)?;
    Ok(out.into_bytes())
}

fn write_value(value: &Value, out: &mut String) -> Result<(), CanonicalError> {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => write_number(*n, out)?,
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(item, out)?;
            }
            out.push(']');
        }
        Value::Object(object) => {
            // `Object` iterates in UTF-8 byte order; RFC 8785 wants UTF-16
            // code-unit order. The two agree except when a key holds a
            // supplementary-plane character (UTF-16 surrogates, 0xD800..)
            // where another holds one in U+E000..U+FFFF, so re-sort.
            let mut members: Vec<(&str, &Value)> = object.iter().collect();
            members.sort_by(|a, b| cmp_utf16(a.0, b.0));
            out.push('{');
            for (i, (key, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(key, out);
                out.push(':');
                write_value(member, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

/// Compares two strings as sequences of UTF-16 code units (RFC 8785 3.2.3).
fn cmp_utf16(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Writes a number as ECMAScript's `Number::toString` does.
fn write_number(n: f64, out: &mut String) -> Result<(), CanonicalError> {
    if !n.is_finite() {
        return Err(CanonicalError::NonFiniteNumber(n));
    }
    if n == 0.0 {
        // ECMAScript writes both zeros as "0" (RFC 8785 3.2.2.3).
        out.push('0');
        return Ok(());
    }
    let mut buffer = ryu_js::Buffer::new();
    out.push_str(buffer.format_finite(n));
    Ok(())
}

/// Writes a string as ECMAScript's `JSON.stringify` does (RFC 8785 3.2.2.2).
fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let b = c as u32 as usize;
                out.push_str("\\u00");
                out.push(char::from(HEX[b >> 4]));
                out.push(char::from(HEX[b & 0xf]));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(input: &str) -> String {
        let bytes = canonicalize(input.as_bytes()).expect("canonical form");
        String::from_utf8(bytes).expect("canonical form is UTF-8")
    }

    fn number(bits: u64) -> Result<String, CanonicalError> {
        let mut out = String::new();
        write_number(f64::from_bits(bits), &mut out).map(|()| out)
    }

    /// RFC 8785 Appendix B, "Number Serialization Samples".
    #[test]
    fn numbers_serialise_as_rfc8785_appendix_b() {
        let samples: &[(u64, &str)] = &[
            (0x0000000000000000, "0"),
            (0x8000000000000000, "0"),
            (0x0000000000000001, "5e-324"),
            (0x8000000000000001, "-5e-324"),
            (0x7fefffffffffffff, "1.7976931348623157e+308"),
            (0xffefffffffffffff, "-1.7976931348623157e+308"),
            (0x4340000000000000, "9007199254740992"),
            (0xc340000000000000, "-9007199254740992"),
            (0x4430000000000000, "295147905179352830000"),
            (0x44b52d02c7e14af5, "9.999999999999997e+22"),
            (0x44b52d02c7e14af6, "1e+23"),
            (0x44b52d02c7e14af7, "1.0000000000000001e+23"),
            (0x444b1ae4d6e2ef4e, "999999999999999700000"),
            (0x444b1ae4d6e2ef4f, "999999999999999900000"),
            (0x444b1ae4d6e2ef50, "1e+21"),
            (0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"),
            (0x3eb0c6f7a0b5ed8d, "0.000001"),
            (0x41b3de4355555553, "333333333.3333332"),
            (0x41b3de4355555554, "333333333.33333325"),
            (0x41b3de4355555555, "333333333.3333333"),
            (0x41b3de4355555556, "333333333.3333334"),
            (0x41b3de4355555557, "333333333.33333343"),
            (0xbecbf647612f3696, "-0.0000033333333333333333"),
            (0x43143ff3c1cb0959, "1424953923781206.2"),
        ];
        for &(bits, want) in samples {
            let got = number(bits).expect("finite sample");
            assert_eq!(got, want, "bits {bits:#018x}");
        }
    }

    #[test]
    fn nan_and_infinity_are_errors_as_rfc8785_appendix_b_says() {
        for bits in [0x7fffffffffffffff_u64, 0x7ff0000000000000] {
            assert!(matches!(
                number(bits),
                Err(CanonicalError::NonFiniteNumber(_))
            ));
        }
    }

    /// RFC 8785 section 3.2.4, the complete example.
    #[test]
    fn rfc8785_section_3_2_4_example_canonicalises_exactly() {
        let input = r#"{
  "numbers": [333333333.33333329, 1E30, 4.50,
              2e-3, 0.000000000000000000000000001],
  "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
  "literals": [null, true, false]
}"#;
        let want = concat!(
            r#"{"literals":[null,true,false],"#,
            r#""numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"#,
            "\"string\":\"\u{20ac}$\\u000f\\nA'B\\\"\\\\\\\\\\\"/\"}",
        );
        assert_eq!(canon(input), want);
    }

    /// RFC 8785 section 3.2.3, the sorting example.
    #[test]
    fn members_sort_by_utf16_code_units_as_rfc8785_section_3_2_3() {
        let input = r#"{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}"#;
        let want = concat!(
            "{\"\\r\":\"Carriage Return\",",
            "\"1\":\"One\",",
            "\"\u{80}\":\"Control\",",
            "\"\u{f6}\":\"Latin Small Letter O With Diaeresis\",",
            "\"\u{20ac}\":\"Euro Sign\",",
            "\"\u{1f600}\":\"Emoji: Grinning Face\",",
            "\"\u{fb33}\":\"Hebrew Letter Dalet With Dagesh\"}",
        );
        assert_eq!(canon(input), want);
    }

    #[test]
    fn supplementary_plane_key_sorts_before_private_use_key_unlike_utf8() {
        // U+1F600 is F0 9F 98 80 in UTF-8 (after EE 80 80) but D83D DE00 in
        // UTF-16 (before E000): RFC 8785 follows UTF-16.
        let input = "{\"\u{e000}\":1,\"\u{1f600}\":2}";
        assert!("\u{e000}".as_bytes() < "\u{1f600}".as_bytes());
        assert_eq!(canon(input), "{\"\u{1f600}\":2,\"\u{e000}\":1}");
    }

    #[test]
    fn nested_objects_are_sorted_too() {
        assert_eq!(
            canon(r#"{"b":{"z":1,"a":[{"y":2,"x":3}]},"a":0}"#),
            r#"{"a":0,"b":{"a":[{"x":3,"y":2}],"z":1}}"#
        );
    }

    #[test]
    fn control_characters_escape_as_lowercase_hex_and_the_rest_stays_literal() {
        let input = r#"{"s":"\u0000\u0001\u001f\u007f\b\f\n\r\t\u2028\u200b\/"}"#;
        let want = "{\"s\":\"\\u0000\\u0001\\u001f\u{7f}\\b\\f\\n\\r\\t\u{2028}\u{200b}/\"}";
        assert_eq!(canon(input), want);
    }

    #[test]
    fn white_space_key_order_and_number_spelling_do_not_change_the_form() {
        let a = canon("{ \"name\" : \"add\", \"n\": 1.0 ,\n\"e\":1e2 }");
        let b = canon(r#"{"e":100,"n":1,"name":"add"}"#);
        assert_eq!(a, b);
        assert_eq!(a, r#"{"e":100,"n":1,"name":"add"}"#);
    }

    #[test]
    fn last_duplicate_key_wins_as_in_the_classifier() {
        assert_eq!(canon(r#"{"a":1,"a":2}"#), r#"{"a":2}"#);
    }

    #[test]
    fn lone_surrogate_becomes_replacement_character() {
        assert_eq!(canon(r#"{"a":"\ud800"}"#), "{\"a\":\"\u{fffd}\"}");
    }

    #[test]
    fn canonical_form_is_a_fixed_point() {
        let once = canon(r#"{"b":[1.5e3,true,null],"a":"\u00e9\n"}"#);
        assert_eq!(canon(&once), once);
    }

    #[test]
    fn non_objects_and_invalid_json_are_errors_not_panics() {
        for input in [&b"[1]"[..], b"\"x\"", b"{", b"", b"\xff", b"{\"a\":1}x"] {
            assert!(matches!(canonicalize(input), Err(CanonicalError::Parse(_))));
        }
    }

    #[test]
    fn nesting_beyond_the_reader_limit_is_an_error_and_at_the_limit_is_not() {
        // MAX_DEPTH + 1 levels: MAX_DEPTH wrappers around an empty object.
        let wrappers = crate::json::MAX_DEPTH;
        let input = format!("{}{{}}{}", "{\"a\":".repeat(wrappers), "}".repeat(wrappers));
        assert!(canonicalize(input.as_bytes()).is_err());
        let input = &input[5..input.len() - 1];
        assert!(canonicalize(input.as_bytes()).is_ok());
    }
}
