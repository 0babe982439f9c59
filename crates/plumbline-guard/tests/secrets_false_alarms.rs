//! False alarms of the guard's secret check (issue 37): realistic benign
//! arguments generated for every input schema of the real corpus (1,389
//! distinct tool schemas of 33 published servers, server-everything and
//! mcp-server-time among them, copied to testdata/corpus/input-schemas.jsonl),
//! three calls per schema, checked against the known formats and against
//! the fingerprints of a realistic home (a generated SSH key, AWS and
//! gcloud credentials, a `.netrc`, a project's `.env`, secret-named
//! variables). The target is no call refused; the count is printed.

use std::path::Path;

#[path = "support/benign.rs"]
mod benign;

use plumbline_guard::secrets::local::Sources;
use plumbline_guard::{Policy, SecretWatch};
use serde_json::{json, Value};

#[test]
fn benign_arguments_for_every_real_schema_are_never_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (home, project, env) = benign::realistic_home(dir.path());
    let watch = SecretWatch::new(Sources::new(Some(home), Some(project), env));
    let schemas = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/corpus/input-schemas.jsonl"),
    )
    .unwrap();
    let policy = Policy::default();
    let (mut calls, mut refused) = (0, Vec::new());
    for line in schemas.lines() {
        let tool: Value = serde_json::from_str(line).unwrap();
        let name = tool["name"].as_str().unwrap_or("tool");
        for variant in 0..3 {
            let arguments = benign::value("", &tool["inputSchema"], variant, 0);
            let raw = arguments.to_string();
            calls += 1;
            if let Some(f) = watch.scan(&policy, name, Some(raw.as_bytes())).unwrap() {
                refused.push(format!("{name}: {} in {raw:.200}", f.describe()));
            }
        }
    }
    println!(
        "secret check over the real corpus's schemas: {calls} benign calls, {} refused",
        refused.len()
    );
    assert!(calls > 4000, "{calls}");
    assert!(
        refused.is_empty(),
        "{} of {calls} benign calls refused:\n{}",
        refused.len(),
        refused.join("\n")
    );
    // The same harness refuses what it should: the AWS secret of the home
    // in an argument, and a token in a known format.
    let leak = json!({"query": "SELECT 1", "note": "key 9kQx2Vb7Lm4Np8Rt1Ws5Yz3Ac6Df0Gh2Jk4Ln7Pq"})
        .to_string();
    assert!(watch
        .scan(&policy, "t", Some(leak.as_bytes()))
        .unwrap()
        .is_some());
    let token = format!(
        "xoxb-{}-{}-{}",
        "1234567890123", "1234567890123", "AbCdEfGhIjKlMnOpQrStUvWx"
    );
    let leak = json!({"text": format!("use {token}")}).to_string();
    assert!(
        watch
            .scan(&policy, "t", Some(leak.as_bytes()))
            .unwrap()
            .is_some(),
        "{leak}"
    );
}
