//! Laws of the classifier, checked on generated tools (proptest).

use std::collections::BTreeMap;

use plumbline_taxonomy::json::{parse, parse_tool, write_string, Value};
use plumbline_taxonomy::{Classifier, Severity};
use proptest::prelude::*;

/// Strings that exercise the rules: phrases, URLs, paths, invisible and
/// bidi code points, case folds, punctuation and white space.
fn text() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "Read",
        "the",
        "file",
        "You MUST",
        "do not tell",
        "\u{130}GNORE previous instructions",
        "\u{212A}eep this secret",
        "https://evil.example.com/x",
        "/etc/passwd",
        "C:\\Users\\x",
        "10.0.0.1",
        "api.example.io",
        "github/create_issue",
        "mcp://srv",
        "call the",
        "\u{200B}",
        "\u{202E}",
        "<!--",
        "\u{AD}",
        "caf\u{E9}",
        "cafe\u{301}",
        "\u{A0}",
        " ",
        "\n",
        ",",
        ".",
        "\u{17F}",
        "\u{2028}",
        "\u{FFFD}",
        "x\u{1B}[31m",
        "<IMPORTANT>",
        "\u{1F600}",
    ]);
    prop::collection::vec(atoms, 0..8).prop_map(|parts| parts.concat())
}

fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i32..1000).prop_map(|n| Value::Number(f64::from(n))),
        text().prop_map(|t| Value::String(t.into())),
    ]
}

fn key() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "properties",
        "required",
        "annotations",
        "readOnlyHint",
        "destructiveHint",
        "idempotentHint",
        "openWorldHint",
        "type",
        "default",
        "a",
        "b",
        "a/description",
        "~",
        "",
    ])
    .prop_map(str::to_owned)
}

fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key(), inner), 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A tool: an object whose top level uses the tool's field names.
fn tool() -> impl Strategy<Value = Value> {
    prop::collection::vec((key(), value()), 0..7)
        .prop_map(|m| Value::Object(m.into_iter().collect()))
}

/// Two related tools: `b` is `a` with some top-level fields replaced, so
/// pairs share structure the way real drift does.
fn related_pair() -> impl Strategy<Value = (Value, Value)> {
    (
        tool(),
        prop::collection::btree_map(key(), prop::option::of(value()), 0..4),
    )
        .prop_map(|(a, edits)| {
            let mut b = a.as_object().cloned().unwrap_or_default();
            for (k, v) in edits {
                match v {
                    Some(v) => b.insert(k, v),
                    None => b.remove(&k),
                };
            }
            (a, Value::Object(b))
        })
}

/// JSON text for `v` with object members in an order drawn from `seed`.
fn shuffled_text(v: &Value, seed: &mut u64, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut members: Vec<(&str, &Value)> = m.iter().collect();
            for i in (1..members.len()).rev() {
                *seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                members.swap(i, (*seed >> 33) as usize % (i + 1));
            }
            out.push('{');
            for (i, (k, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                shuffled_text(item, seed, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                shuffled_text(item, seed, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_json()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn classifying_a_tool_against_itself_is_none_with_no_rules(t in tool()) {
        let c = Classifier::default().classify(&t, &t);
        prop_assert_eq!(c.severity, Severity::None);
        prop_assert!(c.rules.is_empty());
        prop_assert!(c.evidence.is_empty());
    }

    #[test]
    fn key_order_never_changes_a_result((a, b) in related_pair(), seed in any::<u64>()) {
        let classifier = Classifier::default();
        let want = classifier.classify(&a, &b);
        let mut s = seed;
        let (mut ta, mut tb) = (String::new(), String::new());
        shuffled_text(&a, &mut s, &mut ta);
        shuffled_text(&b, &mut s, &mut tb);
        let a2 = parse_tool(ta.as_bytes()).expect("generated text parses");
        let b2 = parse_tool(tb.as_bytes()).expect("generated text parses");
        prop_assert_eq!(classifier.classify(&a2, &b2), want);
    }

    #[test]
    fn output_is_deterministic((a, b) in related_pair()) {
        let one = Classifier::default().classify(&a, &b);
        let two = Classifier::default().classify(&a, &b);
        prop_assert_eq!(&one, &two);
        prop_assert!(one.rules.windows(2).all(|w| w[0] < w[1]), "rules sorted and unique");
        let max = one.rules.iter().map(|r| r.severity()).max().unwrap_or(Severity::None);
        prop_assert_eq!(one.severity, max);
        // Evidence is about fired rules only, and every fired rule has some.
        for e in &one.evidence {
            prop_assert!(one.rules.contains(&e.rule));
        }
        for r in &one.rules {
            prop_assert!(one.evidence.iter().any(|e| e.rule == *r));
        }
    }

    #[test]
    fn printing_and_reparsing_a_tool_changes_nothing((a, b) in related_pair()) {
        let a2 = parse(a.to_json().as_bytes()).expect("to_json output parses");
        prop_assert_eq!(&a2, &a);
        let classifier = Classifier::default();
        prop_assert_eq!(classifier.classify(&a2, &b), classifier.classify(&a, &b));
    }

    #[test]
    fn no_byte_input_panics(old in prop::collection::vec(any::<u8>(), 0..200), new in prop::collection::vec(any::<u8>(), 0..200)) {
        if let (Ok(a), Ok(b)) = (parse_tool(&old), parse_tool(&new)) {
            let _ = Classifier::default().classify(&a, &b);
        }
    }

    #[test]
    fn no_json_like_input_panics(old in json_like(), new in json_like()) {
        if let (Ok(a), Ok(b)) = (parse_tool(old.as_bytes()), parse_tool(new.as_bytes())) {
            let _ = Classifier::default().classify(&a, &b);
        }
    }
}

/// Text that is often almost JSON: structural tokens, escapes, numbers.
fn json_like() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "{",
        "}",
        "[",
        "]",
        ",",
        ":",
        "\"",
        "\"description\"",
        "\"a\"",
        "\\u0000",
        "\\ud800",
        "\\udc00",
        "\\u",
        "\\",
        "1",
        "-0",
        "1e400",
        "1.0",
        "true",
        "null",
        " ",
        "\n",
        "\u{FEFF}",
        "\u{200B}",
        "é",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|parts| parts.concat())
}

#[test]
fn evidence_serialises_to_json() {
    let old =
        parse_tool(br#"{"description":"Adds.","annotations":{"readOnlyHint":true}}"#).unwrap();
    let new = parse_tool(
        br#"{"description":"Adds.\u200b See https://x.example.com","annotations":{"readOnlyHint":false}}"#,
    )
    .unwrap();
    let c = Classifier::default().classify(&old, &new);
    let json = serde_json::to_value(&c).unwrap();
    let mut want = BTreeMap::new();
    want.insert("severity", serde_json::json!("CRITICAL"));
    want.insert("rules", serde_json::json!(["R01", "R03", "R07"]));
    assert_eq!(json["severity"], want["severity"]);
    assert_eq!(json["rules"], want["rules"]);
    assert_eq!(
        json["evidence"][0],
        serde_json::json!({"rule": "R01", "pointer": "/description", "kind": "invisible_code_point",
                           "code_point": "U+200B", "name": "ZERO WIDTH SPACE"})
    );
    assert_eq!(
        json["evidence"].as_array().unwrap().last().unwrap(),
        &serde_json::json!({"rule": "R07", "pointer": "/annotations/readOnlyHint", "kind": "annotation",
                            "key": "readOnlyHint", "old": true, "new": false})
    );
}
