//! A routine upgrade, tried as a new user would: the published
//! `@modelcontextprotocol/server-everything` from 2025.11.25 to 2026.8.31
//! (15 tools added or renamed, camelCase names turned kebab-case). The
//! listings are the servers' own `tools/list` output, copied from the
//! project's corpus into `testdata/listings/`.

use plumbline_drift::{drift, Change, Tool};
use plumbline_taxonomy::json::{parse_tool, Value};
use plumbline_taxonomy::{Classifier, RuleId, Severity, Taxonomy};

fn listing(version: &str) -> Vec<(String, Value)> {
    let path = format!(
        "{}/../../testdata/listings/server-everything/{version}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    doc["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| {
            let v = parse_tool(t.to_string().as_bytes()).expect("tool");
            (t["name"].as_str().expect("name").to_owned(), v)
        })
        .collect()
}

fn view(tools: &[(String, Value)]) -> Vec<Tool<'_>> {
    tools
        .iter()
        .map(|(name, definition)| Tool { name, definition })
        .collect()
}

#[test]
fn an_upgrade_adds_no_high_tool_for_its_inputs_schema_or_annotations() {
    let (old, new) = (listing("2025.11.25"), listing("2026.8.31"));
    for taxonomy in Taxonomy::ALL {
        let d = drift(
            &Classifier::for_taxonomy(taxonomy),
            &view(&old),
            &view(&new),
        );
        let mut added = 0;
        for t in d.tools.iter().filter(|t| t.change == Change::Added) {
            added += 1;
            // What remains is what the model reads: a default URL in
            // gzip-file-as-resource is a new endpoint (R03), rightly.
            assert!(
                t.severity >= Severity::Low,
                "{taxonomy}: {} is for review",
                t.name
            );
            for e in &t.classification.evidence {
                assert!(
                    !matches!(e.rule, RuleId::R04 | RuleId::R06 | RuleId::R07)
                        && !e.pointer.ends_with("/$schema"),
                    "{taxonomy}: added {} graded for {}: {}",
                    t.name,
                    e.pointer,
                    e.message()
                );
            }
        }
        assert!(added > 0, "{taxonomy}: the upgrade adds tools");
        // camelCase → kebab-case: the same tool, renamed.
        for (from, to) in [
            ("getTinyImage", "get-tiny-image"),
            ("getResourceReference", "get-resource-reference"),
            ("getResourceLinks", "get-resource-links"),
        ] {
            let t = d
                .tools
                .iter()
                .find(|t| t.name == to)
                .unwrap_or_else(|| panic!("{to} in the drift"));
            assert_eq!(
                t.change,
                Change::Renamed {
                    from: from.to_owned()
                },
                "{taxonomy}: {to}"
            );
        }
    }
}
